"""The trash records' SQL: what the session event consumer writes, how the jobs claim and finish
records, and the mangled-clone markers. Every write that ends a step names the state and attempt it
expects, so a step that lost a race (an unarchive recorded mid-cleanup) changes nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_sweeper.trash.domain import EMPTIABLE, MAX_ATTEMPTS, RETRY_WAIT, State, trash_deadline
from zimmer_sweeper.trash.tables import mangled_markers
from zimmer_sweeper.trash.tables import trash_records as t

# A new cycle starts from nothing: what an earlier archive's cleanup found and did is not this one's.
_FRESH_CYCLE = dict(attempts=0, finding=None, bundle_preserved=False, patch_preserved=False, preserved_bytes=0,
                    clone_removed=False, freed_bytes=0, outcome="", last_error="", unarchived_at=None, restore_outcome=None,
                    restore_detail="")


async def record_archive(conn: AsyncConnection, *, session_id: int, host: str, clone_path: str | None,
                         archived_at: datetime, version: int, now: datetime) -> bool:
    """Put an archived session in the pipeline, deadline stamped: True when this is news. A
    redelivery, or an archive older than what is recorded (an unarchive overtook it), changes
    nothing; a re-archive after an unarchive starts a new cycle."""
    values: dict[str, Any] = dict(
        session_id=session_id, host=host, clone_path=clone_path, archived_at=archived_at, session_version=version,
        state=State.PENDING.value, next_attempt_at=now, trash_after=trash_deadline(archived_at), recorded_at=now,
        updated_at=now, **_FRESH_CYCLE)
    stmt = pg_insert(t).values(**values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.c.session_id],
        set_={k: stmt.excluded[k] for k in values if k not in ("session_id", "recorded_at")},
        where=t.c.session_version < stmt.excluded.session_version)
    return bool((await conn.execute(stmt.returning(t.c.session_id))).first())


async def record_unarchive(conn: AsyncConnection, *, session_id: int, host: str, clone_path: str | None,
                           version: int, now: datetime) -> bool:
    """Ask for the restore: True when this is news. Whatever the cycle was doing, the session is
    live again and its clone is to come back; a record this sweeper never had is made, so the
    restore still answers spot-gate (it then finds nothing preserved, or the clone still there)."""
    values: dict[str, Any] = dict(
        session_id=session_id, host=host, clone_path=clone_path, archived_at=None, session_version=version,
        state=State.RESTORING.value, next_attempt_at=now, trash_after=None, recorded_at=now, updated_at=now,
        **{**_FRESH_CYCLE, "unarchived_at": now})
    stmt = pg_insert(t).values(**values)
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.c.session_id],
        set_=dict(state=State.RESTORING.value, session_version=stmt.excluded.session_version,
                  clone_path=func.coalesce(stmt.excluded.clone_path, t.c.clone_path), unarchived_at=now,
                  restore_outcome=None, restore_detail="",
                  next_attempt_at=now, trash_after=None, updated_at=now),
        where=t.c.session_version < stmt.excluded.session_version)
    return bool((await conn.execute(stmt.returning(t.c.session_id))).first())


async def claim_cleanup(conn: AsyncConnection, *, host: str, now: datetime) -> tuple[Row[Any], bool] | None:
    """The next due pending record, its attempt counted before any work (so a run a kill cuts short
    has spent one), and whether it may still be tried. False: MAX_ATTEMPTS were already spent by runs
    that never reported back, and the record is the exhaustion's."""
    row = (await conn.execute(
        select(t).where(t.c.host == host, t.c.state == State.PENDING.value, t.c.next_attempt_at <= now)
        .order_by(t.c.next_attempt_at, t.c.session_id).limit(1).with_for_update(skip_locked=True))).first()
    if row is None:
        return None
    if row.attempts >= MAX_ATTEMPTS:
        return row, False
    claimed = (await conn.execute(
        update(t).where(t.c.session_id == row.session_id)
        .values(attempts=t.c.attempts + 1, next_attempt_at=now + RETRY_WAIT, updated_at=now).returning(t))).one()
    return claimed, True


async def count_due(conn: AsyncConnection, *, host: str, now: datetime) -> int:
    return int((await conn.execute(select(func.count()).select_from(t).where(
        t.c.host == host, t.c.state == State.PENDING.value, t.c.next_attempt_at <= now))).scalar_one())


async def finish_cleanup(conn: AsyncConnection, row: Row[Any], *, now: datetime, **fields: Any) -> bool:
    """End (or note) an attempt, if the record is still the pending attempt this run claimed."""
    done = await conn.execute(
        update(t).where(t.c.session_id == row.session_id, t.c.state == State.PENDING.value,
                        t.c.attempts == row.attempts, t.c.session_version == row.session_version)
        .values(updated_at=now, **fields).returning(t.c.session_id))
    return done.first() is not None


async def record_defusal(conn: AsyncConnection, *, session_id: int, archived_at: datetime, host: str,
                         dropped_deletions: int, now: datetime) -> None:
    """One marker per archive: a retried cleanup that defuses the same tree again counts it once."""
    await conn.execute(pg_insert(mangled_markers).values(
        session_id=session_id, archived_at=archived_at, host=host, dropped_deletions=dropped_deletions,
        defused_at=now).on_conflict_do_nothing(index_elements=[mangled_markers.c.session_id,
                                                               mangled_markers.c.archived_at]))


async def defusals_since(conn: AsyncConnection, *, host: str, since: datetime) -> list[Row[Any]]:
    return list((await conn.execute(
        select(mangled_markers.c.session_id, mangled_markers.c.dropped_deletions)
        .where(mangled_markers.c.host == host, mangled_markers.c.defused_at >= since)
        .order_by(mangled_markers.c.defused_at))).all())


async def restores_due(conn: AsyncConnection, *, host: str) -> list[Row[Any]]:
    return list((await conn.execute(
        select(t).where(t.c.host == host, t.c.state == State.RESTORING.value).order_by(t.c.unarchived_at))).all())


async def finish_restore(conn: AsyncConnection, row: Row[Any], *, now: datetime, **fields: Any) -> bool:
    """Write a restore's progress, if no newer event (a re-archive) replaced it meanwhile."""
    done = await conn.execute(
        update(t).where(t.c.session_id == row.session_id, t.c.state == State.RESTORING.value,
                        t.c.session_version == row.session_version)
        .values(updated_at=now, **fields).returning(t.c.session_id))
    return done.first() is not None


async def expired(conn: AsyncConnection, *, host: str, now: datetime, limit: int) -> list[Row[Any]]:
    """Records whose deadline passed with something of theirs maybe still on disk, oldest first."""
    return list((await conn.execute(
        select(t).where(t.c.host == host, t.c.state.in_([s.value for s in EMPTIABLE]), t.c.trash_after <= now)
        .order_by(t.c.trash_after, t.c.session_id).limit(limit))).all())


async def finish_expired(conn: AsyncConnection, row: Row[Any], *, now: datetime, **fields: Any) -> bool:
    done = await conn.execute(
        update(t).where(and_(t.c.session_id == row.session_id, t.c.state == row.state,
                             t.c.session_version == row.session_version))
        .values(updated_at=now, **fields).returning(t.c.session_id))
    return done.first() is not None


async def records_for(conn: AsyncConnection, session_ids: list[int]) -> dict[int, Row[Any]]:
    rows = (await conn.execute(select(t).where(t.c.session_id.in_(session_ids)))).all() if session_ids else []
    return {r.session_id: r for r in rows}
