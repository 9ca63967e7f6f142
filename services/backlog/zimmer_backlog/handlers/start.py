"""How an item becomes a session: the one place (seed 000, "How an item becomes a session";
DESIGN §5, the spawn saga).

The row is marked `starting` with an idempotency key and the deadline of the request doing it,
spot-gate is asked to spawn with that key (spawn is idempotent on it) inside that deadline, and
the row is marked `started` with the session. A definite refusal puts the row back to `queued`;
an ambiguous failure (no answer) leaves it `starting`. Then either a retried pull by keys asks
again with the same key (spot-gate returns the session it made, or makes it once), or, once the
deadline has passed and nothing can commit for it any more, the recovery job asks spot-gate
which session that key made, if any, and marks the row `started` or puts it back `queued`. The
recovery never spawns: a pull answered `unavailable` must not start work later.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from zimmer_backlog.domain.issues import ISSUELESS_SOURCES
from zimmer_backlog.handlers.spot import SpotGateClient
from zimmer_backlog.jobs.snapshot import snapshot_title
from zimmer_backlog.store import queue, start_rows
from zimmer_common import deadline
from zimmer_common.contracts.backlog import ITEM_STARTED, ItemEvent, ItemView, StartedItem
from zimmer_common.contracts.spot import SessionView, SpawnSession
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitsOfWork

SPAWNED_BY = "work-backlog"
CALLER = "service:backlog"  # the scope of the backlog's spawn keys at spot-gate
GOAL = "open-reviewed-green-pr"


def spawn_key(item_id: int) -> str:
    return f"work-backlog:item:{item_id}"


def prompt_for(item: ItemView) -> str:
    """A session's prompt comes from its issue. Only an issueless row from an operator or the
    import carries its own prompt (seed 000 "What an item is"); any other row without an issue
    is refused rather than spawned from whatever its payload says: that would be ungated work."""
    if item.issue_url:
        return f"{item.issue_url}\n\nPlease implement this"
    if item.added_via in ISSUELESS_SOURCES:
        prompt = item.payload.get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            return prompt  # an issueless item's verbatim prompt
        # Written before the contract required one (issue 27 #5): a session on "" is work on nothing.
        raise ZimmerError(ErrorCode.REFUSED, f"item {item.id} has no issue and no prompt; it is not started",
                          {"item_id": item.id, "field": "payload.prompt"})
    raise ZimmerError(ErrorCode.REFUSED, f"item {item.id} has no issue and did not come from an operator or the "
                      "import; it is not started", {"item_id": item.id, "added_via": item.added_via})


def title_for(item: ItemView, issue_title: str | None) -> str:
    """Seed 000: "titled Implement zimmer#498 (…)". The item's title, else the issue's as the
    GitHub snapshot last read it, else the key alone (never "Implement zimmer#498 ()")."""
    title = (item.title or issue_title or "").strip()
    return (f"Implement {item.key} ({title})" if title else f"Implement {item.key}")[:500]


def spawn_request(item: ItemView, *, scheduling_class: str, parent_session_id: int | None,
                  precedence: int | None, issue_title: str | None = None) -> SpawnSession:
    return SpawnSession(
        idempotency_key=spawn_key(item.id), parent_session_id=parent_session_id, scheduling_class=scheduling_class,
        precedence=precedence, prompt=prompt_for(item), title=title_for(item, issue_title),
        goal=GOAL, metadata={"spawned_by": SPAWNED_BY, "work_backlog_item_id": item.id, "work_backlog_key": item.key})


class Starter:
    def __init__(self, units: UnitsOfWork, spot: SpotGateClient):
        self._units = units
        self._spot = spot
        # Fault-injection seam for tests: runs after spot-gate answered, before the row is marked.
        self.after_spawn: Callable[[int], Awaitable[None]] | None = None

    async def start(self, item: ItemView, *, scheduling_class: str, parent_session_id: int | None,
                    precedence: int | None) -> StartedItem:
        """Spawn for a row already marked `starting` (or resume one left there)."""
        try:
            issue_title = None
            if not item.title.strip() and item.issue_url:
                async with self._units.read() as conn:
                    issue_title = await snapshot_title(conn, item.issue_url)
            request = spawn_request(item, scheduling_class=scheduling_class, parent_session_id=parent_session_id,
                                    precedence=precedence, issue_title=issue_title)
            with deadline.as_caller(CALLER):  # the backlog's own keys, which no other caller can claim
                result = await self._spot.spawn(request)
        except ZimmerError as exc:
            if exc.code is not ErrorCode.UNAVAILABLE:
                async with self._units.begin() as uow:  # a definite no: the item stays on the queue
                    await start_rows.back_to_queued(uow.conn, item.id)
            raise
        if self.after_spawn is not None:
            await self.after_spawn(item.id)
        return await self._mark_started(item.id, result.session)

    async def _mark_started(self, item_id: int, session: SessionView) -> StartedItem:
        async with self._units.begin() as uow:
            if await start_rows.mark_started(uow.conn, item_id, session.id):
                await queue.record_session(uow.conn, session.id, item_id, session.status, queue.spot_held(session),
                                           session.updated_at, session.version)
                started = await queue.fetch(uow.conn, item_id)
                await uow.emit(ITEM_STARTED, "item_started", ItemEvent(item=started))
            else:  # another request (a retried pull, the recovery job) marked it already
                started = await queue.fetch(uow.conn, item_id)
        return StartedItem(item=started, session_id=session.id, precedence=session.precedence)

    async def recover(self, limit: int = 20) -> list[Any]:
        """Resolve rows left `starting` by a request whose deadline has passed: the session its
        key made (if any) is final now, so mark the row started with it, or put it back queued.
        Never spawns."""
        async with self._units.read() as conn:
            rows = await start_rows.stale_starting(conn, limit, before=time.time() - deadline.REPLY_GRACE)
        outcomes: list[Any] = []
        for row in rows:
            try:
                with deadline.as_caller(CALLER):
                    session = await self._spot.session_by_key(row.spawn_key or spawn_key(row.id))
            except ZimmerError as exc:
                if exc.code is not ErrorCode.NOT_FOUND:
                    outcomes.append(exc)  # spot-gate did not answer: ask again next run
                    continue
                async with self._units.begin() as uow:
                    await start_rows.back_to_queued(uow.conn, row.id, if_deadline=row.start_deadline)
                outcomes.append("requeued")
                continue
            outcomes.append(await self._mark_started(row.id, session))
        return outcomes
