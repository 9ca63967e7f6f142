"""The spawn saga's rows (DESIGN §5): which rows a pull takes, and their moves through
`starting` to `started`, or back to `queued`. Queries on the backlog schema like `store`'s, in the
caller's transaction; kept apart so the saga reads top to bottom in one place."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, Text, case, func, literal, or_, select, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_backlog.store.queue import OPEN, ORDER_OF_QUEUE, QUEUED, SELECT_ITEMS, is_, lock_ranking, rerank
from zimmer_backlog.store.tables import items


async def by_keys(conn: AsyncConnection, keys: list[str]) -> list[Row[Any]]:
    """For each key, its open row if it has one, else its newest started row (a retried pull)."""
    return list((await conn.execute(
        SELECT_ITEMS.where(items.c.key.in_(keys), is_(items.c.status, "queued", "starting", "started"))
        .ext(distinct_on(items.c.key)).order_by(items.c.key, OPEN.desc(), items.c.id.desc()))).all())


async def top_queued(conn: AsyncConnection, n: int) -> list[Row[Any]]:
    return list((await conn.execute(SELECT_ITEMS.where(QUEUED).order_by(*ORDER_OF_QUEUE).limit(n))).all())


async def mark_starting(conn: AsyncConnection, item_id: int, spawn_key: str, by_session: int | None,
                        start_class: str, start_precedence: int | None, start_deadline: float) -> bool:
    """Queued → starting for a new start; a row already `starting` is taken over by this request
    (its deadline replaces the last one, so the recovery job leaves it to this request)."""
    def if_new(value: Any, otherwise: Any) -> Any:
        return case((QUEUED, value), else_=otherwise)
    row = (await conn.execute(update(items).where(items.c.id == item_id, OPEN).values(
        status="starting", spawn_key=spawn_key, start_deadline=start_deadline,
        started_by_session_id=if_new(literal(by_session, BigInteger), items.c.started_by_session_id),
        start_class=if_new(literal(start_class, Text), items.c.start_class),
        start_precedence=if_new(literal(start_precedence, Integer), items.c.start_precedence),
    ).returning(items.c.id))).first()
    return row is not None


async def mark_started(conn: AsyncConnection, item_id: int, session_id: int) -> bool:
    row = (await conn.execute(update(items).where(items.c.id == item_id, is_(items.c.status, "starting")).values(
        status="started", started_session_id=session_id, started_at=func.now()).returning(items.c.id))).first()
    return row is not None


async def start_precedence(conn: AsyncConnection, item_id: int) -> int:
    return int((await conn.execute(select(func.coalesce(items.c.start_precedence, 0))
                                   .where(items.c.id == item_id))).scalar_one())


async def back_to_queued(conn: AsyncConnection, item_id: int, *, if_deadline: float | None = None) -> bool:
    """Starting → queued; with `if_deadline`, only if no later request has taken the row over.
    A writer of the queue like any other: under the ranking lock (taken before the row, the order
    every writer takes them in), and it re-ranks after it writes."""
    await lock_ranking(conn)
    stmt = update(items).where(items.c.id == item_id, is_(items.c.status, "starting"))
    if if_deadline is not None:
        stmt = stmt.where(items.c.start_deadline == if_deadline)
    row = (await conn.execute(stmt.values(status="queued", started_by_session_id=None, start_deadline=None)
                              .returning(items.c.id))).first()
    if row is not None:
        await rerank(conn)
    return row is not None


async def stale_starting(conn: AsyncConnection, limit: int, before: float) -> list[Row[Any]]:
    """Rows left `starting` by a request whose deadline passed before `before`: nothing will
    commit for them any more, so what spot-gate holds now is final."""
    return list((await conn.execute(
        SELECT_ITEMS.add_columns(items.c.start_class, items.c.start_precedence, items.c.spawn_key,
                                 items.c.start_deadline)
        .where(is_(items.c.status, "starting"),
               or_(items.c.start_deadline.is_(None), items.c.start_deadline < before))
        .order_by(items.c.id).limit(limit))).all())
