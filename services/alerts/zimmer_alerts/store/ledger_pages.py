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
from zimmer_alerts.domain.policy import Timing
from zimmer_alerts.store.tables import conditions, events, issues, notifications
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, read_within, row_bytes, take_within
from zimmer_common.contracts.alerts import NOTIFICATIONS_SHOWN, AlertList, AlertQuery, ConditionView, IssueView, NotificationView

TIMING = Timing()
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
    last = _last_event(events.c.message, events.c.snippet)
    stmt = (_newest_firing(last, issues, last.c.message.label("last_message"), last.c.snippet.label("last_snippet"))
            .where(and_(true(), *where, *after)).limit(q.limit))
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


# Whether an issue still pages (domain.policy): its condition while true; an error page with no
# condition for one repeat interval after its newest event (`events_firing`, on the database's clock).
FIRING = (conditions.c.still_true.label("condition_true"), conditions.c.resolved_at.label("resolved_at"),
          (issues.c.last_seen + TIMING.repeat_interval).label("events_until"),
          (issues.c.last_seen + TIMING.repeat_interval > func.now()).label("events_firing"))


def _last_event(*columns: Any) -> Any:
    """Each issue's newest event (its `columns` and its condition), joined laterally."""
    return (select(*columns, events.c.condition_key).where(events.c.issue_id == issues.c.id)
            .order_by(events.c.id.desc()).limit(1).lateral())


def _newest_firing(last: Any, *columns: Any) -> Any:
    """`columns` of the issues, newest first, with their newest event's condition and whether each
    still pages (FIRING): what the panel lists and what its gauge counts read alike."""
    return (select(*columns, last.c.condition_key.label("condition_key"), *FIRING)
            .select_from(issues.join(last, true()).outerjoin(conditions, conditions.c.condition_key == last.c.condition_key))
            .order_by(*(c.desc() for c in ORDER)))


def _firing(row: Any) -> dict[str, Any]:
    if row.get("condition_key"):
        return {"still_firing": bool(row.get("condition_true"))}
    if row["level"] == "error" and (row.get("log_level") or "error") == "error":
        return {"still_firing": bool(row.get("events_firing")), "firing_until": row.get("events_until")}
    return {}


def _issue(r: Row[Any]) -> IssueView:
    row = r._mapping
    fields = {k: row[k] for k in IssueView.model_fields if k in row and k not in ("still_firing", "firing_until")}
    return IssueView(**fields, **_firing(row), notifications=[])


async def newest_paging(conn: AsyncConnection, newest: int) -> tuple[int, int]:
    """Of the `newest` issues (the Health page's Alerts panel: `PANEL_ISSUES`), how many there are and
    how many still page, as `read` says each one (the gauge zimmer_alert_newest_issues)."""
    stmt = _newest_firing(_last_event(), issues.c.level, issues.c.log_level).limit(newest)
    rows = (await conn.execute(stmt)).all()
    return len(rows), sum(1 for r in rows if _firing(r._mapping).get("still_firing"))


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
