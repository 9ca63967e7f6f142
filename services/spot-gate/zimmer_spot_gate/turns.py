"""Every turn is gated (seed 004, "What hold does", "Consecutive holds back off", "Every turn
is gated, not just the first").

`request_turn` is the admission path for any turn; `recheck` is the held session's re-check.
Both run inside the caller's transaction with the session row locked, so the decision, the
hold record, the decision log row, the status event and the start_turn command commit
together or not at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.runtime import START_TURN, StartTurn
from zimmer_common.contracts.spot import SESSION_STATUS_CHANGED, DecisionView, SessionEvent, TurnResult
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import emit
from zimmer_spot_gate.domain.classes import resolve_class
from zimmer_spot_gate.domain.gate import Candidate, Decision, decide_safely, unavailable
from zimmer_spot_gate.domain.ladder import hold_delay
from zimmer_spot_gate.domain.model import (
    UNGATED_TURNS, Genesis, Reason, Runtime, SchedulingClass, SessionStatus, TurnKind)
from zimmer_spot_gate.snapshot import read_pool
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store import sessions as store

SCHEMA = "spot_gate"
ENDED = {SessionStatus.ARCHIVED.value, SessionStatus.FAILED.value}


def decision_view(d: Decision) -> DecisionView:
    return DecisionView(allowed=d.allowed, reason=d.reason.value, ceiling=d.ceiling.value if d.ceiling else None,
                        sentence=d.sentence, windows=[_numbers(n) for n in d.windows],
                        accounts_averaged=d.accounts_averaged, accounts_in_pool=d.accounts_in_pool)


def _numbers(n: Any) -> dict[str, Any]:
    return {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(n).items()}


def exemption(row: Any, overrides: Any) -> str | None:
    """Why this session is never consulted, or None for a spot session the gate decides on."""
    own = SchedulingClass(row.scheduling_class) if row.scheduling_class else None
    if resolve_class(own, Genesis(row.genesis), overrides) is SchedulingClass.PRIORITY:
        return "priority"
    if row.runtime == Runtime.CODEX.value:
        return "codex"  # spends nothing against a Claude window and takes no slot
    if row.is_status_summary_fork:
        return "status_summary_fork"
    return None


class TurnGate:
    def __init__(self, now: Callable[[], datetime], jitter: Callable[[], float] = random.random):
        self.now = now
        self.jitter = jitter
        self.on_decision: Callable[[str], None] = lambda reason: None  # metrics hook

    async def request_turn(self, conn: AsyncConnection, session_id: int, kind: TurnKind, prompt: str | None,
                           attachments: list[dict[str, Any]]) -> TurnResult:
        row = await store.fetch(conn, session_id, lock=True)
        if row.status in ENDED:
            raise ZimmerError(ErrorCode.REFUSED, f"session {session_id} is {row.status}; it takes no more turns",
                              {"status": row.status})
        policy = await quota.policy(conn)
        if kind in UNGATED_TURNS:
            await self._command(conn, row, kind, prompt, attachments)
            return await self._result(conn, session_id, "passed", policy.overrides, exempt=kind.value)
        exempt = exemption(row, policy.overrides)
        if row.spot_hold_reason is not None and exempt is None:
            # A second refused turn is queued, not given a second re-check; the hold record is
            # left alone: the re-check it names is the one that will fire.
            await store.enqueue_message(conn, session_id, kind.value, prompt, attachments)
            return await self._result(conn, session_id, "queued", policy.overrides)
        if kind is TurnKind.RESTART:
            await store.update_fields(conn, session_id, spot_hold_count=0)  # a person asked: the ladder resets
            row = await store.fetch(conn, session_id)
        if exempt is not None:
            await self._admit(conn, row, kind, prompt, attachments)
            return await self._result(conn, session_id, "passed", policy.overrides, exempt=exempt)
        return await self._decide(conn, row, kind, prompt, attachments, policy.overrides)

    async def recheck(self, conn: AsyncConnection, session_id: int) -> TurnResult | None:
        """The held session's re-check, carrying the turn it holds. None when nothing is due."""
        row = await store.fetch(conn, session_id, lock=True)
        if row.spot_hold_retry_at is not None and row.spot_hold_retry_at > self.now():
            return None  # another worker re-checked it first
        return await self.recheck_now(conn, session_id)

    async def recheck_now(self, conn: AsyncConnection, session_id: int) -> TurnResult | None:
        """Re-check a held session whatever its retry time (after a class change, say)."""
        row = await store.fetch(conn, session_id, lock=True)
        if row.spot_hold_reason is None or row.status in ENDED:
            return None
        policy = await quota.policy(conn)
        kind = TurnKind(row.held_turn_kind or TurnKind.FIRST_START.value)
        if exemption(row, policy.overrides) is not None:  # promoted to priority while held
            await self._admit(conn, row, kind, row.held_prompt, row.held_attachments or [])
            return await self._result(conn, session_id, "passed", policy.overrides, exempt="priority")
        return await self._decide(conn, row, kind, row.held_prompt, row.held_attachments or [], policy.overrides)

    async def _decide(self, conn: AsyncConnection, row: Any, kind: TurnKind, prompt: str | None,
                      attachments: list[dict[str, Any]], overrides: Any) -> TurnResult:
        now = self.now()
        burn = await quota.burn_rate(conn, row.harness, row.model)
        candidate = Candidate(burn or 0.0, already_running=row.status == SessionStatus.RUNNING.value)
        try:
            # A savepoint: a failed read must not poison the transaction the hold is written in.
            async with conn.begin_nested():
                snap = (await read_pool(conn, now, candidate)).snapshot
            decision = decide_safely(lambda: snap)
        except Exception as exc:  # noqa: BLE001 - the gate fails open, and says why
            decision = unavailable(exc)
        view = decision_view(decision)
        self.on_decision(decision.reason.value)
        await store.log_decision(conn, row.id, kind.value, decision.allowed, decision.reason.value,
                                 view.ceiling, decision.sentence, view.model_dump(mode="json"), now)
        if decision.allowed:
            await self._admit(conn, row, kind, prompt, attachments)
            return await self._result(conn, row.id, "admitted", overrides, decision=view)
        await self._hold(conn, row, kind, prompt, attachments, decision.reason, now)
        return await self._result(conn, row.id, "held", overrides, decision=view)

    async def _admit(self, conn: AsyncConnection, row: Any, kind: TurnKind, prompt: str | None,
                     attachments: list[dict[str, Any]]) -> None:
        # Admission clears every spot_hold_* key: the next outage starts the ladder at 10 minutes.
        await store.update_fields(conn, row.id, status=SessionStatus.RUNNING.value, ever_started=True,
                                  spot_hold_reason=None, spot_hold_retry_at=None, spot_hold_count=0,
                                  held_turn_kind=None, held_prompt=None, held_attachments=None)
        await self._command(conn, row, kind, prompt, attachments)
        await self._status_event(conn, row, SessionStatus.RUNNING)

    async def _hold(self, conn: AsyncConnection, row: Any, kind: TurnKind, prompt: str | None,
                    attachments: list[dict[str, Any]], reason: Reason, now: datetime) -> None:
        count = row.spot_hold_count + 1
        retry_at = now + hold_delay(reason, count, self.jitter())
        # The gate takes custody of the prompt; the session goes dormant in waiting, and nothing
        # announces it as needing a human.
        await store.update_fields(conn, row.id, status=SessionStatus.WAITING.value, spot_hold_reason=reason.value,
                                  spot_hold_retry_at=retry_at, spot_hold_count=count, held_turn_kind=kind.value,
                                  held_prompt=prompt, held_attachments=attachments)
        await self._status_event(conn, row, SessionStatus.WAITING)

    async def _command(self, conn: AsyncConnection, row: Any, kind: TurnKind, prompt: str | None,
                       attachments: list[dict[str, Any]]) -> None:
        await emit(conn, SCHEMA, START_TURN, "start_turn",
                   StartTurn(session_id=row.id, turn_kind=kind.value, prompt=prompt, attachments=attachments,
                             runtime=row.runtime, harness=row.harness, model=row.model))

    async def _status_event(self, conn: AsyncConnection, before: Any, status: SessionStatus) -> None:
        after = await store.fetch(conn, before.id)
        policy = await quota.policy(conn)
        if before.status == status.value and before.spot_hold_reason == after.spot_hold_reason:
            return
        await emit(conn, SCHEMA, SESSION_STATUS_CHANGED, "session_status_changed",
                   SessionEvent(session=store.to_view(after, policy.overrides),
                                previous={"status": before.status, "spot_hold_reason": before.spot_hold_reason},
                                spawned_by=(before.metadata or {}).get("spawned_by")))

    async def _result(self, conn: AsyncConnection, session_id: int, outcome: str, overrides: Any, *,
                      exempt: str | None = None, decision: DecisionView | None = None) -> TurnResult:
        row = await store.fetch(conn, session_id)
        return TurnResult(outcome=outcome, exempt_because=exempt, decision=decision,  # type: ignore[arg-type]
                          session=store.to_view(row, overrides))
