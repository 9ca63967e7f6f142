"""Triggers: kind, name, and the class and precedence selectors stamped on what they spawn."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.spot_policy import CreateTrigger, TriggerQuery, TriggerView
from zimmer_common.errors import ErrorCode, ZimmerError

COLUMNS = "id, kind, name, scheduling_class, precedence, prompt, enabled, created_at, updated_at"


def to_view(row: Row[Any]) -> TriggerView:
    return TriggerView(**row._mapping)


async def create(conn: AsyncConnection, req: CreateTrigger) -> TriggerView:
    row = (await conn.execute(text(f"""
        INSERT INTO spot_gate.triggers (kind, name, scheduling_class, precedence, prompt, enabled)
        VALUES (:kind, :name, :cls, :precedence, :prompt, :enabled) RETURNING {COLUMNS}"""),
        {"kind": req.kind, "name": req.name, "cls": req.scheduling_class, "precedence": req.precedence,
         "prompt": req.prompt, "enabled": req.enabled})).one()
    return to_view(row)


async def fetch(conn: AsyncConnection, trigger_id: int, *, lock: bool = False) -> Row[Any]:
    row = (await conn.execute(text(f"SELECT {COLUMNS} FROM spot_gate.triggers WHERE id = :id"
                                   + (" FOR UPDATE" if lock else "")), {"id": trigger_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"trigger {trigger_id} does not exist", {"trigger_id": trigger_id})
    return row


async def update(conn: AsyncConnection, trigger_id: int, fields: dict[str, Any]) -> TriggerView:
    if fields:
        sets = ", ".join(f"{k} = :{k}" for k in fields)
        await conn.execute(text(f"UPDATE spot_gate.triggers SET {sets}, updated_at = now() WHERE id = :id"),
                           {**fields, "id": trigger_id})
    return to_view(await fetch(conn, trigger_id))


async def search(conn: AsyncConnection, q: TriggerQuery) -> list[TriggerView]:
    where, params = ["true"], {"limit": q.limit}
    if q.kind:
        where.append("kind = :kind")
        params["kind"] = q.kind
    if q.name_contains:
        where.append("name ILIKE :name")
        escaped = q.name_contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params["name"] = f"%{escaped}%"
    rows = (await conn.execute(text(f"SELECT {COLUMNS} FROM spot_gate.triggers WHERE {' AND '.join(where)} "
                                    "ORDER BY id LIMIT :limit"), params)).all()
    return [to_view(r) for r in rows]


async def counts(conn: AsyncConnection, class_sql: str) -> tuple[dict[str, int], dict[str, int]]:
    """Running sessions by resolved class, and held sessions by hold reason."""
    running = {r.cls: int(r.n) for r in (await conn.execute(text(
        f"SELECT {class_sql} AS cls, count(*) AS n FROM spot_gate.sessions s WHERE s.status = 'running' GROUP BY 1"))).all()}
    held = {r.reason: int(r.n) for r in (await conn.execute(text(
        "SELECT spot_hold_reason AS reason, count(*) AS n FROM spot_gate.sessions "
        "WHERE spot_hold_reason IS NOT NULL GROUP BY 1"))).all()}
    return ({"priority": running.get("priority", 0), "spot": running.get("spot", 0)},
            {"at_utilization_limit": held.get("at_utilization_limit", 0), "fleet_at_cap": held.get("fleet_at_cap", 0)})
