"""How an item becomes a session: the one place (seed 000, "How an item becomes a session";
DESIGN §5, the spawn saga).

The row is marked `starting` with an idempotency key, spot-gate is asked to spawn with that key
(spawn is idempotent on it), and the row is marked `started` with the session. A definite
refusal puts the row back to `queued`; an ambiguous failure (no answer) leaves it `starting`,
and asking again with the same key, by a retried pull by keys or the recovery job, resolves it:
spot-gate returns the session it made, or makes it once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_backlog import store
from zimmer_common.bus import Bus
from zimmer_common.contracts.backlog import ITEM_STARTED, ItemEvent, ItemView, StartedItem
from zimmer_common.contracts.spot import SPAWN, SpawnSession
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import emit

SCHEMA = "backlog"
SPAWNED_BY = "work-backlog"
GOAL = "open-reviewed-green-pr"


def spawn_key(item_id: int) -> str:
    return f"work-backlog:item:{item_id}"


def prompt_for(item: ItemView) -> str:
    if item.issue_url:
        return f"{item.issue_url}\n\nPlease implement this"
    return str(item.payload.get("prompt") or "")  # an issueless item's verbatim prompt


def spawn_request(item: ItemView, *, scheduling_class: str, parent_session_id: int | None,
                  precedence: int | None) -> SpawnSession:
    return SpawnSession(
        idempotency_key=spawn_key(item.id), parent_session_id=parent_session_id, scheduling_class=scheduling_class,
        precedence=precedence, prompt=prompt_for(item), title=f"Implement {item.key} ({item.title})"[:500],
        goal=GOAL, metadata={"spawned_by": SPAWNED_BY, "work_backlog_item_id": item.id, "work_backlog_key": item.key})


class Starter:
    def __init__(self, engine: Callable[[], AsyncEngine], bus: Callable[[], Bus], on_commit: Callable[[], None]):
        self._engine = engine
        self._bus = bus
        self._on_commit = on_commit
        # Fault-injection seam for tests: runs after spot-gate answered, before the row is marked.
        self.after_spawn: Callable[[int], Awaitable[None]] | None = None

    async def start(self, item: ItemView, *, scheduling_class: str, parent_session_id: int | None,
                    precedence: int | None) -> StartedItem:
        """Spawn for a row already marked `starting` (or resume one left there)."""
        request = spawn_request(item, scheduling_class=scheduling_class, parent_session_id=parent_session_id,
                                precedence=precedence)
        try:
            result = await self._bus().request(SPAWN, request)
        except ZimmerError as exc:
            if exc.code is not ErrorCode.UNAVAILABLE:
                async with self._engine().begin() as conn:  # a definite no: the item stays on the queue
                    await store.back_to_queued(conn, item.id)
            raise
        if self.after_spawn is not None:
            await self.after_spawn(item.id)
        session = result.session
        async with self._engine().begin() as conn:
            await store.mark_started(conn, item.id, session.id)
            await store.record_session(conn, session.id, item.id, session.status,
                                       session.status == "waiting" and session.spot_hold_reason is not None
                                       and not session.ever_started, session.updated_at)
            started = await store.fetch(conn, item.id)
            await emit(conn, SCHEMA, ITEM_STARTED, "item_started", ItemEvent(item=started))
        self._on_commit()
        return StartedItem(item=started, session_id=session.id, precedence=session.precedence)

    async def recover(self, limit: int = 20) -> list[Any]:
        """Finish or roll back rows left `starting` by an interrupted start, asking with the same key."""
        async with self._engine().connect() as conn:
            rows = await store.stale_starting(conn, limit)
        outcomes: list[Any] = []
        for row in rows:
            item = store.view(row)
            try:
                outcomes.append(await self.start(item, scheduling_class=row.start_class or "spot",
                                                 parent_session_id=row.started_by_session_id,
                                                 precedence=row.start_precedence))
            except ZimmerError as exc:
                outcomes.append(exc)
        return outcomes
