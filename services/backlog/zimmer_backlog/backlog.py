"""The backlog's operations, transaction by transaction (seed 000)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_backlog import store
from zimmer_backlog.domain.ranking import BANDS, BandFull, RankedItem, apply, plan_append
from zimmer_common.contracts.backlog import (
    ITEM_APPENDED, ITEM_PINNED, ITEM_REMOVED, ITEM_UNPINNED, AppendItem, AppendResult, ItemEvent, ItemList, ItemQuery,
    ItemRef, ItemView, PinItem, RemoveItem)
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SessionEvent
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common import idempotency
from zimmer_common.batching import Batcher
from zimmer_common.idempotency import KeyRef
from zimmer_common.outbox import OutboxRelay, emit, emit_many

SCHEMA = store.SCHEMA
SPAWNED_BY = "work-backlog"
BAND_RANGES = {cost: (band.floor, band.top) for cost, band in BANDS.items()}


class Backlog:
    def __init__(self, engine: Callable[[], AsyncEngine], relay: Callable[[], OutboxRelay | None] = lambda: None):
        self._engine = engine
        self._relay = relay
        self.on_appended: Callable[[], None] = lambda: None  # metrics hooks
        self.on_removed: Callable[[str], None] = lambda reason: None
        self.batcher: Batcher[tuple[AppendItem, KeyRef | None], AppendResult | ZimmerError] = Batcher(self._append_batch)

    def _kick(self) -> None:
        relay = self._relay()
        if relay:
            relay.kick()

    async def list(self, q: ItemQuery) -> ItemList:
        async with self._engine().connect() as conn:
            items, total = await store.search(conn, q.status, q.limit, q.offset)
            return ItemList(items=items, total=total, counts=await store.counts(conn))

    async def append(self, req: AppendItem) -> AppendResult:
        """Concurrent appends are ranked together, in one transaction under the ranking lock. With
        an idempotency key, a retry gets the first answer back and appends nothing."""
        out = await self.batcher.submit((req, idempotency.ref_for("append_item", req)))
        if isinstance(out, ZimmerError):
            raise out
        return out

    async def _append_batch(self, keyed: list[tuple[AppendItem, KeyRef | None]]) -> list[AppendResult | ZimmerError]:
        appended = 0
        async with self._engine().begin() as conn:
            await store.lock_ranking(conn)

            async def place(indices: list[int]) -> list[AppendResult | ZimmerError]:
                nonlocal appended
                placed = await self._append_many(conn, [keyed[i][0] for i in indices])
                appended += sum(isinstance(o, AppendResult) for o in placed)
                return placed

            outcomes = await idempotency.keyed_batch(conn, SCHEMA, [ref for _, ref in keyed], place, AppendResult)
        for _ in range(appended):  # committed now; a replayed answer appended nothing
            self.on_appended()
        self._kick()
        return outcomes

    async def _append_many(self, conn: AsyncConnection, requests: list[AppendItem]) -> list[AppendResult | ZimmerError]:
        """Each append lands 10 below the lowest unpinned in-band peer of its cost (re-spacing
        the band first when it must, `band_full` when it cannot), in arrival order, each seeing
        the ones before it; then drifted items are re-ranked. One failure refuses one append.
        The batch is ranked in memory and written in a few statements, whatever its size.
        Runs in the caller's transaction, under the ranking lock."""
        batch = _AppendBatch(await store.open_rows(conn, [q.key for q in requests]),
                             await store.lowest_peers(conn, BAND_RANGES))
        outcomes = [await batch.place(conn, req) for req in requests]
        await store.move(conn, batch.moves)
        placed = [(req, batch.precedence[o]) for req, o in zip(requests, outcomes, strict=True) if isinstance(o, int)]
        ids = await store.insert_many(conn, placed) if placed else []
        item_of = dict(zip([o for o in outcomes if isinstance(o, int)], ids, strict=True))
        if await store.any_drifted(conn, BAND_RANGES):
            await store.rerank(conn)
        views = await store.fetch_many(conn, ids) if ids else {}
        await emit_many(conn, SCHEMA, [(ITEM_APPENDED, "item_appended", ItemEvent(item=views[i])) for i in ids])
        counts = await store.counts(conn)
        return [o if isinstance(o, ZimmerError) else AppendResult(item=views[item_of[o]], counts=counts)
                for o in outcomes]

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
            # An unpinned item out of its band moves back into it; a band with no room refuses
            # the unpin (band_full) rather than leave the item where the pin had put it.
            await store.rerank(conn, needs=None if pinned else item.estimated_cost)
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
            await store.rerank(conn)
            item = await store.fetch(conn, req.item_id)
            await emit(conn, SCHEMA, ITEM_REMOVED, "item_removed", ItemEvent(item=item))
        self.on_removed("operator")
        self._kick()
        return item

    async def on_session_event(self, conn: AsyncConnection, event: EventEnvelope) -> None:
        """Counts come from spot-gate's session events, for the sessions this backlog produced."""
        session = SessionEvent.model_validate(event.data).session
        if session.metadata.get("spawned_by") != SPAWNED_BY or "work_backlog_item_id" not in session.metadata:
            return
        await store.record_session(conn, session.id, int(session.metadata["work_backlog_item_id"]), session.status,
                                   store.spot_held(session), session.updated_at, session.version)



class _AppendBatch:
    """A batch of appends ranked in memory: new items carry negative placeholder ids until the
    one insert at the end; moves to stored rows are collected and written once."""

    def __init__(self, open_rows: dict[str, Any], lowest: dict[str, RankedItem]):
        self.taken = {k: r.id for k, r in open_rows.items()}
        self.peers: dict[str, list[RankedItem]] = {c: [p] for c, p in lowest.items()}
        self.complete: set[str] = set()  # costs whose whole queue is in `peers`, not just the lowest
        self.moves: dict[int, int] = {}
        self.precedence: dict[int, int] = {}  # placeholder id → precedence
        self._next = -1

    async def place(self, conn: AsyncConnection, req: AppendItem) -> int | ZimmerError:
        if req.key in self.taken:
            existing = self.taken[req.key]
            return ZimmerError(ErrorCode.CONFLICT, f"{req.key} is already on the queue" +
                               (f" as item {existing}" if existing > 0 else " (appended just before, in this batch)"),
                               {"field": "key", "item_id": existing if existing > 0 else None})
        cost = req.estimated_cost
        try:
            placement = plan_append(self.peers.get(cost, []), cost)
            if placement.moves and cost not in self.complete:  # a re-space needs the whole band
                stored = await store.queued_of_cost(conn, cost)
                self.peers[cost] = [apply([i], {i.id: self.moves[i.id]})[0] if i.id in self.moves else i
                                    for i in stored] + [i for i in self.peers.get(cost, []) if i.id < 0]
                self.complete.add(cost)
                placement = plan_append(self.peers[cost], cost)
        except BandFull as exc:
            return ZimmerError(ErrorCode.BAND_FULL, str(exc), {"field": "estimated_cost", "estimated_cost": cost})
        if placement.moves:
            self.peers[cost] = apply(self.peers[cost], placement.moves)
            for item_id, precedence in placement.moves.items():
                if item_id < 0:
                    self.precedence[item_id] = precedence
                else:
                    self.moves[item_id] = precedence
        placeholder, self._next = self._next, self._next - 1
        self.precedence[placeholder] = placement.precedence
        self.peers.setdefault(cost, []).append(RankedItem(placeholder, cost, placement.precedence, False,
                                                          datetime.now(UTC)))
        self.taken[req.key] = placeholder
        return placeholder
