"""RPC and ingest handlers: each opens one transaction, calls the rules, and commits the state
change together with its events."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common.contracts.runtime import QuotaReadingIn, SessionStatusReport, SpendReport
from zimmer_common.contracts.spot import (
    SESSION_CLASS_CHANGED, SESSION_CREATED, SESSION_PRECEDENCE_CHANGED, SESSION_STATUS_CHANGED, GateDecisionList,
    GateDecisionQuery, GateDecisionRow, Ok, RequestTurn, SessionByKey, SessionEvent, SessionList, SessionQuery,
    SessionRef,
    SessionView, SpawnResult, SpawnSession, TurnResult, UpdateSession)
from zimmer_common import idempotency
from zimmer_common.batching import Batcher
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import OutboxRelay, emit
from zimmer_spot_gate.domain.classes import originate
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, SessionStatus, TurnKind
from zimmer_spot_gate.domain.pricing import DEFAULT_PRICES, Prices, TokenUsage, price_for, spend_dollars
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.turns import SCHEMA, Outcome, TurnGate, TurnRequest

if TYPE_CHECKING:
    from zimmer_spot_gate.metrics import SpotMetrics
    from zimmer_spot_gate.policy import PolicyOps

RUNNING = SessionStatus.RUNNING.value


class SpotGate:
    """The spot-gate application: what each operation does, transaction by transaction."""

    def __init__(self, engine: Callable[[], AsyncEngine], now: Callable[[], datetime], gate: TurnGate,
                 relay: Callable[[], OutboxRelay | None] = lambda: None, prices: Prices = DEFAULT_PRICES):
        self._engine = engine
        self.prices = prices
        self.now = now
        self.gate = gate
        self._relay = relay
        self.batcher: Batcher[TurnRequest, Outcome] = Batcher(self._run_batch)
        self.policy: PolicyOps | None = None  # wired by the service: policy, triggers, costs
        self.metrics: SpotMetrics | None = None

    @property
    def engine(self) -> AsyncEngine:
        return self._engine()

    def _kick(self) -> None:
        relay = self._relay()
        if relay:
            relay.kick()

    async def _view(self, conn: AsyncConnection, session_id: int) -> SessionView:
        return store.to_view(await store.fetch(conn, session_id), (await quota.policy(conn)).overrides)

    # ---- sessions ----------------------------------------------------------------------

    async def spawn(self, req: SpawnSession, *, default_genesis: Genesis = Genesis.API,
                    trigger_id: int | None = None, trigger_class: SchedulingClass | None = None,
                    trigger_precedence: int | None = None) -> SpawnResult:
        """Idempotent on `idempotency_key`: the same key returns the same session, never a second."""
        async with self.engine.begin() as conn:
            if req.idempotency_key:
                existing = await store.by_idempotency_key(conn, req.idempotency_key)
                if existing is not None:
                    return SpawnResult(session=store.to_view(existing, (await quota.policy(conn)).overrides),
                                       created=False)
            parent = await store.lineage(conn, req.parent_session_id, "parent_session_id") \
                if req.parent_session_id is not None else None
            if parent is None and req.forked_from_session_id is not None:
                parent = await store.lineage(conn, req.forked_from_session_id, "forked_from_session_id")
            origin = originate(lineage=parent, declared_genesis=Genesis(req.genesis) if req.genesis else None,
                               declared_class=SchedulingClass(req.scheduling_class) if req.scheduling_class else None,
                               declared_precedence=req.precedence, default_genesis=default_genesis,
                               trigger_class=trigger_class, trigger_precedence=trigger_precedence)
            session_id = await store.insert(conn, req, origin, trigger_id)
            if session_id is None:  # a concurrent retry with the same key committed first
                raced = await store.by_idempotency_key(conn, req.idempotency_key or "")
                assert raced is not None
                return SpawnResult(session=store.to_view(raced, (await quota.policy(conn)).overrides), created=False)
            view = await self._view(conn, session_id)
            await emit(conn, SCHEMA, SESSION_CREATED, "session_created",
                       SessionEvent(session=view, spawned_by=req.metadata.get("spawned_by")))
            turn = None
            if req.start:
                turn = await self.gate.request_turn(conn, session_id, TurnKind.FIRST_START, req.prompt, [])
                view = turn.session
        self._kick()
        return SpawnResult(session=view, created=True, turn=turn)

    async def get(self, req: SessionRef) -> SessionView:
        async with self.engine.connect() as conn:
            return await self._view(conn, req.session_id)

    async def by_key(self, req: SessionByKey) -> SessionView:
        """The session a spawn with this key made; `not_found` when none did. Asked after a
        spawn's deadline has passed, the answer is final: that spawn can no longer commit."""
        async with self.engine.connect() as conn:
            row = await store.by_idempotency_key(conn, req.idempotency_key)
            if row is None:
                raise ZimmerError(ErrorCode.NOT_FOUND, f"no session was spawned with key {req.idempotency_key!r}",
                                  {"idempotency_key": req.idempotency_key})
            return store.to_view(row, (await quota.policy(conn)).overrides)

    async def search(self, q: SessionQuery) -> SessionList:
        async with self.engine.connect() as conn:
            overrides = (await quota.policy(conn)).overrides
            rows, total = await store.search(conn, q, overrides)
            return SessionList(sessions=[store.to_view(r, overrides) for r in rows], total=total)

    async def update(self, req: UpdateSession) -> SessionView:
        if req.scheduling_class is None and req.precedence is None:
            raise ZimmerError(ErrorCode.INVALID, "nothing to change: give scheduling_class and/or precedence",
                              {"field": "scheduling_class"})
        async with self.engine.begin() as conn:
            await self.gate.lock_admissions(conn)  # before the row lock: the order every batch takes
            before = await store.fetch(conn, req.session_id, lock=True)
            overrides = (await quota.policy(conn)).overrides
            old_view = store.to_view(before, overrides)
            if req.scheduling_class is not None:
                stored = None if req.scheduling_class == "derive" else req.scheduling_class
                await store.update_fields(conn, req.session_id, scheduling_class=stored)
            if req.precedence is not None:
                await store.update_fields(conn, req.session_id, precedence=req.precedence)
            view = await self._view(conn, req.session_id)
            if view.priority_class != old_view.priority_class or view.scheduling_class != old_view.scheduling_class:
                await emit(conn, SCHEMA, SESSION_CLASS_CHANGED, "session_class_changed", SessionEvent(
                    session=view, previous={"scheduling_class": old_view.scheduling_class,
                                            "priority_class": old_view.priority_class}))
            if view.precedence != old_view.precedence:
                await emit(conn, SCHEMA, SESSION_PRECEDENCE_CHANGED, "session_precedence_changed",
                           SessionEvent(session=view, previous={"precedence": old_view.precedence}))
            if view.priority_class == "priority" and before.spot_hold_reason is not None:
                # Make this session priority: the lever that starts a held session now.
                result = await self.gate.recheck(conn, req.session_id, force=True)
                view = result.session if result else view
        self._kick()
        return view

    async def request_turn(self, req: RequestTurn) -> TurnResult:
        """Concurrent requests are decided together, one transaction per batch. With an
        idempotency key a retry gets the first answer back and no second turn is started."""
        out = await self.batcher.submit(TurnRequest(req.session_id, TurnKind(req.kind), req.prompt, req.attachments,
                                                    key=idempotency.ref_for("request_turn", req)))
        if isinstance(out, ZimmerError):
            raise out
        assert out is not None
        return out

    async def _run_batch(self, requests: list[TurnRequest]) -> list[Outcome]:
        async with self.engine.begin() as conn:
            await self.gate.lock_admissions(conn)  # keys are claimed in the order every batch locks

            async def decide(indices: list[int]) -> list[Outcome]:
                return await self.gate.process(conn, [requests[i] for i in indices])

            outcomes = await idempotency.keyed_batch(conn, SCHEMA, [r.key for r in requests], decide, TurnResult)
        self._kick()
        return outcomes

    async def report_status(self, req: SessionStatusReport) -> SessionView:
        async with self.engine.begin() as conn:
            view = await self.apply_status(conn, req)
        self._kick()
        return view

    async def apply_status(self, conn: AsyncConnection, req: SessionStatusReport) -> SessionView:
        await self.gate.lock_admissions(conn)  # it may deliver a queued turn: same lock order as a batch
        before = await store.fetch(conn, req.session_id, lock=True)
        view: SessionView | None = None
        if before.status != req.status:
            fields: dict[str, Any] = {"status": req.status}
            if req.status in (SessionStatus.ARCHIVED.value, SessionStatus.FAILED.value):
                fields.update(spot_hold_reason=None, spot_hold_retry_at=None)  # an ended session waits for nothing
            await store.update_fields(conn, req.session_id, **fields)
            view = await self._view(conn, req.session_id)
            await emit(conn, SCHEMA, SESSION_STATUS_CHANGED, "session_status_changed", SessionEvent(
                session=view, previous={"status": before.status}, spawned_by=(before.metadata or {}).get("spawned_by")))
        if before.status == RUNNING and req.status == SessionStatus.NEEDS_INPUT.value:
            queued = await store.pop_enqueued(conn, req.session_id)
            if queued is not None:  # the turn boundary: deliver the next queued prompt, gated
                view = (await self.gate.request_turn(conn, req.session_id, TurnKind(queued.turn_kind), queued.prompt,
                                                     queued.attachments or [])).session
        return view or await self._view(conn, req.session_id)

    async def decisions(self, q: GateDecisionQuery) -> GateDecisionList:
        async with self.engine.connect() as conn:
            await store.fetch(conn, q.session_id)
            rows = await store.decisions(conn, q.session_id, q.limit)
        return GateDecisionList(decisions=[GateDecisionRow(**r._mapping) for r in rows])

    # ---- the quota pool ------------------------------------------------------------------

    async def record_reading(self, req: QuotaReadingIn) -> Ok:
        async with self.engine.begin() as conn:
            await quota.record_reading(conn, req, self.now())
        self.gate.pool.invalidate()
        return Ok()

    async def record_spend_in(self, conn: AsyncConnection, req: SpendReport) -> bool:
        """Tokens to dollars at list prices; idempotent on request_id. An unknown model is
        `invalid` (terminated by the consumer, not retried: no price will appear by waiting)."""
        try:
            prices = price_for(req.model, self.prices)
        except KeyError as exc:
            raise ZimmerError(ErrorCode.INVALID, str(exc).strip("'\""), {"field": "model"}) from None
        dollars = spend_dollars(TokenUsage(req.input_tokens, req.output_tokens, req.cache_write_tokens,
                                           req.cache_read_tokens), prices)
        return await quota.record_spend(conn, req, dollars, self.now())
