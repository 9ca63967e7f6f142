"""SpotCeilingSweepJob (seed 004 "The budget is a ceiling"; seed 003): the edge around
`domain/ceiling.py`. One transaction under the admission lock, so a sweep and the turns being
decided see each other: a pause, its stop_turn command and its event commit together, and so does
a resume's turn (through the ordinary gate, as any turn).

A pause stops the turn (the runtime terminates the CLI process) and leaves the session dormant in
waiting with `paused_by: spot_quota`, which keeps every other recovery path out of it. Until the
runtime's status report acknowledges the stop, the session keeps its slot (its process may still
be running). The resume carries the standard system-recovery nudge, or the session's "Resume
with" prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Text, and_, case, func, literal_column, null, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.runtime import STOP_TURN, StopTurn
from zimmer_common.contracts.spot import SESSION_PAUSED, SessionEvent
from zimmer_common.logs import kv
from zimmer_common.unit_of_work import UnitOfWork, UnitsOfWork
from zimmer_spot_gate.domain.ceiling import RESUME_BATCH, CeilingPlan, Sleeper, plan_ceiling
from zimmer_spot_gate.domain.gate import WINDOW_NAMES, Candidate, Decision, FleetState
from zimmer_spot_gate.domain.model import Ceiling, Reason, TurnKind
from zimmer_spot_gate.handlers import session_log
from zimmer_spot_gate.handlers.snapshot import GateInputs
from zimmer_spot_gate.handlers.turns import TurnGate, TurnRequest, decision_view, inputs_of
from zimmer_spot_gate.store import replay_records
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.store.quota import PolicyRow
from zimmer_spot_gate.store.tables import sessions as s

log = logging.getLogger("zimmer.spot_gate.ceiling")

SPOT_QUOTA = "spot_quota"
AUTH_OUTAGE_NUDGE = ("SYSTEM RECOVERY: this session was parked while its account's credentials were out; the spot "
                     "queue has reached it. Pick up where you left off.")
RECOVERY_NUDGE = ("SYSTEM RECOVERY: this session was paused mid-run for quota headroom and has been resumed. "
                  "The tool call that was in flight when it stopped was lost; what you had written to disk is still "
                  "there. Check the state of your work and pick up where you left off.")

_ASLEEP = (s.c.status == "waiting", s.c.spot_pause_acked_at.is_not(None))
# The spot queue: paused by the ceiling or parked by a person, and spot sessions an auth outage
# parked (priority auth parks are the un-park sweep's: neither population starts the other's).
_QUEUED = or_(s.c.paused_by == SPOT_QUOTA, s.c.paused_by == "auth_outage")
RESUME_ORDER = (s.c.precedence.desc(), s.c.spot_pause_at, s.c.id)


def _exemption(overrides: Any) -> ColumnElement[str]:
    """Why a session never asks the gate, or NULL for spot work, in SQL (mirrors `turns.exemption`)."""
    return case((store.class_expr(overrides) == literal_column("'priority'", Text), literal_column("'priority'")),
                (s.c.runtime == "codex", literal_column("'codex'")),
                (s.c.is_status_summary_fork, literal_column("'status_summary_fork'")), else_=null())


def _plan_columns(overrides: Any) -> tuple[Any, ...]:
    """What the plan needs of a session, computed by PostgreSQL (the sweep reads every running
    session under the admission lock: Python-side row handling was half of its time)."""
    exempt = _exemption(overrides)
    return (s.c.id, s.c.precedence, s.c.created_at, s.c.spot_pause_at, s.c.harness, s.c.model, s.c.resume_prompt,
            s.c.paused_by,
            exempt.label("exempt"),
            and_(s.c.runtime == "claude_code", ~s.c.is_status_summary_fork).label("takes_slot"))


@dataclass
class CeilingReport:
    decision: Decision
    paused: list[int] = field(default_factory=list)
    resumed: list[int] = field(default_factory=list)
    still_paused: int = 0
    held_by_wake: int = 0  # paused sessions skipped: a wall-clock pause is still ahead of them


def _sleeper(r: Any, burn_of: Callable[[str, str], float], since: datetime) -> Sleeper:
    return Sleeper(r.id, r.precedence, since, r.exempt, burn_of(r.harness, r.model), r.takes_slot)


class CeilingSweep:
    def __init__(self, units: UnitsOfWork, gate: TurnGate, now: Callable[[], datetime],
                 on_outcome: Callable[[str, int], None] = lambda k, n: None):
        self.units = units
        self.gate = gate
        self.now = now
        self.on_outcome = on_outcome  # metrics: ("paused" | "resumed", how many)

    async def run(self) -> CeilingReport:
        async with self.units.begin() as uow:
            report = await self._sweep(uow)
        self.on_outcome("paused", len(report.paused))
        self.on_outcome("resumed", len(report.resumed))
        if report.paused or report.resumed:
            log.info("ceiling sweep", extra=kv(reason=report.decision.reason.value, paused=report.paused,
                                               resumed=report.resumed, still_paused=report.still_paused))
        return report

    async def _sweep(self, uow: UnitOfWork) -> CeilingReport:
        conn = uow.conn
        g = await read_gate(self.gate, conn)
        now, overrides = self.now(), g.policy.overrides
        columns = _plan_columns(overrides)
        running = [_sleeper(r, g.inputs.burn_of, r.created_at) for r in await conn.execute(
            select(*columns).where(s.c.status == "running", s.c.paused_by.is_(None)))]
        # Paused sessions: every one that no longer asks the gate, and the head of the spot queue (a
        # sweep resumes at most RESUME_BATCH), however long the queue behind it is.
        # A session with a wall-clock pause ahead is skipped, before the promotion branch (making it
        # priority does not start it either), and counted held.
        exempt, ahead = _exemption(overrides).is_not(None), store.wake_ahead(now)
        head = (select(*columns).where(*_ASLEEP, _QUEUED, ~ahead, ~exempt).order_by(*RESUME_ORDER)
                .limit(RESUME_BATCH))
        promoted = select(*columns).where(*_ASLEEP, s.c.paused_by == SPOT_QUOTA, ~ahead, exempt)
        rows = {r.id: r for r in [*await conn.execute(promoted), *await conn.execute(head)]}
        queued = (await conn.execute(select(func.count()).where(*_ASLEEP, _QUEUED, ~ahead, ~exempt))).scalar_one()
        held = (await conn.execute(select(func.count()).where(*_ASLEEP, _QUEUED, ahead))).scalar_one()
        paused = [_sleeper(r, g.inputs.burn_of, r.spot_pause_at) for r in rows.values()]
        plan = plan_ceiling(running, paused, g.fleet, g.decide)
        await self._pause(uow, plan, now, overrides)
        d = plan.decision  # every sweep's own decision, paused or not: the policy dry-run replays it
        await replay_records.record_sweep(conn, now, d.allowed, d.reason.value, d.ceiling.value if d.ceiling else None,
                                          len(plan.pause), inputs_of(d))
        await replay_records.prune(conn, now)
        if plan.kept is not None:  # the gate kept the head of the queue paused: why, in its log
            sid, kept = plan.kept
            await store.log_decisions(conn, [decision_row(sid, "ceiling_kept", kept)], now)
        resumed = [*plan.promoted, *plan.resume]
        await resume(self.gate, uow, resumed, {sid: rows[sid].resume_prompt or (
            AUTH_OUTAGE_NUDGE if rows[sid].paused_by == "auth_outage" else None) for sid in resumed},
            event="ceiling_resume", at=now)
        return CeilingReport(plan.decision, list(plan.pause), resumed, queued - len(plan.resume), held)

    async def _pause(self, uow: UnitOfWork, plan: CeilingPlan, now: datetime, overrides: Any) -> None:
        """Every pause in one statement, and its stop_turn, event, decision-log row and session-log
        line in the same transaction."""
        if not plan.pause:
            return
        d = plan.decision
        window = WINDOW_NAMES[d.holding_window] + " window" if d.holding_window else "a quota window"
        ran_out = "its spot budget" if d.ceiling is Ceiling.SPOT_BUDGET else "room under its pacing curve"
        line = (f"Paused mid-run for quota headroom: the {window} ran out of {ran_out}. {d.sentence} "
                "It resumes when the windows have 5 points more headroom than their reserve, highest precedence "
                "first, up to 5 a sweep every 5 minutes; making it priority resumes it on the next sweep.")
        events: list[tuple[str, str, Any]] = []
        conn = uow.conn
        paused = list(await conn.execute(update(s).where(s.c.id.in_(plan.pause)).values(
            paused_by=SPOT_QUOTA, spot_pause_at=now, spot_pause_reason=Reason.AT_UTILIZATION_LIMIT.value,
            spot_pause_detail=d.sentence, spot_pause_count=s.c.spot_pause_count + 1, spot_pause_acked_at=None,
            updated_at=func.now(), version=s.c.version + 1).returning(*store.COLUMNS)))
        for row in paused:
            events.append((STOP_TURN, "stop_turn", StopTurn(session_id=row.id, mode="halt", reason=d.sentence)))
            events.append((SESSION_PAUSED, "session_paused", SessionEvent(
                session=store.to_view(row, overrides), previous={"paused_by": None},
                spawned_by=(row.metadata or {}).get("spawned_by"))))
        await uow.emit_many(events)
        await store.log_decisions(conn, [decision_row(row.id, "ceiling_pause", d) for row in paused], now)
        await session_log.write(uow, now, [(row.id, "warning", line) for row in paused])
        log.warning("spot sessions paused mid-run for quota headroom", extra=kv(
            sessions=[row.id for row in paused], window=window, ran_out_of=ran_out, detail=d.sentence))


def decision_row(session_id: int, event: str, d: Decision, turn_kind: str | None = None) -> dict[str, Any]:
    """A decision-log row for an outcome that is not a turn's admission."""
    return {"session_id": session_id, "turn_kind": turn_kind, "allowed": d.allowed, "reason": d.reason.value,
            "ceiling": d.ceiling.value if d.ceiling else None, "sentence": d.sentence, "event": event,
            "numbers": decision_view(d).model_dump_json(), "inputs": inputs_of(d)}


@dataclass(frozen=True)
class GateReading:
    """The gate's inputs as one transaction reads them, under the admission lock."""

    inputs: GateInputs
    fleet: FleetState

    @property
    def policy(self) -> PolicyRow:
        return self.inputs.policy

    @property
    def readable(self) -> bool:  # False: the pool could not be read (the quota checks would fail open)
        return self.inputs.parts is not None

    def decide(self, candidate: Candidate, at: FleetState, margin: float = 0.0) -> Decision:
        return self.inputs.decide(at, candidate, margin)


async def read_gate(turn_gate: TurnGate, conn: AsyncConnection) -> GateReading:
    inputs, fleet = await turn_gate.read_inputs(conn)
    return GateReading(inputs, fleet)


async def resume(turn_gate: TurnGate, uow: UnitOfWork, ids: list[int], prompts: dict[int, str | None], *,
                 event: str, at: datetime) -> list[Any]:
    """In `uow`, a pause's own resume: the record cleared and a restart turn carrying the session's "Resume
    with" prompt or the recovery nudge, through the gate like any turn; the session's log says so."""
    if not ids:
        return []
    for sid in ids:
        await store.end_pause(uow.conn, sid)
    results = await turn_gate.process(uow.conn, [TurnRequest(sid, TurnKind.RESTART, prompts.get(sid) or RECOVERY_NUDGE,
                                                         event=event) for sid in ids])
    lines: list[tuple[int, Any, str]] = []
    for sid, out in zip(ids, results, strict=True):
        outcome = getattr(out, "outcome", None)
        if outcome in ("admitted", "passed"):
            lines.append((sid, "info", RESUMED_LINE[event]))
        elif outcome == "held":
            lines.append((sid, "info", f"{RESUMED_LINE[event]} Its turn is held at the gate: "
                                       f"{out.decision.sentence if out.decision else ''}".rstrip()))
    await session_log.write(uow, at, lines)
    return results


RESUMED_LINE = {
    "ceiling_resume": "Resumed from the spot queue: the windows have headroom again.",
    "auth_unpark": "Resumed after an auth outage: its account's credentials are back.",
    "start_now": "Resumed now by a person (start now).",
    "promote": "Resumed now: made priority.",
}
