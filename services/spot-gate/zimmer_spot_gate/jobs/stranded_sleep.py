"""StrandedSleepSweepJob (seed 003; production and staging only: the repair spends a turn).

A session that ran and went to sleep in waiting can lose what was going to wake it: production
session 6412 sat 38.7 hours (#855). The predicate is "no fireable wake", not "no wake": a session
in waiting that has run, with no hold, no pause, no queued message and no armed wake still ahead
or just come due (a wake due within SCHEDULE_FIRE_SETTLE is still in flight: the firing job runs
every minute), quiet for GRACE, is stranded. Each pass resumes at most MAX_ACTIONS_PER_SWEEP with
the system-recovery nudge, through the gate; a session rescued MAX_RESCUES times pages instead and
is left alone (not resumed forever).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Text, func, literal_column, select, update

from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.model import TurnKind
from zimmer_spot_gate.handlers.turns import TurnGate, TurnRequest
from zimmer_spot_gate.store.tables import enqueued_messages as m
from zimmer_spot_gate.store.tables import session_wakes as w
from zimmer_spot_gate.store.tables import sessions as s

log = logging.getLogger("zimmer.spot_gate.stranded_sleep")

GRACE = timedelta(minutes=15)
SCHEDULE_FIRE_SETTLE = timedelta(minutes=10)
MAX_EXAMINED_PER_SWEEP = 1000
MAX_ACTIONS_PER_SWEEP = 5
MAX_RESCUES = 3
SYSTEM_RECOVERY = ("SYSTEM RECOVERY: this session was asleep in waiting on a wake-up that could never fire, and has "
                   "been resumed. Check where your work stands and continue, or sleep again with wake_me_up_later.")


def stranded(now: datetime) -> Any:
    """Sleepers nothing will wake, quietest first."""
    fireable = select(w.c.id).where(w.c.session_id == s.c.id, w.c.fired_at.is_(None), w.c.cancelled_at.is_(None),
                                    w.c.wake_at > now - SCHEDULE_FIRE_SETTLE).exists()
    queued = select(m.c.id).where(m.c.session_id == s.c.id, m.c.delivered_at.is_(None)).exists()
    return (select(s.c.id, s.c.stranded_rescues, s.c.updated_at)
            .where(s.c.status == literal_column("'waiting'", Text), s.c.ever_started, s.c.spot_hold_reason.is_(None),
                   s.c.paused_by.is_(None), s.c.updated_at < now - GRACE, ~fireable, ~queued)
            .order_by(s.c.updated_at, s.c.id).limit(MAX_EXAMINED_PER_SWEEP))


@dataclass
class SleepReport:
    examined: int = 0
    resumed: list[int] = field(default_factory=list)
    given_up: list[int] = field(default_factory=list)  # past MAX_RESCUES: paged, left alone


class StrandedSleepSweep:
    def __init__(self, units: UnitsOfWork, gate: TurnGate, now: Callable[[], datetime], pager: Pager):
        self.units = units
        self.gate = gate
        self.now = now
        self.pager = pager

    async def run(self) -> SleepReport:
        report = SleepReport()
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)  # the same order every writer of turn state takes
            rows = list((await conn.execute(stranded(self.now()))).all())
            report.examined = len(rows)
            for row in rows:
                if len(report.resumed) + len(report.given_up) >= MAX_ACTIONS_PER_SWEEP:
                    break
                if row.stranded_rescues >= MAX_RESCUES:
                    report.given_up.append(row.id)
                    continue
                # An overdue wake that never fired would otherwise deliver a second turn later.
                await conn.execute(update(w).where(w.c.session_id == row.id, w.c.fired_at.is_(None),
                                                   w.c.cancelled_at.is_(None)).values(cancelled_at=func.now()))
                await conn.execute(update(s).where(s.c.id == row.id).values(stranded_rescues=s.c.stranded_rescues + 1))
                await self.gate.process(conn, [TurnRequest(row.id, TurnKind.RESTART, SYSTEM_RECOVERY)])
                report.resumed.append(row.id)
        if report.resumed:
            log.warning("resumed sessions asleep on a wake that could never fire",
                        extra=kv(sessions=report.resumed, examined=report.examined))
        if report.given_up:
            await self.pager.report(
                title="Spot gate: sessions keep falling asleep with nothing to wake them",
                fingerprint=["spot-gate", "stranded_sleep", "max_rescues"], level="error",
                message=f"{len(report.given_up)} sessions were rescued {MAX_RESCUES} times and are stranded again; "
                        "they are left asleep rather than resumed forever. Look at what they wait for.",
                context={"sessions": report.given_up}, source="spot-gate/stranded_sleep_sweep",
                condition_key="spot-gate/stranded_sleep/max_rescues")  # one episode, not a page every pass
        return report
