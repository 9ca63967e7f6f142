"""A session's timeline: its log lines in the order they were written, a page at a time.

Verbose lines (raw CLI stdout) are left out unless asked for by level, as the seed's timeline
does. The cursor is the last line's (created_at, id), so a page is one index range scan per
day partition of the session's classes (`logs_session_timeline`), whatever the table holds;
lines written after a page was read appear on later pages, never twice.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, row_bytes, take_within
from zimmer_common.contracts.logs import LEVELS, LogLevel, LogLineView, LogPage, LogQuery
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_sweeper.logs.domain import level_class
from zimmer_sweeper.logs.tables import logs

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_LEVELS: tuple[LogLevel, ...] = tuple(level for level in LEVELS if level != "verbose")


def encode_cursor(created_at: datetime, line_id: int) -> str:
    micros = (created_at - EPOCH) // timedelta(microseconds=1)  # exact: a float would round
    return base64.urlsafe_b64encode(f"v1:{micros}:{line_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        version, micros, line_id = raw.split(":")
        if version != "v1":
            raise ValueError(version)
        return EPOCH + timedelta(microseconds=int(micros)), int(line_id)
    except (ValueError, UnicodeDecodeError, binascii.Error, OverflowError, OSError):
        raise ZimmerError(ErrorCode.INVALID, "cursor is not one this API returned; pass next_cursor as it came",
                          {"field": "cursor"}) from None


async def page(engine: AsyncEngine, query: LogQuery, budget: int = ANSWER_ROWS_MAX_BYTES) -> LogPage:
    """A page of `query.limit` lines at most, fewer when their bytes reach `budget` (issue 27 #13: a
    thousand 16 KB lines would be more than one bus message), with the cursor of the last one sent."""
    levels = sorted(set(query.levels or DEFAULT_LEVELS), key=LEVELS.index)
    classes = sorted({level_class(level) for level in levels})
    order = (logs.c.created_at, logs.c.id)
    stmt = (select(logs.c.id, logs.c.session_id, logs.c.level, logs.c.message, logs.c.logged_at, logs.c.created_at)
            .where(logs.c.session_id == query.session_id, logs.c.level_class.in_(classes), logs.c.level.in_(levels)))
    if query.cursor:
        after = decode_cursor(query.cursor)
        key = tuple_(*order)
        stmt = stmt.where(key > after if query.order == "asc" else key < after)
    stmt = stmt.order_by(*(c.asc() if query.order == "asc" else c.desc() for c in order)).limit(query.limit + 1)
    async with engine.connect() as conn:
        rows = (await conn.execute(stmt)).all()
    more = len(rows) > query.limit
    rows = rows[:query.limit]
    lines = take_within([LogLineView(id=r.id, session_id=r.session_id, level=r.level, message=r.message,
                                     at=r.logged_at, created_at=r.created_at) for r in rows], budget, row_bytes)
    more = more or len(lines) < len(rows)
    cursor = encode_cursor(lines[-1].created_at, lines[-1].id) if more and lines else None
    return LogPage(session_id=query.session_id, levels=levels, lines=lines, next_cursor=cursor)
