"""The backlog's operations, transaction by transaction (seed 000)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_backlog import store
from zimmer_backlog.domain.ranking import BandFull, plan_append
from zimmer_common.contracts.backlog import (
    ITEM_APPENDED, ITEM_PINNED, ITEM_REMOVED, ITEM_UNPINNED, AppendItem, AppendResult, ItemEvent, ItemList, ItemQuery,
    ItemRef, ItemView, PinItem, RemoveItem)
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SessionEvent
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import OutboxRelay, emit

SCHEMA = "backlog"
SPAWNED_BY = "work-backlog"


class Backlog:
    def __init__(self, engine: Callable[[], AsyncEngine], relay: Callable[[], OutboxRelay | None] = lambda: None):
        self._engine = engine
        self._relay = relay
        self.on_appended: Callable[[], None] = lambda: None  # metrics hooks
        self.on_removed: Callable[[str], None] = lambda reason: None

    def _kick(self) -> None:
        relay = self._relay()
        if relay:
            relay.kick()

    async def list(self, q: ItemQuery) -> ItemList:
        async with self._engine().connect() as conn:
            items, total = await store.search(conn, q.status, q.limit, q.offset)
            return ItemList(items=items, total=total, counts=await store.counts(conn))

    async def append(self, req: AppendItem) -> AppendResult:
        """Append lands 10 below the lowest unpinned in-band peer of its cost, re-spacing the band
        first when it must, under the ranking lock; then every writer re-ranks drifted items."""
        if req.issue_url is None and req.added_via not in ("operator", "import"):
            raise ZimmerError(ErrorCode.INVALID, "an item without an issue_url may only come from an operator or "
                              "the import: it would be ungated work reaching the fleet", {"field": "issue_url"})
        async with self._engine().begin() as conn:
            await store.lock_ranking(conn)
            existing = await store.open_row(conn, req.key)
            if existing is not None:
                raise ZimmerError(ErrorCode.CONFLICT, f"{req.key} is already on the queue as item {existing.id}",
                                  {"field": "key", "item_id": existing.id, "status": existing.status})
            items = await store.queued_ranked(conn)
            try:
                placement = plan_append(items, req.estimated_cost)
            except BandFull as exc:
                raise ZimmerError(ErrorCode.BAND_FULL, str(exc), {"field": "estimated_cost",
                                                                  "estimated_cost": req.estimated_cost}) from None
            await store.move(conn, placement.moves)
            item_id = await store.insert(conn, req, placement.precedence)
            await self._rerank(conn)
            item = await store.fetch(conn, item_id)
            await emit(conn, SCHEMA, ITEM_APPENDED, "item_appended", ItemEvent(item=item))
            counts = await store.counts(conn)
        self.on_appended()
        self._kick()
        return AppendResult(item=item, counts=counts)

    async def pin(self, req: PinItem) -> ItemView:
        """A human hand-places an item and has it stay placed: pinned items are never moved by
        any writer and never count as anyone's peer."""
        return await self._set_pin(req.item_id, True, req.precedence, ITEM_PINNED, "item_pinned")

    async def unpin(self, req: ItemRef) -> ItemView:
        return await self._set_pin(req.item_id, False, None, ITEM_UNPINNED, "item_unpinned")

    async def _set_pin(self, item_id: int, pinned: bool, precedence: int | None, subject: str, etype: str) -> ItemView:
        async with self._engine().begin() as conn:
            await store.lock_ranking(conn)
            item = await store.fetch(conn, item_id)
            if item.status != "queued":
                raise ZimmerError(ErrorCode.CONFLICT, f"item {item_id} is {item.status}; only a queued item can be "
                                  f"{'pinned' if pinned else 'unpinned'}", {"item_id": item_id, "status": item.status})
            await store.set_pin(conn, item_id, pinned, precedence)
            await self._rerank(conn)  # an unpinned item out of its band moves back into it
            item = await store.fetch(conn, item_id)
            await emit(conn, SCHEMA, subject, etype, ItemEvent(item=item))
        self._kick()
        return item

    async def remove(self, req: RemoveItem) -> ItemView:
        """Removal by a human's judgement, in words (agents remove only on a pull, from a fixed vocabulary)."""
        async with self._engine().begin() as conn:
            await store.lock_ranking(conn)
            item = await store.fetch(conn, req.item_id)
            if not await store.remove(conn, req.item_id, req.reason, req.by or "operator"):
                raise ZimmerError(ErrorCode.CONFLICT, f"item {req.item_id} is {item.status}, not queued",
                                  {"item_id": req.item_id, "status": item.status})
            await self._rerank(conn)
            item = await store.fetch(conn, req.item_id)
            await emit(conn, SCHEMA, ITEM_REMOVED, "item_removed", ItemEvent(item=item))
        self.on_removed("operator")
        self._kick()
        return item

    async def _rerank(self, conn: AsyncConnection) -> None:
        await store.rerank(conn)

    async def on_session_event(self, conn: AsyncConnection, event: EventEnvelope) -> None:
        """Counts come from spot-gate's session events, for the sessions this backlog produced."""
        session = SessionEvent.model_validate(event.data).session
        if session.metadata.get("spawned_by") != SPAWNED_BY or "work_backlog_item_id" not in session.metadata:
            return
        spot_held = session.status == "waiting" and session.spot_hold_reason is not None and not session.ever_started
        await store.record_session(conn, session.id, int(session.metadata["work_backlog_item_id"]), session.status,
                                   spot_held, session.updated_at)

