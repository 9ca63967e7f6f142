"""The alerts ledger's queries (SQLAlchemy Core over `tables`): recording a page into its issue
and, for a condition, its page group; and what the notifier must send. The ledger's read, a page
at a time, is `ledger_pages`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, exists, func, literal_column, or_, select, text, true, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_alerts.domain.policy import PageGroup, Timing, events_firing, fingerprint
from zimmer_alerts.store.tables import conditions, events, issues, notifications, page_groups
from zimmer_common.contracts.alerts import ConditionView, Page
from zimmer_common.errors import ErrorCode, ZimmerError

TIMING = Timing()
FIRING = exists().where(conditions.c.title == page_groups.c.title, conditions.c.still_true)


async def record(conn: AsyncConnection, page: Page, event_id: str, now: datetime) -> bool:
    """Count the page on its issue (one per fingerprint) and, for a condition, move its page
    group. False when this event was recorded already (a redelivery)."""
    if (await conn.execute(select(events.c.id).where(events.c.event_id == event_id))).first():
        return False
    logged_at = page.log_level or page.level
    stmt = insert(issues).values(fingerprint=fingerprint(page.fingerprint), title=page.title, level=page.level,
                                 source=page.source, events=1, first_seen=page.occurred_at, last_seen=page.occurred_at,
                                 log_level=logged_at)
    issue_id, created = (await conn.execute(stmt.on_conflict_do_update(
        index_elements=[issues.c.fingerprint],
        set_={"events": issues.c.events + 1, "last_seen": func.greatest(issues.c.last_seen, stmt.excluded.last_seen)},
    ).returning(issues.c.id, literal_column("xmax = 0").label("created")))).one()
    await conn.execute(insert(events).values(
        event_id=event_id, issue_id=issue_id, title=page.title, level=page.level, source=page.source,
        message=page.message, context=page.context, snippet=page.snippet, condition_key=page.condition_key,
        still_true=page.still_true, occurred_at=page.occurred_at))
    if page.condition_key is not None:
        await _move_condition(conn, page, now)
    elif page.level == "error" and logged_at == "error":
        # An ERROR record is a repeating page; a page logged at WARN is only its own issue's page.
        await _join_by_event(conn, page, now, new_issue=created)
    return True


async def _join_by_event(conn: AsyncConnection, page: Page, now: datetime, *, new_issue: bool) -> None:
    """An error page with no condition: its title's group fires while such events keep arriving.
    Resting (no event for a repeat interval, no condition true), this one starts a new episode; a
    new issue joining a firing group is sent at the group interval; a repeat keeps it firing."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"zimmer.alerts.group:{page.title}"})
    row = (await conn.execute(select(page_groups.c.last_event_at, FIRING.label("condition_firing"))
                              .where(page_groups.c.title == page.title))).first()
    firing = row is not None and (row.condition_firing or events_firing(row.last_event_at, now, TIMING))
    group = insert(page_groups).values(title=page.title, level=page.level, first_seen=now, last_joined=now,
                                       last_event_at=now)
    if not firing:
        await conn.execute(group.on_conflict_do_update(index_elements=[page_groups.c.title], set_={
            "first_seen": now, "last_joined": now, "last_event_at": now, "last_notified": None,
            "resolution_sent_at": None, "level": page.level}))
    else:
        await conn.execute(group.on_conflict_do_update(index_elements=[page_groups.c.title], set_={
            "last_event_at": now, "level": "error",
            **({"last_joined": now} if new_issue else {})}))


async def _move_condition(conn: AsyncConnection, page: Page, now: datetime) -> None:
    key = page.condition_key
    # Two replicas recording pages of one title at once would both read "not firing yet" and both
    # restart the group's episode: one title's group moves one page at a time.
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"zimmer.alerts.group:{page.title}"})
    before = (await conn.execute(select(conditions.c.still_true).where(conditions.c.condition_key == key))).first()
    group_firing = (await conn.execute(select(exists().where(
        conditions.c.title == page.title, conditions.c.still_true, conditions.c.condition_key != key)))).scalar_one()
    stmt = insert(conditions).values(condition_key=key, title=page.title, level=page.level, source=page.source,
                                     still_true=page.still_true, first_seen=now, last_seen=now,
                                     resolved_at=None if page.still_true else now)
    await conn.execute(stmt.on_conflict_do_update(index_elements=[conditions.c.condition_key], set_={
        "still_true": stmt.excluded.still_true, "last_seen": now, "level": stmt.excluded.level,
        "first_seen": case((and_(~conditions.c.still_true, stmt.excluded.still_true), now),
                           else_=conditions.c.first_seen),  # true again after it resolved: a new episode
        "resolved_at": None if page.still_true else func.coalesce(conditions.c.resolved_at, now)}))
    if not page.still_true:
        return
    joined = before is None or not before.still_true  # new, or true again after it resolved
    if not joined:
        return
    group = insert(page_groups).values(title=page.title, level=page.level, first_seen=now, last_joined=now)
    if group_firing:  # another condition keeps the group firing: this one joins it
        await conn.execute(group.on_conflict_do_update(index_elements=[page_groups.c.title], set_={
            "last_joined": now, "level": "error" if page.level == "error" else page_groups.c.level}))
    else:  # the group starts a new episode: group wait first, then the repeats
        await conn.execute(group.on_conflict_do_update(index_elements=[page_groups.c.title], set_={
            "first_seen": now, "last_joined": now, "last_notified": None, "resolution_sent_at": None,
            "level": page.level}))


async def resolve(conn: AsyncConnection, key: str, now: datetime) -> ConditionView:
    row = (await conn.execute(update(conditions).where(conditions.c.condition_key == key).values(
        still_true=False, resolved_at=func.coalesce(conditions.c.resolved_at, now), last_seen=now)
        .returning(*conditions.c))).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"no condition {key!r} has been reported", {"condition_key": key})
    return ConditionView(**row._mapping)


async def open_condition_keys(conn: AsyncConnection, source: str) -> set[str]:
    """The conditions `source` reported and nobody has resolved: what a monitor still has firing,
    whatever process reported it (the health monitor re-reads them after a restart)."""
    return set((await conn.execute(select(conditions.c.condition_key).where(
        conditions.c.source == source, conditions.c.still_true))).scalars())


def _unclaimed(table: Any, now: datetime) -> Any:
    return or_(table.c.claimed_until.is_(None), table.c.claimed_until < now)


async def claim_issues(conn: AsyncConnection, now: datetime, lease: timedelta, limit: int = 100) -> list[Row[Any]]:
    """Claim the issues not yet notified (and not claimed by another notifier): a lease, so the
    sink calls that follow happen outside any transaction, and a notifier that dies while sending
    lets another send them."""
    ids = (select(issues.c.id).where(issues.c.notified_at.is_(None), _unclaimed(issues, now)).order_by(issues.c.id)
           .limit(limit).with_for_update(skip_locked=True).scalar_subquery())
    claimed = list((await conn.execute(update(issues).where(issues.c.id.in_(ids))
                                       .values(claimed_until=now + lease).returning(issues.c.id))).scalars())
    if not claimed:
        return []
    last = (select(events.c.message, events.c.snippet, events.c.context).where(events.c.issue_id == issues.c.id)
            .order_by(events.c.id.desc()).limit(1).lateral())
    return list((await conn.execute(select(issues, last.c.message, last.c.snippet, last.c.context)
                                    .select_from(issues.join(last, true())).where(issues.c.id.in_(claimed))
                                    .order_by(issues.c.id))).all())


async def mark_issue_notified(conn: AsyncConnection, issue_id: int, now: datetime) -> None:
    await conn.execute(update(issues).where(issues.c.id == issue_id).values(notified_at=now, claimed_until=None))


async def claim_events(conn: AsyncConnection, now: datetime, lease: timedelta, limit: int = 200) -> list[Row[Any]]:
    """Claim events not yet forwarded to the issue tracker, oldest first, each with its issue's
    fingerprint (what the tracker groups on)."""
    pending = or_(events.c.tracker_claimed_until.is_(None), events.c.tracker_claimed_until < now)
    ids = (select(events.c.id).where(events.c.tracked_at.is_(None), pending).order_by(events.c.id).limit(limit)
           .with_for_update(skip_locked=True).scalar_subquery())
    claimed = list((await conn.execute(update(events).where(events.c.id.in_(ids))
                                       .values(tracker_claimed_until=now + lease).returning(events.c.id))).scalars())
    if not claimed:
        return []
    return list((await conn.execute(select(events, issues.c.fingerprint).select_from(events.join(issues))
                                    .where(events.c.id.in_(claimed)).order_by(events.c.id))).all())


async def mark_events_tracked(conn: AsyncConnection, sent: list[int], refused: list[int], now: datetime) -> None:
    """Events done with: those the tracker took (counted on their issue) and those it refused."""
    if not sent and not refused:
        return
    await conn.execute(update(events).where(events.c.id.in_([*sent, *refused])).values(
        tracked_at=now, tracker_claimed_until=None))
    if sent:
        took = (select(events.c.issue_id, func.count().label("n")).where(events.c.id.in_(sent))
                .group_by(events.c.issue_id).subquery())
        await conn.execute(update(issues).where(issues.c.id == took.c.issue_id)
                           .values(tracker_events=issues.c.tracker_events + took.c.n))


async def skip_tracking(conn: AsyncConnection, now: datetime) -> None:
    """No tracker is configured or allowed here: nothing waits to be forwarded, so configuring one
    later does not flood it with the past."""
    await conn.execute(update(events).where(events.c.tracked_at.is_(None)).values(tracked_at=now))


async def groups(conn: AsyncConnection, now: datetime, timing: Timing = TIMING) -> list[tuple[Row[Any], PageGroup]]:
    """Every page group no other notifier has claimed, firing while a condition in it is still
    true or, for error pages with no condition, while their events keep arriving."""
    rows = (await conn.execute(select(page_groups, FIRING.label("condition_firing")).where(_unclaimed(page_groups, now))
                               .order_by(page_groups.c.title))).all()
    return [(r, PageGroup(level=r.level, first_seen=r.first_seen, last_joined=r.last_joined,
                          last_notified=r.last_notified,
                          firing=r.condition_firing or events_firing(r.last_event_at, now, timing))) for r in rows]


async def claim_groups(conn: AsyncConnection, titles: list[str], now: datetime, lease: timedelta) -> set[str]:
    """Claim the groups about to be sent; those another notifier claimed meanwhile are left out."""
    if not titles:
        return set()
    return set((await conn.execute(update(page_groups).where(page_groups.c.title.in_(titles),
                                                             _unclaimed(page_groups, now))
                                   .values(claimed_until=now + lease).returning(page_groups.c.title))).scalars())


async def group_detail(conn: AsyncConnection, title: str) -> Row[Any] | None:
    """The newest event of the group (a still-true condition's, or an error page's), for the
    notification's words."""
    return (await conn.execute(select(events.c.message, events.c.snippet, events.c.context, events.c.source)
                               .where(events.c.title == title, events.c.still_true)
                               .order_by(events.c.id.desc()).limit(1))).first()


async def mark_group_notified(conn: AsyncConnection, title: str, now: datetime) -> None:
    await conn.execute(update(page_groups).where(page_groups.c.title == title).values(
        last_notified=now, notifications=page_groups.c.notifications + 1, claimed_until=None))


async def mark_resolution_sent(conn: AsyncConnection, title: str, now: datetime) -> None:
    await conn.execute(update(page_groups).where(page_groups.c.title == title).values(resolution_sent_at=now,
                                                                                      claimed_until=None))


async def add_notifications(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(insert(notifications), rows)
