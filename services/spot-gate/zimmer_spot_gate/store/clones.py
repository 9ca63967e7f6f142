"""What spot-gate stores of sessions' clones, and the sweeper's questions about them.

Every question here decides deletions, so every query is unscoped: it reads every row whatever
its status (a filter added to "sessions" for tenancy or soft delete must never hide a live row
from these). Reap protection is `REAP_PROTECTED`, built once and used by each of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Interval,
    Text,
    and_,
    any_,
    bindparam,
    cast,
    false,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.clones import LIVE_STATUSES, UNARCHIVE_GRACE
from zimmer_spot_gate.domain.clones import StoredClone
from zimmer_spot_gate.store.tables import session_warnings as sw
from zimmer_spot_gate.store.tables import sessions as s

# An unarchive stamped within the grace of the database's now() (never NULL: no stamp is false).
FRESH_STAMP: ColumnElement[bool] = func.coalesce(
    s.c.unarchive_started_at > func.now() - literal(UNARCHIVE_GRACE, Interval()), false())
# Live, or freshly unarchived: the protection the sweepers' guard asks about (seed 003 "The
# unarchive window, which no status check could see").
REAP_PROTECTED: ColumnElement[bool] = or_(s.c.status.in_(LIVE_STATUSES), FRESH_STAMP)


def basename(path: Any) -> ColumnElement[str]:
    """migrations/0007's spot_gate.clone_basename: the expression sessions_clone_basename indexes."""
    return func.spot_gate.clone_basename(path, type_=Text)


# ---- the runtime's clone reports --------------------------------------------------------

STORED_CLONE = select(s.c.clone_path, s.c.agent_subdirectory, s.c.clone_scaffolded, s.c.clone_host,
                      s.c.clone_reported_at).where(s.c.id == bindparam("id")).with_for_update()


async def stored_clone(conn: AsyncConnection, session_id: int) -> StoredClone | None:
    """The session's clone as stored, its row locked for the report's write; None: no such session."""
    row = (await conn.execute(STORED_CLONE, {"id": session_id})).first()
    return None if row is None else StoredClone(row.clone_path, row.agent_subdirectory, row.clone_scaffolded,
                                                row.clone_host, row.clone_reported_at)


async def record_clone(conn: AsyncConnection, session_id: int, clone: StoredClone) -> None:
    await conn.execute(update(s).where(s.c.id == session_id).values(
        clone_path=clone.clone_path, agent_subdirectory=clone.agent_subdirectory, clone_scaffolded=clone.scaffolded,
        clone_host=clone.host, clone_reported_at=clone.reported_at, updated_at=func.now(), version=s.c.version + 1))


# ---- ownership, existence, listing ----------------------------------------------------

_asked = (func.unnest(cast(bindparam("paths"), ARRAY(Text)))
          .table_valued("path", with_ordinality="ord").render_derived("asked"))
# One query for the whole batch: each asked path (in order, duplicates kept) with every session
# whose clone's basename is its basename, through the expression index.
OWNERSHIP = (select(_asked.c.ord, _asked.c.path, basename(_asked.c.path).label("basename"),
                    s.c.id, s.c.clone_path, REAP_PROTECTED.label("protected"))
             .select_from(_asked.outerjoin(s, and_(s.c.clone_path.is_not(None),
                                                   basename(s.c.clone_path) == basename(_asked.c.path))))
             .order_by(_asked.c.ord, s.c.id))


async def ownership(conn: AsyncConnection, paths: list[str]) -> list[Row[Any]]:
    """(ord, path, basename, id, clone_path, protected) rows; id is None for a path nobody tracks."""
    return list((await conn.execute(OWNERSHIP, {"paths": paths})).all())


EXISTING = select(s.c.id, REAP_PROTECTED.label("protected")).where(
    s.c.id == any_(cast(bindparam("ids"), ARRAY(BigInteger)))).order_by(s.c.id)
ANY_SESSIONS = select(select(s.c.id).exists())


async def existing(conn: AsyncConnection, ids: list[int]) -> list[Row[Any]]:
    return list((await conn.execute(EXISTING, {"ids": ids})).all()) if ids else []


async def any_sessions(conn: AsyncConnection) -> bool:
    return bool((await conn.execute(ANY_SESSIONS)).scalar_one())


CLONE_COLUMNS = (s.c.id.label("session_id"), s.c.status, s.c.clone_path, s.c.agent_subdirectory,
                 s.c.clone_scaffolded.label("scaffolded"), s.c.clone_host.label("host"),
                 REAP_PROTECTED.label("reap_protected"), s.c.updated_at)


async def clones_page(conn: AsyncConnection, *, live_only: bool, host: str | None, after_id: int,
                      limit: int) -> list[Row[Any]]:
    """Sessions with a clone, by id after `after_id`, one more than `limit` (is there a next page?).
    A host asked for keeps the clones whose host was never reported: they may be on its disk, and
    a transcript sweep that missed a live one would count its transcript orphaned."""
    where: list[ColumnElement[bool]] = [s.c.clone_path.is_not(None), s.c.id > after_id]
    if live_only:
        where.append(REAP_PROTECTED)
    if host is not None:
        where.append(or_(s.c.clone_host == host, s.c.clone_host.is_(None)))
    return list((await conn.execute(select(*CLONE_COLUMNS).where(*where).order_by(s.c.id).limit(limit + 1))).all())


# ---- the unarchive stamp ----------------------------------------------------------------

STAMP = select(FRESH_STAMP).where(s.c.id == bindparam("id")).with_for_update()


async def clear_unarchive_stamp(conn: AsyncConnection, session_id: int) -> bool | None:
    """Drop the stamp; whether a fresh one was there (None: no such session)."""
    fresh = (await conn.execute(STAMP, {"id": session_id})).first()
    if fresh is None:
        return None
    await conn.execute(update(s).where(s.c.id == session_id, s.c.unarchive_started_at.is_not(None)).values(
        unarchive_started_at=None, updated_at=func.now(), version=s.c.version + 1))
    return bool(fresh[0])


# ---- durable warnings -------------------------------------------------------------------

WARNING_COLUMNS = (sw.c.id, sw.c.session_id, sw.c.kind, sw.c.message, sw.c.source, sw.c.created_at)
# Into the table only if the session exists, in one statement: its row is not locked, and a
# session deleted meanwhile takes the warning with it (ON DELETE CASCADE).
RECORD_WARNING = pg_insert(sw).from_select(
    ["session_id", "kind", "message", "source"],
    select(s.c.id, bindparam("kind", type_=Text), bindparam("message", type_=Text), bindparam("source", type_=Text))
    .where(s.c.id == bindparam("id"))).returning(*WARNING_COLUMNS)


async def record_warning(conn: AsyncConnection, session_id: int, kind: str, message: str,
                         source: str) -> Row[Any] | None:
    """The warning as stored; None: no such session."""
    return (await conn.execute(RECORD_WARNING, {"id": session_id, "kind": kind, "message": message,
                                                "source": source})).first()


NEWEST_WARNINGS = (select(*WARNING_COLUMNS).where(sw.c.session_id == bindparam("id"))
                   .order_by(sw.c.id.desc()).limit(bindparam("n")))


async def newest_warnings(conn: AsyncConnection, session_id: int, limit: int) -> list[Row[Any]]:
    return list((await conn.execute(NEWEST_WARNINGS, {"id": session_id, "n": limit})).all())


# ---- deleting a session -------------------------------------------------------------------

async def unlink_descendants(conn: AsyncConnection, session_id: int) -> list[int]:
    """Children and forks of a session about to go lose their link to it (a new version of each)."""
    unlinked: set[int] = set()
    for link in (s.c.parent_session_id, s.c.forked_from_session_id):
        rows = await conn.execute(update(s).where(link == session_id)
                                  .values({link: None, s.c.updated_at: func.now(), s.c.version: s.c.version + 1})
                                  .returning(s.c.id))
        unlinked.update(r.id for r in rows)
    return sorted(unlinked)


DELETE = s.delete().where(s.c.id == bindparam("id")).returning(func.now().label("deleted_at"))


async def delete_session(conn: AsyncConnection, session_id: int) -> datetime | None:
    """The row goes, and its own history with it (the foreign keys cascade); when (None: no such row)."""
    row = (await conn.execute(DELETE, {"id": session_id})).first()
    return None if row is None else row.deleted_at
