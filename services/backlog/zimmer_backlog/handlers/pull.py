"""Pulls and start-now: the queue becoming work (seed 000, "Who may do what", "How an item
becomes a session", "spot_held: why a pull of zero is not always healthy")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_backlog.domain.pullreport import UNKNOWN_CEILING, PullFacts, sentence
from zimmer_backlog.handlers.spot import SpotGateClient
from zimmer_backlog.handlers.start import Starter, spawn_key
from zimmer_backlog.store import queue, start_rows
from zimmer_common import deadline, idempotency
from zimmer_common.contracts.backlog import (
    ITEM_REMOVED,
    Counts,
    FailedStart,
    ItemEvent,
    ItemRef,
    ItemView,
    NotRemoved,
    PullItems,
    PullResult,
    StartedItem,
    StartNowResult,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitOfWork, UnitsOfWork

MAX_PULL = 10
PULL_BUDGET = 30.0  # seconds, for a pull asked without a deadline (a direct call, a test)


class Puller:
    def __init__(self, units: UnitsOfWork, spot: SpotGateClient, starter: Starter,
                 on_removed: Callable[[str], None] = lambda reason: None):
        self._units = units
        self._spot = spot
        self.starter = starter
        self._on_removed = on_removed

    async def pull(self, req: PullItems) -> PullResult:
        """Pull by count or by keys, under the request's deadline (or `PULL_BUDGET` when called
        without one): every spawn it asks for is budgeted inside it, and the rows it marks
        `starting` carry it, so nothing it started can commit after its caller gave up."""
        if (req.count is None) == (req.keys is None):
            raise ZimmerError(ErrorCode.INVALID, "give either count (0-10) or keys, not both and not neither",
                              {"field": "count"})
        with deadline.use(deadline.current() or time.time() + PULL_BUDGET):
            return await self._pull(req, idempotency.ref_for("pull_items", req))

    async def _pull(self, req: PullItems, key: idempotency.KeyRef | None) -> PullResult:
        due = deadline.current()
        assert due is not None
        puller_precedence = await self._puller_precedence(req.acting_session_id)
        removed: list[ItemView] = []
        not_removed: list[NotRemoved] = []
        async with self._units.begin() as uow:
            conn = uow.conn
            await queue.lock_ranking(conn)
            resumed: dict[str, Any] | None = None
            if key is not None:
                claimed = await uow.claim(key)
                if claimed.response is not None:
                    return idempotency.replay(claimed.response, PullResult)
                if not claimed.fresh:
                    resumed = self._resumable(claimed.progress, key)
            if resumed is None:
                removed, not_removed = await self._remove(uow, req)
                rows = (await start_rows.top_queued(conn, req.count) if req.count
                        else [] if req.count == 0 else await start_rows.by_keys(conn, list(dict.fromkeys(req.keys or []))))
            else:  # the first attempt chose these; finish it (a pull by keys is safe to retry)
                removed = [await queue.fetch(conn, item_id) for item_id in resumed["removed"]]
                not_removed = [NotRemoved.model_validate(n) for n in resumed.get("not_removed", [])]
                rows = await start_rows.by_keys(conn, resumed["keys"])
            picked = [queue.view(r) for r in rows]
            n = len(picked)
            # The n-th item gets the puller's precedence + (count − n + 1): the top item runs
            # first and the tree stays contiguous.
            ranks = {item.id: puller_precedence + (n - i) for i, item in enumerate(picked)}
            for item in picked:
                if item.status in ("queued", "starting"):
                    await start_rows.mark_starting(conn, item.id, spawn_key(item.id), req.acting_session_id, "spot",
                                              ranks[item.id], due)
            if key is not None:
                await idempotency.note_progress(conn, uow.schema, key, {
                    "keys": [item.key for item in picked], "removed": [item.id for item in removed],
                    "not_removed": [n.model_dump() for n in not_removed], "deadline": due})
            await queue.rerank(conn)
        if resumed is None:
            for reason in (r.removal_reason for r in removed):
                self._on_removed(reason or "")
        started, failed = [], []
        for item in picked:
            if item.status == "started" and item.started_session_id is not None:
                # A retried pull by keys: the same session, not a second one, with its own precedence.
                started.append(StartedItem(item=item, session_id=item.started_session_id, earlier=True,
                                           precedence=await self._session_precedence(item)))
                continue
            try:
                started.append(await self.starter.start(item, scheduling_class="spot",
                                                        parent_session_id=req.acting_session_id,
                                                        precedence=ranks[item.id]))
            except ZimmerError as exc:
                failed.append(FailedStart(key=item.key, code=exc.code.value, message=exc.message,
                                          retry_safe=exc.code is ErrorCode.UNAVAILABLE))
        async with self._units.read() as conn:
            counts = await queue.counts(conn)
        facts = PullFacts(counts=counts, asked_count=req.count, new=sum(not s.earlier for s in started),
                          earlier=sum(s.earlier for s in started), failed=len(failed),
                          failed_codes=tuple(f.code for f in failed),
                          removed_reasons=tuple(r.removal_reason or "" for r in removed),
                          not_removed=len(not_removed), candidates=len(picked), wip_ceiling=req.wip_ceiling)
        said = sentence(facts, await self._held_ceiling(counts) if not facts.new else None)
        # Items without their payloads: 10 started and 50 removed at 64 KB each would not fit one bus
        # message, and the answer would fail after the pull had done its work (issue 27 #13).
        started = [s.model_copy(update={"item": s.item.without_payload()}) for s in started]
        removed = [item.without_payload() for item in removed]
        result = PullResult(started=started, removed=removed, failed=failed, not_removed=not_removed, counts=counts,
                            sentence=said)
        if key is not None:
            async with self._units.begin() as uow:
                await uow.record(key, result)
        return result

    @staticmethod
    def _resumable(progress: dict[str, Any] | None, key: idempotency.KeyRef) -> dict[str, Any]:
        """A first attempt that chose its items but did not answer: finish it once its deadline
        has passed (it can commit nothing more); before that it may still be running."""
        if progress is None or progress.get("deadline", 0) > time.time() - deadline.REPLY_GRACE:
            raise ZimmerError(ErrorCode.CONFLICT, f"a pull with idempotency key {key.key!r} is still in progress; "
                              "retry in a few seconds", {"field": "idempotency_key", "retry_safe": True})
        return progress

    async def start_now(self, req: ItemRef) -> StartNowResult:
        """A human's lever over the spot queue: one item, at priority class. No MCP path."""
        with deadline.use(deadline.current() or time.time() + PULL_BUDGET):
            return await self._start_now(req)

    async def _start_now(self, req: ItemRef) -> StartNowResult:
        due = deadline.current()
        assert due is not None
        async with self._units.begin() as uow:
            await queue.lock_ranking(uow.conn)
            item = await queue.fetch(uow.conn, req.item_id)
            if item.status != "queued":
                raise ZimmerError(ErrorCode.CONFLICT, f"item {item.id} is {item.status}, not queued",
                                  {"item_id": item.id, "status": item.status})
            await start_rows.mark_starting(uow.conn, item.id, spawn_key(item.id), req.acting_session_id, "priority",
                                           None, due)
            await queue.rerank(uow.conn)  # every writer re-ranks after it writes
        started = await self.starter.start(item, scheduling_class="priority", parent_session_id=None, precedence=None)
        return StartNowResult(item=started.item, session_id=started.session_id)

    async def _puller_precedence(self, session_id: int | None) -> int:
        if session_id is None:
            return 0
        try:
            return (await self._spot.session(session_id)).precedence
        except ZimmerError as exc:
            if exc.code is ErrorCode.NOT_FOUND:
                raise ZimmerError(ErrorCode.INVALID, f"acting session {session_id} does not exist",
                                  {"field": "acting_session_id"}) from None
            raise

    async def _held_ceiling(self, counts: Counts) -> str | None:
        """Which ceiling holds the spot gate, asked only when some in-flight sessions are held."""
        if not counts.spot_held:
            return None
        try:
            return (await self._spot.policy(timeout=2)).decision.ceiling or "none now"
        except ZimmerError:
            return UNKNOWN_CEILING

    async def _session_precedence(self, item: ItemView) -> int:
        assert item.started_session_id is not None
        try:
            return (await self._spot.session(item.started_session_id)).precedence
        except ZimmerError:  # spot-gate did not say: the precedence the session was started with
            async with self._units.read() as conn:
                return await start_rows.start_precedence(conn, item.id)

    async def _remove(self, uow: UnitOfWork, req: PullItems) -> tuple[list[ItemView], list[NotRemoved]]:
        """A pull's mechanical removals, from the fixed vocabulary. A pinned item is a human's
        placement: an agent's pull does not remove it. A key that is not queued is reported, not
        ignored. `removed_by` names who: the pulling session, else the caller."""
        removed: list[ItemView] = []
        refused: list[NotRemoved] = []
        by = _by(req.acting_session_id) or deadline.current_caller() or "backlog"
        conn = uow.conn
        for removal in req.removals:
            row = await queue.open_row(conn, removal.key)
            if row is None or row.status != "queued":
                refused.append(NotRemoved(key=removal.key, why=await _why_not_queued(conn, removal.key, row)))
                continue
            item = await queue.fetch(conn, row.id)
            if item.pinned:
                refused.append(NotRemoved(key=removal.key, why="pinned: a human placed it; only an operator removes it"))
                continue
            gone = await queue.remove(conn, row.id, removal.reason, by)
            if gone is not None:
                removed.append(gone)
                await uow.emit(ITEM_REMOVED, "item_removed", ItemEvent(item=gone))
        return removed, refused


async def _why_not_queued(conn: AsyncConnection, key: str, open_row: Any) -> str:
    """Which "not queued" it is: mid-start, its rows all started or removed (naming the newest),
    or no row has ever had the key."""
    if open_row is not None:
        return f"not queued: item {open_row.id} is {open_row.status}"
    newest = await queue.newest_row(conn, key)
    if newest is None:
        return "not queued: no item has ever had this key"
    return f"not queued: every row with this key has left the queue; the newest, item {newest.id}, is {newest.status}"


def _by(session_id: int | None) -> str | None:
    return f"session:{session_id}" if session_id is not None else None
