"""The backlog's own writes and reads, one unit of work each (seed 000): list, append (alone or
many callers at once), pin, unpin and an operator's removal. Pulls are `pull.py`'s, holds
`holds.py`'s, spot-gate's session events `session_events.py`'s."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from zimmer_backlog.domain.issues import admitted
from zimmer_backlog.domain.ranking import AppendPlan, NeedsBand, RankedItem, plan_batch
from zimmer_backlog.store import queue
from zimmer_common import deadline, idempotency
from zimmer_common.batching import LockedBatcher, Take
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, next_offset
from zimmer_common.clock import Clock, SystemClock
from zimmer_common.contracts.backlog import (
    APPEND_MANY,
    ITEM_APPENDED,
    ITEM_PINNED,
    ITEM_REMOVED,
    ITEM_UNPINNED,
    AppendItem,
    AppendMany,
    AppendManyResult,
    AppendOutcome,
    AppendResult,
    ItemEvent,
    ItemList,
    ItemQuery,
    ItemRef,
    ItemView,
    PinItem,
    RemoveItem,
)
from zimmer_common.errors import ErrorCode, ZimmerError, unavailable
from zimmer_common.idempotency import KeyRef
from zimmer_common.outage import Outages
from zimmer_common.unit_of_work import UnitOfWork, UnitsOfWork

SCHEMA = queue.SCHEMA
Keyed = tuple[AppendItem, KeyRef | None]  # an append and its caller-scoped idempotency key


class Backlog:
    def __init__(self, units: UnitsOfWork, clock: Clock | None = None, outages: Outages | None = None, *,
                 on_appended: Callable[[], None] = lambda: None,
                 on_removed: Callable[[str], None] = lambda reason: None):
        self._units = units
        self.clock = clock or SystemClock()
        self.outages = outages or Outages()
        self.on_appended = on_appended  # metrics hooks
        self.on_removed = on_removed
        self.batcher: LockedBatcher[Keyed, AppendResult | ZimmerError] = LockedBatcher(self._append_batch)

    async def list(self, q: ItemQuery, budget: int = ANSWER_ROWS_MAX_BYTES) -> ItemList:
        """A page of rows: `q.limit` at most, fewer when their bytes reach `budget`, with where the
        next page starts."""
        async with self._units.snapshot() as conn:  # the rows, their total and the counts agree
            now = self.clock.now()
            items, total = await queue.search(conn, q.status, q.limit, q.offset, now, budget)
            return ItemList(items=items, total=total, counts=await queue.counts(conn, now),
                            next_offset=next_offset(q.offset, len(items), total))

    async def append(self, req: AppendItem) -> AppendResult:
        """Concurrent appends are ranked together, in one transaction under the ranking lock. With
        an idempotency key, a retry gets the first answer back and appends nothing. An append that
        breaks seed 000's issue rules is refused before it waits (`invalid`, naming the field)."""
        req = admitted(req)
        out = await self.batcher.submit((req, idempotency.ref_for("append_item", req)))
        if isinstance(out, ZimmerError):
            raise out
        return out

    async def append_many(self, req: AppendMany) -> AppendManyResult:
        """Appends from many callers in one request (the gateway's coalesced REST appends): each
        keyed to its own caller and answered on its own, ranked with every append waiting, as if
        each had come alone. One that breaks the issue rules is refused alone (`invalid`, as
        `append_item` would). A failure that refused all the others is the request's own answer."""
        keyed: list[Keyed] = []
        refused: dict[int, ZimmerError] = {}
        for i, entry in enumerate(req.appends):
            try:
                item = admitted(entry.item)
            except ZimmerError as exc:
                refused[i] = exc
                continue
            with deadline.as_caller(entry.caller):
                keyed.append((item, idempotency.ref_for("append_item", item)))
        done = await self.batcher.submit_many(keyed) if keyed else []
        failures = [future.exception() for future in done]
        if done and all(failures) and not refused:
            raise failures[0]  # type: ignore[misc]  # none was even tried to the end: nothing happened
        tried = iter(zip(done, failures, strict=True))
        outcomes: list[AppendOutcome] = []
        for i in range(len(req.appends)):
            if i in refused:
                outcomes.append(self._outcome(refused[i]))
            else:
                future, failure = next(tried)
                outcomes.append(self._outcome(failure or future.result()))
        return AppendManyResult(outcomes=outcomes)

    def _outcome(self, out: AppendResult | BaseException) -> AppendOutcome:
        """An append's result, the refusal its batch decided, or the failure that refused it alone
        (its deadline passed while it waited, its batch rolled back)."""
        if isinstance(out, AppendResult):
            # Without the payload the caller sent: up to 100 of them echoed back would not fit one
            # bus message even when the request did (issue 27 #13).
            return AppendOutcome(result=out.model_copy(update={"item": out.item.without_payload()}))
        if not isinstance(out, ZimmerError):
            dependency = self.outages.report(out, where=APPEND_MANY.subject)
            if dependency is None:
                raise out  # a bug: the request's answer is `internal`
            out = unavailable(dependency)
        error = out.to_dict()
        if out.retry_safe:
            error["details"] = self.outages.naming(out.details)
        return AppendOutcome(error=error)  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody

    async def _append_batch(self, take: Take[Keyed]) -> list[AppendResult | ZimmerError]:
        """The appends waiting once this transaction holds the ranking lock, ranked together."""
        appended = 0
        async with self._units.begin() as uow:
            await queue.lock_ranking(uow.conn)
            keyed = take()
            if not keyed:
                return []

            async def place(indices: list[int]) -> list[AppendResult | ZimmerError]:
                nonlocal appended
                placed = await self._append_many(uow, [keyed[i][0] for i in indices])
                appended += sum(isinstance(o, AppendResult) for o in placed)
                return placed

            outcomes = await uow.keyed_batch([ref for _, ref in keyed], place, AppendResult)
        for _ in range(appended):  # committed now; a replayed answer appended nothing
            self.on_appended()
        return outcomes

    async def _append_many(self, uow: UnitOfWork, requests: list[AppendItem]) -> list[AppendResult | ZimmerError]:
        """Each append lands 10 below the lowest unpinned in-band peer of its cost (re-spacing
        the band first when it must, `band_full` when it cannot), in arrival order, each seeing
        the ones before it; then drifted items are re-ranked. One failure refuses one append.
        The batch is planned in memory (`ranking.plan_batch`, pure) and written in a few
        statements, whatever its size. Runs in the caller's unit of work, under the ranking lock."""
        conn = uow.conn
        before = await queue.before_appending(conn, [q.key for q in requests])
        bands: dict[str, tuple[list[RankedItem], bool]] = {
            cost: ([peer], False) for cost, peer in before.lowest_peers.items()}
        asks = [(q.key, q.estimated_cost) for q in requests]
        now = datetime.now(UTC)
        while isinstance(plan := plan_batch(asks, before.open_ids, bands, now), NeedsBand):
            bands[plan.cost] = (await queue.queued_of_cost(conn, plan.cost), True)  # a re-space needs the band
        await queue.move(conn, plan.moves)
        placed = [(requests[i], p) for i, p in sorted(plan.precedence.items())]
        # With nothing drifted, no re-rank follows: the rows are final as inserted and the insert
        # writes their events itself (one round trip fewer under the lock).
        announced = not before.drifted
        if placed:
            written, counts = await queue.insert_many(conn, placed, self.clock.now(), announce=announced)
        else:
            written, counts = [], await queue.counts(conn, self.clock.now())
        # The batch's own writes land inside their bands: what drifted before it still does.
        moves = await queue.rerank(conn) if before.drifted else {}
        item_of = {i: queue.moved(item, moves) for i, item in zip(sorted(plan.precedence), written, strict=True)}
        if not announced:
            await uow.emit_many([(ITEM_APPENDED, "item_appended", ItemEvent(item=item))
                                           for item in item_of.values()])
        return [AppendResult(item=item_of[i], counts=counts) if i in item_of else _refusal(req, i, plan)
                for i, req in enumerate(requests)]

    async def pin(self, req: PinItem) -> ItemView:
        """A human hand-places an item and has it stay placed: pinned items are never moved by
        any writer and never count as anyone's peer."""
        return await self._set_pin(req.item_id, True, req.precedence, ITEM_PINNED, "item_pinned")

    async def unpin(self, req: ItemRef) -> ItemView:
        return await self._set_pin(req.item_id, False, None, ITEM_UNPINNED, "item_unpinned")

    async def _set_pin(self, item_id: int, pinned: bool, precedence: int | None, subject: str, etype: str) -> ItemView:
        async with self._units.begin() as uow:
            await queue.lock_ranking(uow.conn)
            item = await queue.fetch(uow.conn, item_id)
            if item.status != "queued":
                raise ZimmerError(ErrorCode.CONFLICT, f"item {item_id} is {item.status}; only a queued item can be "
                                  f"{'pinned' if pinned else 'unpinned'}", {"item_id": item_id, "status": item.status})
            item = await queue.set_pin(uow.conn, item_id, pinned, precedence)
            # An unpinned item out of its band moves back into it; a band with no room refuses
            # the unpin (band_full) rather than leave the item where the pin had put it.
            item = queue.moved(item, await queue.rerank(uow.conn, needs=None if pinned else item.estimated_cost))
            await uow.emit(subject, etype, ItemEvent(item=item))
        return item

    async def remove(self, req: RemoveItem) -> ItemView:
        """Removal by a human's judgement, in words (agents remove only on a pull, from a fixed vocabulary)."""
        async with self._units.begin() as uow:
            await queue.lock_ranking(uow.conn)
            item = await queue.fetch(uow.conn, req.item_id)
            removed = await queue.remove(uow.conn, req.item_id, req.reason, req.by or "operator")
            if removed is None:
                raise ZimmerError(ErrorCode.CONFLICT, f"item {req.item_id} is {item.status}, not queued",
                                  {"item_id": req.item_id, "status": item.status})
            await queue.rerank(uow.conn)
            item = removed
            await uow.emit(ITEM_REMOVED, "item_removed", ItemEvent(item=item))
        self.on_removed("operator")
        return item


def _refusal(req: AppendItem, i: int, plan: AppendPlan) -> ZimmerError:
    if i in plan.conflict:
        existing = plan.conflict[i]
        return ZimmerError(ErrorCode.CONFLICT, f"{req.key} is already on the queue" +
                           (f" as item {existing}" if existing else " (appended just before, in this batch)"),
                           {"field": "key", "item_id": existing})
    return ZimmerError(ErrorCode.BAND_FULL, str(plan.full[i]),
                       {"field": "estimated_cost", "estimated_cost": req.estimated_cost})
