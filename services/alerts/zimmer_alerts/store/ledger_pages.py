"""The alerts ledger's read, a page at a time (issue 27 #13: a list never fails for its size).

An answer travels in one bus message. An issue carries its last message (up to 2,000 characters),
its snippet (up to 1,200) and its notifications, so 500 issues are ~2 MB: a page carries the
issues that fit the answer's byte budget, at most `limit`, and `next_before`, a keyset cursor in
the list's order (`domain.issue_cursor`). An issue carries its newest `NOTIFICATIONS_SHOWN`
notifications and a count of the rest, so no one issue outgrows a page.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, exists, func, select, true, tuple_
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_alerts.domain.issue_cursor import IssueKey, decode_before, encode_before
from zimmer_alerts.store.tables import conditions, events, issues, notifications
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, read_within, row_bytes, take_within
from zimmer_common.contracts.alerts import NOTIFICATIONS_SHOWN, AlertList, AlertQuery, ConditionView, IssueView, NotificationView

ORDER = (issues.c.last_seen, issues.c.id)  # newest first: the list's order and its cursor's key


async def read(conn: AsyncConnection, q: AlertQuery, budget: int = ANSWER_ROWS_MAX_BYTES) -> AlertList:
    """The issues `q` asks for after `q.before`, as many as fit in `budget` bytes beside the
    conditions and the repeating pages' notifications (which every page carries, bounded by count)."""
    side = AlertList(issues=[], conditions=await _conditions(conn, q), page_notifications=await _page_notices(conn, q))
    room = max(1, budget - row_bytes(side))  # a page still carries one issue: rows_that_fit never takes none
    where = _filters(q)
    after = []
    if q.before is not None:
        key = decode_before(q.before)
        after.append(tuple_(*ORDER) < (key.last_seen, key.id))
    last = (select(events.c.message, events.c.snippet).where(events.c.issue_id == issues.c.id)
            .order_by(events.c.id.desc()).limit(1).lateral())
    stmt = (select(issues, last.c.message.label("last_message"), last.c.snippet.label("last_snippet"))
            .select_from(issues.join(last, true())).where(and_(true(), *where, *after))
            .order_by(*(c.desc() for c in ORDER)).limit(q.limit))
    # Measured once bare (read a few at a time), again with their notifications, which may end it sooner.
    bare = await read_within(conn, stmt, room, _issue)
    shown = take_within(await _with_notifications(conn, bare), room, row_bytes)
    more = bool(shown) and bool((await conn.execute(select(exists().where(
        *where, tuple_(*ORDER) < (shown[-1].last_seen, shown[-1].id))))).scalar_one())
    return side.model_copy(update={"issues": shown, "next_before": encode_before(
        IssueKey(shown[-1].last_seen, shown[-1].id)) if more else None})


def _filters(q: AlertQuery) -> list[Any]:
    where = []
    if q.state == "open":
        where.append(issues.c.notified_at.is_(None))
    elif q.state == "notified":
        where.append(issues.c.notified_at.is_not(None))
    if q.source:
        where.append(issues.c.source == q.source)
    if q.level:
        where.append(issues.c.level == q.level)
    if q.since:
        where.append(issues.c.last_seen >= q.since)
    return where


def _issue(r: Row[Any]) -> IssueView:
    return IssueView(**{k: r._mapping[k] for k in IssueView.model_fields if k in r._mapping}, notifications=[])


async def _with_notifications(conn: AsyncConnection, found: list[IssueView]) -> list[IssueView]:
    """Each issue with its newest `NOTIFICATIONS_SHOWN` notifications (oldest of them first) and
    how many older ones it has: a tracker refusing every event adds a row per event."""
    if not found:
        return []
    n = notifications.c
    ranked = select(notifications, func.row_number().over(partition_by=n.issue_id, order_by=n.id.desc()).label("newness"),
                    func.count().over(partition_by=n.issue_id).label("told")).where(
        n.issue_id.in_([i.id for i in found])).subquery()
    told: dict[int, list[NotificationView]] = {i.id: [] for i in found}
    total: dict[int, int] = {}
    for row in await conn.execute(select(ranked).where(ranked.c.newness <= NOTIFICATIONS_SHOWN)
                                  .order_by(ranked.c.issue_id, ranked.c.id)):
        told[row.issue_id].append(_notification(row))
        total[row.issue_id] = row.told
    return [i.model_copy(update={"notifications": told[i.id],
                                 "notifications_not_shown": total.get(i.id, 0) - len(told[i.id])}) for i in found]


async def _conditions(conn: AsyncConnection, q: AlertQuery) -> list[ConditionView]:
    cond_where = [conditions.c.still_true | (conditions.c.resolved_at >= q.since)] if q.since else []
    rows = await conn.execute(select(conditions).where(*cond_where).order_by(conditions.c.last_seen.desc())
                              .limit(q.limit))
    return [ConditionView(**c._mapping) for c in rows]


async def _page_notices(conn: AsyncConnection, q: AlertQuery) -> list[NotificationView]:
    rows = await conn.execute(select(notifications).where(notifications.c.group_title.is_not(None))
                              .order_by(notifications.c.id.desc()).limit(q.limit))
    return [_notification(n) for n in rows]


def _notification(n: Row[Any]) -> NotificationView:
    return NotificationView(sink=n.sink, outcome=n.outcome, detail=n.detail, attempts=n.attempts, at=n.at,
                            group_title=n.group_title)
