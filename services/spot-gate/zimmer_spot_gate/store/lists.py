"""The reads that list rows of free text (sessions and their prompts, enqueued messages): each
answers with at most its `limit` rows, and only as many as fit in one answer's byte budget
(issue 27 #13: a list never fails for its size; `zimmer_common.byte_pages`)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import ARRAY, BigInteger, ColumnElement, Text, any_, cast, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.byte_pages import read_within
from zimmer_common.contracts.spot import EnqueuedMessage, SessionQuery, SessionView
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass
from zimmer_spot_gate.store.sessions import SESSION, class_expr, to_view
from zimmer_spot_gate.store.tables import enqueued_messages as m
from zimmer_spot_gate.store.tables import sessions as s

ORDER = {"precedence": (s.c.precedence.desc(), s.c.created_at.asc(), s.c.id.asc()),
         "created_at": (s.c.created_at.desc(), s.c.id.desc()),
         "updated_at": (s.c.updated_at.desc(), s.c.id.desc())}


async def search(conn: AsyncConnection, q: SessionQuery, overrides: Mapping[Genesis, SchedulingClass],
                 budget: int) -> tuple[list[SessionView], int]:
    """The sessions `q` asks for from `q.offset`, in its order, as many as fit in `budget` bytes;
    and how many match in all."""
    where: list[ColumnElement[bool]] = []
    if q.status:
        where.append(s.c.status == any_(cast(list(q.status), ARRAY(Text))))
    if q.genesis:
        where.append(s.c.genesis == any_(cast(list(q.genesis), ARRAY(Text))))
    if q.priority_class:
        where.append(class_expr(overrides) == q.priority_class)
    if q.parent_session_id is not None:
        where.append(s.c.parent_session_id == q.parent_session_id)
    if q.ids:
        where.append(s.c.id == any_(cast(list(q.ids), ARRAY(BigInteger))))
    stmt = SESSION.where(*where).order_by(*ORDER[q.order]).limit(q.limit).offset(q.offset)
    views = await read_within(conn, stmt, budget, lambda row: to_view(row, overrides))
    total = (await conn.execute(select(func.count()).select_from(s).where(*where))).scalar_one()
    return views, int(total)


async def enqueued(conn: AsyncConnection, session_id: int, limit: int, before_id: int | None,
                   budget: int) -> tuple[list[EnqueuedMessage], bool]:
    """A session's enqueued messages older than `before_id` (all when None), newest first,
    delivered ones included, as many as fit in `budget` bytes; and whether older ones remain."""
    older = [m.c.session_id == session_id] + ([m.c.id < before_id] if before_id is not None else [])
    stmt = (select(m.c.id, m.c.turn_kind, m.c.prompt, m.c.created_at, m.c.delivered_at)
            .where(*older).order_by(m.c.id.desc()).limit(limit))
    messages = await read_within(conn, stmt, budget, lambda row: EnqueuedMessage(**row._mapping))
    if not messages:
        return messages, False
    more = select(m.c.id).where(m.c.session_id == session_id, m.c.id < messages[-1].id).exists()
    return messages, bool((await conn.execute(select(more))).scalar_one())
