"""Every turn is gated: the edge around the turn state machine (`domain/turnflow.py`).

Turns are decided in batches, inside the caller's transaction, under one transaction-scoped
advisory lock: the decisions of a batch see each other's admissions (the slot count is exact
across concurrent requests and across replicas), and a batch costs a handful of statements
however many turns it carries. The decision, the hold record, the queued turns, the decision
log, the status events and the start_turn commands commit together or not at all.

The pool's side of the gate's inputs is read before the lock and on the caller's connection (a
savepoint), so the lock holder never needs a second connection: admission cannot starve the
connection pool, and congestion is never a reason to admit. `unavailable` (fail open) is for
inputs that could not be read; an outage of the database itself fails the batch instead, with
nothing done.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.runtime import START_TURN, StartTurn
from zimmer_common.contracts.spot import SESSION_STATUS_CHANGED, DecisionView, SessionEvent, TurnResult
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.idempotency import KeyRef
from zimmer_common.outage import classify
from zimmer_spot_gate.domain.classes import resolve_class
from zimmer_spot_gate.domain.gate import Candidate, Decision, FleetState, WindowNumbers
from zimmer_spot_gate.domain.gate_record import call_json
from zimmer_spot_gate.domain.model import Genesis, Reason, Runtime, SchedulingClass, SessionStatus, TurnKind
from zimmer_spot_gate.domain.turnflow import Ask, BatchPlan, Hold, Logged, Outcome, Session, Turn, Verdict, plan_batch
from zimmer_spot_gate.handlers.snapshot import GateInputs, PoolCache, PoolParts
from zimmer_spot_gate.store import quota, replay_records
from zimmer_spot_gate.store import sessions as store

SCHEMA = "spot_gate"
ADMISSION_LOCK = "zimmer.spot_gate.admission"


def decision_view(d: Decision) -> DecisionView:
    return DecisionView(allowed=d.allowed, reason=d.reason.value, ceiling=d.ceiling.value if d.ceiling else None,
                        sentence=d.sentence, windows=[_numbers(n) for n in d.windows],
                        accounts_averaged=d.accounts_averaged, accounts_in_pool=d.accounts_in_pool)


def inputs_of(d: Decision) -> str | None:
    """The call `d` was made from, as JSON text for the decision log: what the dry-run replays."""
    return json.dumps(call_json(d.call)) if d.call is not None else None


def _numbers(n: WindowNumbers) -> dict[str, Any]:
    # Flat and hot (every decision): a shallow copy of its fields, not dataclasses.asdict's deep one.
    return {**vars(n), "window": n.window.value}


def exemption(s: Mapping[str, Any], overrides: Any) -> str | None:
    """Why this session is never consulted, or None for a spot session the gate decides on."""
    own = SchedulingClass(s["scheduling_class"]) if s["scheduling_class"] else None
    if resolve_class(own, Genesis(s["genesis"]), overrides) is SchedulingClass.PRIORITY:
        return "priority"
    if s["runtime"] == Runtime.CODEX.value:
        return "codex"  # spends nothing against a Claude window and takes no slot
    if s["is_status_summary_fork"]:
        return "status_summary_fork"
    return None


def takes_slot(s: Mapping[str, Any]) -> bool:
    return s["runtime"] == Runtime.CLAUDE_CODE.value and not s["is_status_summary_fork"]


def run_edges(before: Mapping[str, Any], status: str, overrides: Any) -> list[dict[str, Any]]:
    """The session starting or stopping running as it moves from `before` to `status`, for the run
    log the policy dry-run replays (`store.replay_records`); nothing when it does neither."""
    was, now = before["status"] == SessionStatus.RUNNING.value, status == SessionStatus.RUNNING.value
    if was == now:
        return []
    return [{"session_id": before["id"], "running": now, "takes_slot": takes_slot(before),
             "exempt": exemption(before, overrides)}]


def to_session(row: dict[str, Any], overrides: Any, inputs: GateInputs) -> Session:
    hold = None
    if row["spot_hold_reason"] is not None:
        hold = Hold(Reason(row["spot_hold_reason"]), row["spot_hold_retry_at"],
                    Turn(TurnKind(row["held_turn_kind"] or TurnKind.FIRST_START.value), row["held_prompt"],
                         tuple(row["held_attachments"] or ())))
    return Session(id=row["id"], status=SessionStatus(row["status"]), exempt=exemption(row, overrides),
                   takes_slot=takes_slot(row), burn=inputs.burn_of(row["harness"], row["model"]),
                   precedence=row["precedence"], created_at=row["created_at"], hold=hold,
                   hold_count=row["spot_hold_count"], ever_started=row["ever_started"])


@dataclass(frozen=True)
class TurnRequest:
    session_id: int
    kind: TurnKind | None = None  # None with recheck: the turn the hold carries
    prompt: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    recheck: bool = False  # the held session's re-check
    force: bool = False  # re-check now whatever the retry time (its class changed)
    key: KeyRef | None = None  # the caller's idempotency key: a retry gets the first answer
    boundary: bool = False  # the next queued turn of a running session whose turn just ended
    event: str = "turn"  # what the decision log calls the outcome (ceiling_resume, auth_unpark, …)
    consume_pause: bool = False  # a follow-up addressed to the session directly: its wall-clock pause is consumed

    def ask(self) -> Ask:
        if self.recheck:
            return Ask(self.session_id, None, self.force, event=self.event)
        assert self.kind is not None
        return Ask(self.session_id, Turn(self.kind, self.prompt, tuple(self.attachments)), self.force,
                   boundary=self.boundary, event=self.event)


Result = TurnResult | ZimmerError | None
# The pool's side of the gate's inputs, or why it could not be read (the quota checks then fail open).
PoolRead = tuple[PoolParts | None, BaseException | None]


class TurnGate:
    def __init__(self, now: Callable[[], datetime], pool: PoolCache, jitter: Callable[[], float] = random.random,
                 on_decision: Callable[[str], None] = lambda reason: None):
        self.now = now
        self.pool = pool
        self.jitter = jitter
        self.on_decision = on_decision  # metrics: each decision's reason

    async def lock_admissions(self, conn: AsyncConnection) -> None:
        """Take the admission lock; callers that will lock session rows first must take it before them."""
        await store.advisory_xact_lock(conn, ADMISSION_LOCK)

    async def request_turn(self, conn: AsyncConnection, session_id: int, kind: TurnKind, prompt: str | None,
                           attachments: list[dict[str, Any]], *, boundary: bool = False,
                           event: str = "turn") -> TurnResult:
        [out] = await self.process(conn, [TurnRequest(session_id, kind, prompt, list(attachments), boundary=boundary,
                                                      event=event)])
        if isinstance(out, ZimmerError):
            raise out
        assert out is not None
        return out

    async def recheck(self, conn: AsyncConnection, session_id: int, *, force: bool = False,
                      event: str = "turn") -> TurnResult | None:
        [out] = await self.process(conn, [TurnRequest(session_id, recheck=True, force=force, event=event)])
        if isinstance(out, ZimmerError):
            raise out
        return out

    async def process(self, conn: AsyncConnection, requests: list[TurnRequest],
                      policy: quota.PolicyRow | None = None, *, locked: PoolRead | None = None) -> list[Result]:
        """Decide `requests` together. `locked`: the caller already holds the admission lock,
        having read the pool's side before it (`lock_with_pool`)."""
        inputs, fleet = await self.read_inputs(conn, policy, locked=locked)
        consumed = sorted({q.session_id for q in requests if q.consume_pause})
        if consumed:  # in the turn's own transaction: the pause ends if and only if the turn is decided
            await store.cancel_wakes_of(conn, consumed)
        rows = await store.fetch_many_locked(conn, sorted({q.session_id for q in requests}))
        overrides = inputs.policy.overrides
        sessions = {sid: to_session(r, overrides, inputs) for sid, r in rows.items()}

        def gate(s: Session, fleet: FleetState) -> Decision:
            # A session still running (at its turn boundary) holds its slot: no slot check for it.
            return inputs.decide(fleet, Candidate(s.burn, already_running=s.status is SessionStatus.RUNNING))

        plan = plan_batch(sessions, [q.ask() for q in requests], fleet, gate, self.now(), self.jitter)
        for logged in plan.decisions:
            if logged.decision is not None:
                self.on_decision(logged.decision.reason.value)
        return await self._write(conn, rows, plan, overrides)

    async def lock_with_pool(self, conn: AsyncConnection) -> PoolRead:
        """The pool's side of the gate's inputs (cached, on this connection), then the admission lock."""
        read = await self.pool_parts(conn)  # before the lock: the lock holder needs no second connection
        await self.lock_admissions(conn)
        return read

    async def read_inputs(self, conn: AsyncConnection, policy: quota.PolicyRow | None = None, *,
                          locked: PoolRead | None = None) -> tuple[GateInputs, FleetState]:
        """The gate's inputs for a decision under the admission lock: the pool's side first (cached,
        on this connection), then the lock (unless `locked`: the caller took both), then the policy
        and the fleet as they are now. Every path that decides takes them here, so each decides with
        the same function over the same snapshot (`GateInputs.decide`)."""
        parts, failure = locked if locked is not None else await self.lock_with_pool(conn)
        fallback = parts.fallback_burn if parts else 0.0
        if policy is None:
            policy, fleet = await quota.policy_and_fleet(conn, fallback)
        else:
            fleet = await quota.fleet(conn, fallback)
        return GateInputs(policy, parts, failure), fleet

    async def pool_parts(self, conn: AsyncConnection) -> PoolRead:
        try:
            return await self.pool.get(conn), None
        except Exception as exc:
            if classify(exc) is not None:
                raise  # the database itself is down: nothing is decided, nothing committed
            return None, exc  # the inputs could not be read: the quota checks fail open, saying why

    async def _write(self, conn: AsyncConnection, rows: dict[int, dict[str, Any]], plan: BatchPlan,
                     overrides: Any) -> list[Result]:
        changed = sorted(plan.changed)
        after = {sid: _row_of(rows[sid], plan.sessions[sid]) for sid in changed}
        for sid in changed:  # what the write stamps (`fetch_many_locked`): the views and events carry it
            after[sid]["updated_at"], after[sid]["version"] = rows[sid]["stamp"]
        # Each view built once.
        seen = {id(d.decision): decision_view(d.decision) for d in plan.decisions if d.decision is not None}
        queued: dict[int, int] = {}
        for sid, _t in plan.queued:
            queued[sid] = queued.get(sid, 0) + 1
        touched = {o.session_id for o in plan.outcomes if o.verdict not in (Verdict.NOT_FOUND, Verdict.NOTHING)}
        views = {sid: store.view_of({**(after.get(sid) or rows[sid]), "enqueued": rows[sid]["enqueued"] + queued.get(sid, 0)},
                                    overrides) for sid in touched}
        events: list[tuple[str, str, Any]] = []
        for sid in changed:
            before, new = rows[sid], after[sid]
            if (before["status"], before["spot_hold_reason"]) != (new["status"], new["spot_hold_reason"]):
                events.append((SESSION_STATUS_CHANGED, "session_status_changed", SessionEvent(
                    session=views.get(sid) or store.view_of(new, overrides),
                    previous={"status": before["status"], "spot_hold_reason": before["spot_hold_reason"]},
                    spawned_by=(before["metadata"] or {}).get("spawned_by"))))
        commands = [(START_TURN, "start_turn", StartTurn(
            session_id=sid, turn_kind=t.kind.value, prompt=t.prompt, attachments=list(t.attachments),
            runtime=rows[sid]["runtime"], harness=rows[sid]["harness"], model=rows[sid]["model"]))
            for sid, t in plan.starts]
        # The rows, the decision log and the events in one statement: one round trip under the lock.
        now = self.now()
        await store.save_turn_state(conn, [after[sid] for sid in changed], [_log_row(d, seen) for d in plan.decisions],
                                    now, events + commands)
        await replay_records.record_run_edges(
            conn, [e for sid in changed for e in run_edges(rows[sid], after[sid]["status"], overrides)], now)
        await store.enqueue_messages(conn, [{"s": sid, "k": t.kind.value, "p": t.prompt, "a": store.dumps(list(t.attachments))}
                                            for sid, t in plan.queued])
        for sid, _t in plan.starts:  # a paused session that starts again (a direct follow-up): its pause is over
            if rows[sid].get("paused_by") is not None:
                await store.end_pause(conn, sid)
        return [_result(o, views, seen) for o in plan.outcomes]


def _log_row(d: Logged, seen: dict[int, DecisionView]) -> dict[str, Any]:
    if d.decision is None:
        return {"session_id": d.session_id, "turn_kind": d.turn.kind.value, "allowed": True, "reason": "passed",
                "ceiling": None, "sentence": f"Started without asking the gate: {d.exempt or 'not gated'}.",
                "numbers": "{}", "event": d.event, "inputs": None}
    n = d.decision
    return {"session_id": d.session_id, "turn_kind": d.turn.kind.value, "allowed": n.allowed, "reason": n.reason.value,
            "ceiling": n.ceiling.value if n.ceiling else None, "sentence": n.sentence,
            "numbers": seen[id(n)].model_dump_json(), "event": d.event, "inputs": inputs_of(n)}


def _row_of(row: dict[str, Any], s: Session) -> dict[str, Any]:
    """The session's row as the plan leaves it."""
    hold = s.hold
    return {**row, "status": s.status.value, "ever_started": s.ever_started, "spot_hold_count": s.hold_count,
            "spot_hold_reason": hold.reason.value if hold else None, "spot_hold_retry_at": hold.retry_at if hold else None,
            "held_turn_kind": hold.turn.kind.value if hold else None, "held_prompt": hold.turn.prompt if hold else None,
            "held_attachments": list(hold.turn.attachments) if hold else None}


def _result(o: Outcome, views: dict[int, Any], decided: dict[int, DecisionView]) -> Result:
    if o.verdict is Verdict.NOT_FOUND:
        return ZimmerError(ErrorCode.NOT_FOUND, f"session {o.session_id} does not exist", {"session_id": o.session_id})
    if o.verdict is Verdict.NOTHING:
        return None  # nothing held, or another worker re-checked it first
    view = views[o.session_id]
    if o.verdict is Verdict.REFUSED:
        return ZimmerError(ErrorCode.REFUSED, f"session {o.session_id} is {view.status}; it takes no more turns",
                           {"status": view.status})
    return TurnResult(outcome=o.verdict.value, exempt_because=o.exempt_because,  # type: ignore[arg-type]  # pydantic validates the string into the literal
                      decision=decided.get(id(o.decision)) or decision_view(o.decision) if o.decision else None,
                      session=view)
