"""Every turn is gated (seed 004, "What hold does", "Consecutive holds back off", "Every turn
is gated, not just the first", "The concurrency limit").

Turns are decided in batches, inside the caller's transaction, under one transaction-scoped
advisory lock: the decisions of a batch see each other's admissions (the slot count is exact
across concurrent requests and across replicas), and a batch costs a handful of statements
however many turns it carries. The decision, the hold record, the decision log, the status
events and the start_turn commands commit together or not at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.runtime import START_TURN, StartTurn
from zimmer_common.contracts.spot import SESSION_STATUS_CHANGED, DecisionView, SessionEvent, TurnResult
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.idempotency import KeyRef
from zimmer_common.outbox import emit_many
from zimmer_spot_gate.domain.classes import resolve_class
from zimmer_spot_gate.domain.gate import (
    Candidate, Decision, FleetState, Snapshot, WindowNumbers, decide, unavailable)
from zimmer_spot_gate.domain.ladder import hold_delay
from zimmer_spot_gate.domain.model import (
    UNGATED_TURNS, Genesis, Reason, Runtime, SchedulingClass, SessionStatus, TurnKind)
from zimmer_spot_gate.snapshot import PoolCache
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store import sessions as store

SCHEMA = "spot_gate"
ENDED = {SessionStatus.ARCHIVED.value, SessionStatus.FAILED.value}
RUNNING = SessionStatus.RUNNING.value
ADMISSION_LOCK = "zimmer.spot_gate.admission"


def decision_view(d: Decision) -> DecisionView:
    return DecisionView(allowed=d.allowed, reason=d.reason.value, ceiling=d.ceiling.value if d.ceiling else None,
                        sentence=d.sentence, windows=[_numbers(n) for n in d.windows],
                        accounts_averaged=d.accounts_averaged, accounts_in_pool=d.accounts_in_pool)


_NUMBER_FIELDS = tuple(f.name for f in fields(WindowNumbers))


def _numbers(n: WindowNumbers) -> dict[str, Any]:
    # Flat and hot (every decision): a shallow read, not dataclasses.asdict's deep copy.
    out = {name: getattr(n, name) for name in _NUMBER_FIELDS}
    out["window"] = n.window.value
    return out


def exemption(s: dict[str, Any], overrides: Any) -> str | None:
    """Why this session is never consulted, or None for a spot session the gate decides on."""
    own = SchedulingClass(s["scheduling_class"]) if s["scheduling_class"] else None
    if resolve_class(own, Genesis(s["genesis"]), overrides) is SchedulingClass.PRIORITY:
        return "priority"
    if s["runtime"] == Runtime.CODEX.value:
        return "codex"  # spends nothing against a Claude window and takes no slot
    if s["is_status_summary_fork"]:
        return "status_summary_fork"
    return None


def takes_slot(s: dict[str, Any]) -> bool:
    return s["runtime"] == Runtime.CLAUDE_CODE.value and not s["is_status_summary_fork"]


@dataclass(frozen=True)
class TurnRequest:
    session_id: int
    kind: TurnKind | None = None  # None with recheck: the turn the hold carries
    prompt: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    recheck: bool = False  # the held session's re-check
    force: bool = False  # re-check now whatever the retry time (its class changed)
    key: KeyRef | None = None  # the caller's idempotency key: a retry gets the first answer


Outcome = TurnResult | ZimmerError | None


class _Batch:
    """What a batch decided, to be written in a few statements at the end."""

    def __init__(self, rows: dict[int, Any]):
        self.before = {sid: dict(r._mapping) for sid, r in rows.items()}
        self.live = {sid: dict(r._mapping) for sid, r in rows.items()}
        self.changed: set[int] = set()
        self.decisions: list[dict[str, Any]] = []
        self.enqueued: list[dict[str, Any]] = []
        self.commands: list[tuple[str, str, StartTurn]] = []
        self.outcomes: list[tuple[str, int, str, str | None, DecisionView | None] | ZimmerError | None] = []


class TurnGate:
    def __init__(self, now: Callable[[], datetime], pool: PoolCache, jitter: Callable[[], float] = random.random):
        self.now = now
        self.pool = pool
        self.jitter = jitter
        self.on_decision: Callable[[str], None] = lambda reason: None  # metrics hook

    async def lock_admissions(self, conn: AsyncConnection) -> None:
        """Take the admission lock; callers that will lock session rows first must take it before them."""
        await store.advisory_xact_lock(conn, ADMISSION_LOCK)

    async def request_turn(self, conn: AsyncConnection, session_id: int, kind: TurnKind, prompt: str | None,
                           attachments: list[dict[str, Any]]) -> TurnResult:
        [out] = await self.process(conn, [TurnRequest(session_id, kind, prompt, list(attachments))])
        if isinstance(out, ZimmerError):
            raise out
        assert out is not None
        return out

    async def recheck(self, conn: AsyncConnection, session_id: int, *, force: bool = False) -> TurnResult | None:
        [out] = await self.process(conn, [TurnRequest(session_id, recheck=True, force=force)])
        if isinstance(out, ZimmerError):
            raise out
        return out

    async def process(self, conn: AsyncConnection, requests: list[TurnRequest]) -> list[Outcome]:
        await self.lock_admissions(conn)
        rows = {r.id: r for r in await store.fetch_many(conn, sorted({q.session_id for q in requests}), lock=True)}
        batch = _Batch(rows)
        policy = await quota.policy(conn)
        fleet: list[FleetState] = []  # read once, on the first decision, then kept current in memory
        now = self.now()
        for req in requests:
            s = batch.live.get(req.session_id)
            if s is None:
                batch.outcomes.append(ZimmerError(ErrorCode.NOT_FOUND, f"session {req.session_id} does not exist",
                                                  {"session_id": req.session_id}))
            elif req.recheck:
                await self._recheck(conn, batch, s, req, policy, fleet, now)
            else:
                await self._turn(conn, batch, s, req, policy, fleet, now)
        return await self._write(conn, batch, policy.overrides)

    async def _turn(self, conn: AsyncConnection, batch: _Batch, s: dict[str, Any], req: TurnRequest, policy: Any,
                    fleet: list[FleetState], now: datetime) -> None:
        assert req.kind is not None
        if s["status"] in ENDED:
            batch.outcomes.append(ZimmerError(ErrorCode.REFUSED, f"session {s['id']} is {s['status']}; "
                                              "it takes no more turns", {"status": s["status"]}))
            return
        if req.kind in UNGATED_TURNS:
            self._command(batch, s, req.kind, req.prompt, req.attachments)
            batch.outcomes.append(("passed", s["id"], "passed", req.kind.value, None))
            return
        exempt = exemption(s, policy.overrides)
        if req.kind is TurnKind.RESTART:
            # A person asked for this session: the ladder starts again at 10 minutes. A held one
            # re-enters the gate like a re-check, carrying the held turn; it never bypasses the
            # gate (making the session priority is the lever for that).
            s["spot_hold_count"] = 0
            if s["spot_hold_reason"] is not None:
                if req.prompt is not None:  # nothing is lost: its own prompt waits behind the held turn
                    batch.enqueued.append({"s": s["id"], "k": req.kind.value, "p": req.prompt,
                                           "a": store.dumps(req.attachments)})
                await self._recheck(conn, batch, s, TurnRequest(s["id"], recheck=True, force=True), policy, fleet, now)
                return
        elif s["spot_hold_reason"] is not None and exempt is None:
            # A second refused turn is queued, not given a second re-check; the hold record is
            # left alone: the re-check it names is the one that will fire.
            batch.enqueued.append({"s": s["id"], "k": req.kind.value, "p": req.prompt,
                                   "a": store.dumps(req.attachments)})
            batch.outcomes.append(("queued", s["id"], "queued", None, None))
            return
        if exempt is not None:
            self._admit(batch, s, req.kind, req.prompt, req.attachments, fleet)
            batch.outcomes.append(("passed", s["id"], "passed", exempt, None))
            return
        await self._decide(conn, batch, s, req.kind, req.prompt, req.attachments, policy, fleet, now)

    async def _recheck(self, conn: AsyncConnection, batch: _Batch, s: dict[str, Any], req: TurnRequest, policy: Any,
                       fleet: list[FleetState], now: datetime) -> None:
        due = s["spot_hold_retry_at"] is None or s["spot_hold_retry_at"] <= now
        if s["spot_hold_reason"] is None or s["status"] in ENDED or not (due or req.force):
            batch.outcomes.append(None)  # nothing held, or another worker re-checked it first
            return
        kind = TurnKind(s["held_turn_kind"] or TurnKind.FIRST_START.value)
        prompt, attachments = s["held_prompt"], s["held_attachments"] or []
        exempt = exemption(s, policy.overrides)
        if exempt is not None:  # promoted to priority while held: the lever that starts it now
            self._admit(batch, s, kind, prompt, attachments, fleet)
            batch.outcomes.append(("passed", s["id"], "passed", exempt, None))
            return
        await self._decide(conn, batch, s, kind, prompt, attachments, policy, fleet, now)

    async def _decide(self, conn: AsyncConnection, batch: _Batch, s: dict[str, Any], kind: TurnKind,
                      prompt: str | None, attachments: list[dict[str, Any]], policy: Any, fleet: list[FleetState],
                      now: datetime) -> None:
        try:
            parts = await self.pool.get()
            if not fleet:
                fleet.append(await quota.fleet(conn))
            burn = parts.burn_rates.get((s["harness"], s["model"]), 0.0)
            snap = Snapshot(policy.policy, parts.windows, fleet[0],
                            Candidate(burn, already_running=s["status"] == RUNNING),
                            parts.accounts_averaged, parts.pool_size)
            decision = decide(snap)
        except Exception as exc:  # noqa: BLE001 - any error evaluating the gate fails open, and says why
            decision = unavailable(exc)
        view = decision_view(decision)
        self.on_decision(decision.reason.value)
        batch.decisions.append({"s": s["id"], "k": kind.value, "a": decision.allowed, "r": decision.reason.value,
                                "c": view.ceiling, "sent": decision.sentence,
                                "n": store.dumps(view.model_dump(mode="json")), "at": now})
        if decision.allowed:
            self._admit(batch, s, kind, prompt, attachments, fleet)
            batch.outcomes.append(("admitted", s["id"], "admitted", None, view))
        else:
            self._hold(batch, s, kind, prompt, attachments, decision.reason, now)
            batch.outcomes.append(("held", s["id"], "held", None, view))

    def _admit(self, batch: _Batch, s: dict[str, Any], kind: TurnKind, prompt: str | None,
               attachments: list[dict[str, Any]], fleet: list[FleetState]) -> None:
        if fleet and s["status"] != RUNNING:
            f = fleet[0]  # the next decision in this batch sees this admission
            fleet[0] = replace(f, running_slots=f.running_slots + takes_slot(s), running_total=f.running_total + 1)
        # Admission clears every spot_hold_* key: the next outage starts the ladder at 10 minutes.
        s.update(status=RUNNING, ever_started=True, spot_hold_reason=None, spot_hold_retry_at=None,
                 spot_hold_count=0, held_turn_kind=None, held_prompt=None, held_attachments=None)
        batch.changed.add(s["id"])
        self._command(batch, s, kind, prompt, attachments)

    def _hold(self, batch: _Batch, s: dict[str, Any], kind: TurnKind, prompt: str | None,
              attachments: list[dict[str, Any]], reason: Reason, now: datetime) -> None:
        count = s["spot_hold_count"] + 1
        # The gate takes custody of the prompt; the session goes dormant in waiting, and nothing
        # announces it as needing a human.
        s.update(status=SessionStatus.WAITING.value, spot_hold_reason=reason.value,
                 spot_hold_retry_at=now + hold_delay(reason, count, self.jitter()), spot_hold_count=count,
                 held_turn_kind=kind.value, held_prompt=prompt, held_attachments=attachments)
        batch.changed.add(s["id"])

    def _command(self, batch: _Batch, s: dict[str, Any], kind: TurnKind, prompt: str | None,
                 attachments: list[dict[str, Any]]) -> None:
        batch.commands.append((START_TURN, "start_turn", StartTurn(
            session_id=s["id"], turn_kind=kind.value, prompt=prompt, attachments=list(attachments),
            runtime=s["runtime"], harness=s["harness"], model=s["model"])))

    async def _write(self, conn: AsyncConnection, batch: _Batch, overrides: Any) -> list[Outcome]:
        await store.save_turn_state(conn, [batch.live[sid] for sid in sorted(batch.changed)])
        await store.log_decisions(conn, batch.decisions)
        await store.enqueue_messages(conn, batch.enqueued)
        touched = {o[1] for o in batch.outcomes if isinstance(o, tuple)}
        queued: dict[int, int] = {}
        for row in batch.enqueued:
            queued[row["s"]] = queued.get(row["s"], 0) + 1
        now = self.now()
        # Views from what this batch read and wrote, rather than a second read of the same rows.
        views = {sid: store.view_of({**batch.live[sid], "enqueued": batch.live[sid]["enqueued"] + queued.get(sid, 0),
                                     "updated_at": now if sid in batch.changed else batch.live[sid]["updated_at"]},
                                    overrides) for sid in touched}
        events: list[tuple[str, str, Any]] = []
        for sid in sorted(batch.changed):
            before, after = batch.before[sid], batch.live[sid]
            if (before["status"], before["spot_hold_reason"]) != (after["status"], after["spot_hold_reason"]):
                events.append((SESSION_STATUS_CHANGED, "session_status_changed", SessionEvent(
                    session=views[sid], previous={"status": before["status"],
                                                  "spot_hold_reason": before["spot_hold_reason"]},
                    spawned_by=(before["metadata"] or {}).get("spawned_by"))))
        await emit_many(conn, SCHEMA, events + batch.commands)
        return [o if not isinstance(o, tuple) else
                TurnResult(outcome=o[2], exempt_because=o[3], decision=o[4], session=views[o[1]])  # type: ignore[arg-type]
                for o in batch.outcomes]
