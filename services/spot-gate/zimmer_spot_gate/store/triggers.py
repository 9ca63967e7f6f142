"""Triggers: kind, name, and the class and precedence selectors stamped on what they spawn."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, insert, literal_column, select
from sqlalchemy import update as sa_update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.byte_pages import read_within
from zimmer_common.contracts.spot_policy import CreateTrigger, TriggerQuery, TriggerView
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_spot_gate.store.tables import sessions, triggers

COLUMNS = list(triggers.c)  # id, kind, name, scheduling_class, precedence, prompt, enabled, created_at, updated_at


def to_view(row: Row[Any]) -> TriggerView:
    return TriggerView(**row._mapping)


CREATE = insert(triggers).returning(*COLUMNS)


async def create(conn: AsyncConnection, req: CreateTrigger) -> TriggerView:
    row = (await conn.execute(CREATE, {
        "kind": req.kind, "name": req.name, "scheduling_class": req.scheduling_class, "precedence": req.precedence,
        "prompt": req.prompt, "enabled": req.enabled})).one()
    return to_view(row)


FETCH = select(*COLUMNS).where(triggers.c.id == bindparam("id"))
FETCH_LOCKED = FETCH.with_for_update()


async def fetch(conn: AsyncConnection, trigger_id: int, *, lock: bool = False) -> Row[Any]:
    row = (await conn.execute(FETCH_LOCKED if lock else FETCH, {"id": trigger_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"trigger {trigger_id} does not exist", {"trigger_id": trigger_id})
    return row


async def update(conn: AsyncConnection, trigger_id: int, fields: dict[str, Any]) -> TriggerView:
    if not fields:
        return to_view(await fetch(conn, trigger_id))
    row = (await conn.execute(sa_update(triggers).where(triggers.c.id == trigger_id)
                              .values(**fields, updated_at=func.now()).returning(*COLUMNS))).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"trigger {trigger_id} does not exist", {"trigger_id": trigger_id})
    return to_view(row)


async def search(conn: AsyncConnection, q: TriggerQuery, budget: int) -> tuple[list[TriggerView], int]:
    """The triggers `q` asks for from `q.offset`, oldest first, as many as fit in `budget` bytes
    (a trigger carries its prompt; issue 27 #13); and how many match in all."""
    where: list[ColumnElement[bool]] = []
    if q.kind:
        where.append(triggers.c.kind == q.kind)
    if q.name_contains:
        where.append(triggers.c.name.icontains(q.name_contains, autoescape=True))
    stmt = select(*COLUMNS).where(*where).order_by(triggers.c.id).limit(q.limit).offset(q.offset)
    views = await read_within(conn, stmt, budget, to_view)
    total = (await conn.execute(select(func.count()).select_from(triggers).where(*where))).scalar_one()
    return views, int(total)


s = sessions.c
HELD = (select(s.spot_hold_reason.label("reason"), func.count().label("n"))
        .where(s.spot_hold_reason.is_not(None)).group_by(s.spot_hold_reason))


PAUSED = select(s.spot_pause_reason.label("reason"), func.count().label("n")).where(
    s.paused_by.is_not(None)).group_by(s.spot_pause_reason)


async def paused_counts(conn: AsyncConnection) -> dict[str, int]:
    """Sessions asleep: paused mid-run by the ceiling, parked in the spot queue by a person, parked by an
    auth outage."""
    found = {r.reason: int(r.n) for r in (await conn.execute(PAUSED)).all()}
    return {"at_utilization_limit": found.get("at_utilization_limit", 0),
            "user_spot_queue": found.get("user_spot_queue", 0), "auth_outage": found.get("auth_outage", 0)}


async def counts(conn: AsyncConnection, resolved_class: ColumnElement[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Running sessions by resolved class (`sessions.class_expr`), and held sessions by hold reason."""
    cls = resolved_class.label("cls")
    running = {r.cls: int(r.n) for r in (await conn.execute(
        select(cls, func.count().label("n")).where(s.status == literal_column("'running'")).group_by(cls))).all()}
    held = {r.reason: int(r.n) for r in (await conn.execute(HELD)).all()}
    return ({"priority": running.get("priority", 0), "spot": running.get("spot", 0)},
            {"at_utilization_limit": held.get("at_utilization_limit", 0), "fleet_at_cap": held.get("fleet_at_cap", 0)})
