"""Auth-outage parks (seed 003 QuotaResetCheckerJob's un-park; seed 004 "A pause outranks
precedence"), as far as the doors need them.

The runtime reports a park when a session's turn cannot run because its account's credentials are
out: the session sleeps in waiting with `paused_by: auth_outage`. Two populations, and neither
starts the other's sessions: priority parks are this sweep's (every 15 minutes, once their account
reads active again, at most 5 a sweep, oldest park first, so a recovered pool is not re-drained by
the whole cohort at once); spot parks are the spot queue's (the ceiling sweep resumes them in
precedence order). A session with a wall-clock pause ahead is skipped: the pause outranks it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Text, and_, literal_column, or_, select

from zimmer_common.contracts.spot import SESSION_PAUSED, ParkForAuthOutage, SessionEvent, SessionView
from zimmer_common.logs import kv
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.model import SessionStatus
from zimmer_spot_gate.handlers import session_log
from zimmer_spot_gate.handlers.turns import TurnGate, run_edges
from zimmer_spot_gate.jobs.ceiling import resume
from zimmer_spot_gate.store import quota, replay_records
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.store.tables import accounts
from zimmer_spot_gate.store.tables import sessions as s

log = logging.getLogger("zimmer.spot_gate.parks")
AUTH_OUTAGE = "auth_outage"
UNPARK_PER_SWEEP = 5
AUTH_NUDGE = ("SYSTEM RECOVERY: this session was parked while its account's credentials were out; the account has "
              "recovered. Pick up where you left off.")


class Parks:
    def __init__(self, units: UnitsOfWork, gate: TurnGate, now: Callable[[], datetime]):
        self.units = units
        self.gate = gate
        self.now = now

    async def park(self, req: ParkForAuthOutage) -> SessionView:
        now = self.now()
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)
            row = await store.fetch_live(conn, req.session_id, "it cannot be parked")
            overrides = (await quota.policy(conn)).overrides
            view = store.to_view(await store.update_fields(
                conn, req.session_id, status=SessionStatus.WAITING.value, paused_by=AUTH_OUTAGE,
                spot_pause_at=now, spot_pause_reason=AUTH_OUTAGE, parked_account=req.account,
                spot_pause_detail=f"The credentials of {req.account or 'its account'} are out.",
                spot_pause_acked_at=now), overrides)
            await replay_records.record_run_edges(conn, run_edges(row._mapping, view.status, overrides), now)
            await uow.emit(SESSION_PAUSED, "session_paused", SessionEvent(
                session=view, previous={"status": row.status}, spawned_by=(row.metadata or {}).get("spawned_by")))
            sentence = view.pause_sentence or "Parked by an auth outage of its account."
            await store.log_decisions(conn, [{"session_id": req.session_id, "allowed": False, "reason": AUTH_OUTAGE,
                                              "sentence": sentence, "event": "auth_park"}], now)
            await session_log.write(uow, now, [(req.session_id, "warning", sentence)])
        return view

    async def unpark(self) -> list[int]:
        """Resume priority parks whose account recovered: 5 a sweep, oldest park first."""
        now = self.now()
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)
            overrides = (await quota.policy(conn)).overrides
            active = select(accounts.c.account).where(accounts.c.status == "active")  # as its newest reading says
            recovered = or_(and_(s.c.parked_account.is_(None), active.exists()),
                            active.where(accounts.c.account == s.c.parked_account).exists())
            ids = list((await conn.execute(
                select(s.c.id).where(s.c.paused_by == AUTH_OUTAGE, s.c.status == literal_column("'waiting'", Text),
                                     store.class_expr(overrides) == literal_column("'priority'", Text),
                                     ~store.wake_ahead(now), recovered)
                .order_by(s.c.spot_pause_at, s.c.id).limit(UNPARK_PER_SWEEP))).scalars())
            await resume(self.gate, uow, ids, {sid: AUTH_NUDGE for sid in ids}, event="auth_unpark", at=now)
        if ids:
            log.info("resumed priority sessions parked by an auth outage", extra=kv(sessions=ids))
        return ids
