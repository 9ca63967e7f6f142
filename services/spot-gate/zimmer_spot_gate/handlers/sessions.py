"""The session operations the service serves (RPC and ingest): each is one unit of work, which
commits the state change together with its events and keyed answers.

`SpotGate` is also the application the bootstrap assembles (`service.app`): besides its own
collaborators it names every other handler, so hooks, benchmarks and tests reach each by name."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common import idempotency
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, next_offset
from zimmer_common.contracts.runtime import QuotaReadingIn, SessionStatusReport, SpendReport
from zimmer_common.contracts.spot import (
    QUOTA_READING_RECORDED,
    SESSION_ARCHIVED,
    SESSION_CLASS_CHANGED,
    SESSION_PRECEDENCE_CHANGED,
    SESSION_STATUS_CHANGED,
    EnqueuedList,
    EnqueuedQuery,
    GateDecisionList,
    GateDecisionQuery,
    GateDecisionRow,
    Ok,
    QuotaReadingRecorded,
    ReorderResult,
    ReorderSession,
    RequestTurn,
    SessionByKey,
    SessionEvent,
    SessionList,
    SessionQuery,
    SessionRef,
    SessionView,
    SessionWarningNote,
    SpawnResult,
    SpawnSession,
    StartNowResult,
    TurnResult,
    UpdateSession,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitOfWork, UnitsOfWork
from zimmer_spot_gate.config import PriceBook
from zimmer_spot_gate.domain.lifecycle import IllegalTransition, check_changeable, check_transition
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, SessionStatus, TurnKind
from zimmer_spot_gate.domain.precedence import above_top_of_spot, between
from zimmer_spot_gate.domain.prices import TokenUsage, spend_dollars
from zimmer_spot_gate.domain.wakes import paused_until
from zimmer_spot_gate.handlers.admissions import Admissions, SpawnRequest
from zimmer_spot_gate.handlers.parks import Parks
from zimmer_spot_gate.handlers.policy import PolicyOps
from zimmer_spot_gate.handlers.queue_ops import start_in
from zimmer_spot_gate.handlers.trash import archived_fields
from zimmer_spot_gate.handlers.turns import TurnGate, TurnRequest, run_edges
from zimmer_spot_gate.handlers.wakes import Wakes
from zimmer_spot_gate.jobs.ceiling import CeilingSweep
from zimmer_spot_gate.jobs.stranded_sleep import StrandedSleepSweep
from zimmer_spot_gate.metrics import SpotMetrics
from zimmer_spot_gate.store import clones, lists, quota, replay_records
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.store.ended_spend import observe_if_ended
from zimmer_spot_gate.store.session_spend import session_spend

RUNNING = SessionStatus.RUNNING.value
WARNINGS_SHOWN = 5  # the newest few on get_session; the sweeper's refusals page as well


class SpotGate:
    """The spot-gate application: what each session operation does, unit of work by unit of work."""

    def __init__(self, units: UnitsOfWork, now: Callable[[], datetime], gate: TurnGate, admissions: Admissions,
                 prices: PriceBook, wakes: Wakes, *, policy: PolicyOps, ceiling: CeilingSweep, parks: Parks,
                 stranded_sleep: StrandedSleepSweep, metrics: SpotMetrics):
        self.units = units
        self.now = now
        self.gate = gate
        self.admissions = admissions
        self.prices = prices
        self.wakes = wakes  # by name (a direct follow-up consumes its pause in the turn's batch: TurnRequest.consume_pause)
        # The other handlers, by name (the bootstrap built them; nothing here calls them).
        self.policy = policy
        self.ceiling = ceiling
        self.parks = parks
        self.stranded_sleep = stranded_sleep
        self.metrics = metrics

    async def _view(self, conn: AsyncConnection, session_id: int) -> SessionView:
        return store.to_view(await store.fetch(conn, session_id), (await quota.policy(conn)).overrides)

    # ---- sessions ----------------------------------------------------------------------

    async def spawn(self, req: SpawnSession, *, default_genesis: Genesis = Genesis.API,
                    trigger_id: int | None = None, trigger_class: SchedulingClass | None = None,
                    trigger_precedence: int | None = None) -> SpawnResult:
        """Idempotent on `idempotency_key`: the same key returns the same session, never a second
        (`Admissions.spawn_session`)."""
        return await self.admissions.spawn_session(
            SpawnRequest(req, default_genesis, trigger_id, trigger_class, trigger_precedence))

    def _as_of_now(self, view: SessionView) -> SessionView:
        """A read says whether a wall-clock pause is still ahead (quick_search marks it Paused)."""
        ahead = paused_until(view.next_wake_at, self.now())
        return view.model_copy(update={"paused_until": ahead}) if ahead else view

    async def get(self, req: SessionRef) -> SessionView:
        """The session as it now is, with the newest warnings left on it and what it has spent
        (where an operator looks)."""
        async with self.units.snapshot() as conn:  # its status, warnings and spend as of one moment
            view = self._as_of_now(await self._view(conn, req.session_id))
            warnings = await clones.newest_warnings(conn, req.session_id, WARNINGS_SHOWN)
            spend = await session_spend(conn, req.session_id)
        return view.model_copy(update={"warnings": [SessionWarningNote(**w._mapping) for w in warnings],
                                       "spend": spend})

    async def by_key(self, req: SessionByKey) -> SessionView:
        """The session a spawn with this key made; `not_found` when none did. Asked after a
        spawn's deadline has passed, the answer is final: that spawn can no longer commit."""
        async with self.units.read() as conn:
            row = await store.by_idempotency_key(conn, req.idempotency_key)
            if row is None:
                raise ZimmerError(ErrorCode.NOT_FOUND, f"no session was spawned with key {req.idempotency_key!r}",
                                  {"idempotency_key": req.idempotency_key})
            return store.to_view(row, (await quota.policy(conn)).overrides)

    async def search(self, q: SessionQuery, budget: int = ANSWER_ROWS_MAX_BYTES) -> SessionList:
        """A page of sessions: `q.limit` at most, fewer when their prompts and metadata reach
        `budget` bytes, with where the next page starts."""
        async with self.units.snapshot() as conn:  # the page and its total agree
            overrides = (await quota.policy(conn)).overrides
            views, total = await lists.search(conn, q, overrides, budget)
        return SessionList(sessions=[self._as_of_now(v) for v in views], total=total,
                           next_offset=next_offset(q.offset, len(views), total))

    async def update(self, req: UpdateSession) -> SessionView:
        if req.scheduling_class is None and req.precedence is None:
            raise ZimmerError(ErrorCode.INVALID, "nothing to change: give scheduling_class and/or precedence",
                              {"field": "scheduling_class"})
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)  # before the row lock: the order every batch takes
            before = await store.fetch(conn, req.session_id, lock=True)
            try:
                check_changeable(SessionStatus(before.status))
            except IllegalTransition as exc:
                raise ZimmerError(ErrorCode.REFUSED, f"session {req.session_id}: {exc}",
                                  {"status": before.status}) from None
            overrides = (await quota.policy(conn)).overrides
            old_view = store.to_view(before, overrides)
            changes: dict[str, Any] = {}
            if req.scheduling_class is not None:
                changes["scheduling_class"] = None if req.scheduling_class == "derive" else req.scheduling_class
            if req.precedence is not None:
                changes["precedence"] = req.precedence
            if req.place == "top_of_spot":
                changes["precedence"] = above_top_of_spot(await store.top_of_spot(conn, overrides, req.session_id))
            view = store.to_view(await store.update_fields(conn, req.session_id, **changes), overrides)
            if view.priority_class != old_view.priority_class or view.scheduling_class != old_view.scheduling_class:
                await uow.emit(SESSION_CLASS_CHANGED, "session_class_changed", SessionEvent(
                    session=view, previous={"scheduling_class": old_view.scheduling_class,
                                            "priority_class": old_view.priority_class}))
            if view.precedence != old_view.precedence:
                await uow.emit(SESSION_PRECEDENCE_CHANGED, "session_precedence_changed",
                               SessionEvent(session=view, previous={"precedence": old_view.precedence}))
            dormant = before.spot_hold_reason is not None or before.paused_by is not None
            if view.priority_class == "priority" and (old_view.priority_class != "priority" or dormant):
                # Promote to priority: the lever that starts a held or paused session now (seed 004's
                # Start now, "as a side effect of change_scheduling_class to priority"). A wall-clock
                # pause outranks it; a session that ran and has nothing scheduled gets nothing.
                row = await store.fetch(conn, req.session_id, lock=True)
                started = await start_in(self.gate, uow, row, self.now(), overrides)
                view = started.session if isinstance(started, StartNowResult) else view
        return view

    async def reorder(self, req: ReorderSession) -> ReorderResult:
        """Drop a session between two neighbours: their midpoint, or a nudge where none exists (no
        cascade). One transaction; each changed session announces its new precedence."""
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)  # before the row locks: the order every batch takes
            ids = [i for i in (req.session_id, req.above_session_id, req.below_session_id) if i is not None]
            rows = {r.id: r for r in await store.fetch_many(conn, sorted(ids), lock=True)}
            for sid in ids:
                if sid not in rows:
                    raise ZimmerError(ErrorCode.NOT_FOUND, f"session {sid} does not exist", {"session_id": sid})
            placed = between(rows[req.above_session_id].precedence if req.above_session_id else None,
                             rows[req.below_session_id].precedence if req.below_session_id else None)
            moves = {req.session_id: placed.value}
            for side, value in placed.nudged.items():
                moves[req.above_session_id if side == "above" else req.below_session_id] = value  # type: ignore[index]  # the request names exactly one of above/below (validated)
            overrides = (await quota.policy(conn)).overrides
            views: dict[int, SessionView] = {}
            for sid, value in moves.items():
                try:
                    check_changeable(SessionStatus(rows[sid].status))
                except IllegalTransition as exc:
                    raise ZimmerError(ErrorCode.REFUSED, f"session {sid}: {exc}; reload the list",
                                      {"session_id": sid, "status": rows[sid].status}) from None
                if value == rows[sid].precedence:
                    views[sid] = store.to_view(rows[sid], overrides)
                    continue
                views[sid] = store.to_view(await store.update_fields(conn, sid, precedence=value), overrides)
                await uow.emit(SESSION_PRECEDENCE_CHANGED, "session_precedence_changed",
                               SessionEvent(session=views[sid], previous={"precedence": rows[sid].precedence}))
        return ReorderResult(session=views[req.session_id],
                             nudged=[views[sid] for sid in moves if sid != req.session_id])

    async def request_turn(self, req: RequestTurn) -> TurnResult:
        """Concurrent requests are decided together, one transaction per batch. With an
        idempotency key a retry gets the first answer back and no second turn is started. A
        follow-up addressed to the session directly takes it over: it consumes a wall-clock pause."""
        return await self.admissions.turn(TurnRequest(req.session_id, TurnKind(req.kind), req.prompt,
                                                      req.attachments, key=idempotency.ref_for("request_turn", req),
                                                      consume_pause=req.kind == TurnKind.FOLLOW_UP.value))

    async def report_status(self, req: SessionStatusReport) -> SessionView:
        async with self.units.begin() as uow:
            return await self.apply_status(uow, req)

    async def apply_status(self, uow: UnitOfWork, req: SessionStatusReport) -> SessionView:
        """In `uow` (an RPC's own, or the ingest consumer's), move the session along its lifecycle
        (409 `refused` naming the current status for an illegal move). At a turn boundary (running →
        needs_input) with a turn queued behind it, the session stays running and that turn is
        decided as its next (gated, keeping its slot)."""
        conn = uow.conn
        await self.gate.lock_admissions(conn)  # it may deliver a queued turn: same lock order as a batch
        before = await store.fetch(conn, req.session_id, lock=True)
        try:
            check_transition(SessionStatus(before.status), SessionStatus(req.status),
                             held=before.spot_hold_reason is not None)
        except IllegalTransition as exc:
            raise ZimmerError(ErrorCode.REFUSED, f"session {req.session_id}: {exc}",
                              {"status": before.status, "wanted": req.status}) from None
        wanted = req.status
        paused = before.paused_by is not None or paused_until(before.next_wake_at, self.now()) is not None
        if paused and before.status == RUNNING and wanted in (SessionStatus.NEEDS_INPUT.value,
                                                              SessionStatus.WAITING.value):
            # The runtime's acknowledgement of the stop: the pause callback carries the session to
            # waiting, never needs_input (that is the action queue, for work a person must act on),
            # and the queued turns wait for the resume.
            acked = {"spot_pause_acked_at": func.now()} if before.paused_by is not None else {}
            row = await store.update_fields(conn, req.session_id, status=SessionStatus.WAITING.value, **acked)
            overrides = (await quota.policy(conn)).overrides
            await replay_records.record_run_edges(conn, run_edges(before._mapping, row.status, overrides), self.now())
            view = store.to_view(row, overrides)
            await uow.emit(SESSION_STATUS_CHANGED, "session_status_changed", SessionEvent(
                session=view, previous={"status": before.status}, spawned_by=(before.metadata or {}).get("spawned_by")))
            return view
        if before.paused_by is not None and before.status == SessionStatus.WAITING.value and wanted in (
                SessionStatus.NEEDS_INPUT.value, SessionStatus.WAITING.value):
            # A report the runtime sent before it learned of the pause (the status report travels
            # over ingest, a park over RPC: either may land first). The paused session stays in
            # waiting, where its resume looks for it; moved to needs_input it would never resume.
            return await self._view(conn, req.session_id)
        if before.status == RUNNING and wanted == SessionStatus.NEEDS_INPUT.value:
            queued = await store.pop_enqueued(conn, req.session_id)
            if queued is not None:
                # The turn boundary with a turn queued behind it: the session is still running, its
                # next turn is decided now (quota checks only: it keeps its slot), and no
                # needs_input is announced for a turn that never waited on a person.
                return (await self.gate.request_turn(conn, req.session_id, TurnKind(queued.turn_kind), queued.prompt,
                                                     queued.attachments or [], boundary=True)).session
        if before.status != req.status:
            # The runtime archiving a session is an archive like the Trash's: the same fields, and
            # session_archived too (the sweeper's trash pipeline starts from it).
            archiving = req.status == SessionStatus.ARCHIVED.value
            fields: dict[str, Any] = archived_fields(before) if archiving else {"status": req.status}
            if req.status == SessionStatus.FAILED.value:
                fields.update(spot_hold_reason=None, spot_hold_retry_at=None)  # an ended session waits for nothing
            row = await store.update_fields(conn, req.session_id, **fields)
            overrides = (await quota.policy(conn)).overrides
            await replay_records.record_run_edges(conn, run_edges(before._mapping, row.status, overrides), self.now())
            view = store.to_view(row, overrides)
            await observe_if_ended(uow, before.status, view, self.metrics.session_ended)
            event = SessionEvent(session=view, previous={"status": before.status},
                                 spawned_by=(before.metadata or {}).get("spawned_by"))
            await uow.emit_many([(SESSION_STATUS_CHANGED, "session_status_changed", event)] +
                                ([(SESSION_ARCHIVED, "session_archived", event)] if archiving else []))
            return view
        return await self._view(conn, req.session_id)  # the status it already has: nothing changes

    async def decisions(self, q: GateDecisionQuery) -> GateDecisionList:
        async with self.units.read() as conn:
            await store.fetch(conn, q.session_id)
            rows = await store.decisions(conn, q.session_id, q.limit, since=q.since, until=q.until, at=q.at)
        return GateDecisionList(decisions=[GateDecisionRow(**r._mapping) for r in rows])

    async def enqueued(self, q: EnqueuedQuery, budget: int = ANSWER_ROWS_MAX_BYTES) -> EnqueuedList:
        """A page of a session's enqueued messages, newest first: `q.limit` at most, fewer when
        their prompts reach `budget` bytes, with the cursor of the next page."""
        async with self.units.read() as conn:
            await store.fetch(conn, q.session_id)
            messages, more = await lists.enqueued(conn, q.session_id, q.limit, q.before_id, budget)
        return EnqueuedList(messages=messages, next_before_id=messages[-1].id if more else None)

    # ---- the quota pool ------------------------------------------------------------------

    async def record_reading(self, req: QuotaReadingIn) -> Ok:
        now = self.now()
        async with self.units.begin() as uow:
            await quota.record_reading(uow.conn, req, now)
            await uow.emit(QUOTA_READING_RECORDED, "quota_reading_recorded", QuotaReadingRecorded(
                account=req.account, status=req.status, recorded_at=now,
                five_hour_utilization=req.five_hour.utilization if req.five_hour else None,
                seven_day_utilization=req.seven_day.utilization if req.seven_day else None))
        self.gate.pool.invalidate()
        return Ok()

    async def record_spend_in(self, conn: AsyncConnection, req: SpendReport) -> bool:
        """Tokens to dollars at the model's list price; idempotent on request_id. Spend is never
        dropped nor free: a model with no price of its own is priced by version or family, else at
        the dearest known price (logged once per model)."""
        prices = self.prices.resolve(req.model).prices
        dollars = spend_dollars(TokenUsage(req.input_tokens, req.output_tokens, req.cache_write_tokens,
                                           req.cache_read_tokens), prices)
        return await quota.record_spend(conn, req, dollars, self.now())
