"""Sessions, their hold records, enqueued messages and the decision log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common import deadline
from zimmer_common.contracts.spot import SessionQuery, SessionView, SpawnSession
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_spot_gate.domain.classes import DEFAULT_GENESIS_CLASS, Lineage, Origin, resolve_class
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass

COLUMNS = """s.id, s.parent_session_id, s.forked_from_session_id, s.genesis, s.scheduling_class, s.precedence,
    s.status, s.runtime, s.harness, s.model, s.title, s.goal, s.prompt, s.trigger_id, s.clone_path, s.metadata,
    s.is_status_summary_fork, s.ever_started, s.spot_hold_reason, s.spot_hold_retry_at, s.spot_hold_count,
    s.held_turn_kind, s.held_prompt, s.held_attachments, s.created_at, s.updated_at, s.version,
    (SELECT count(*) FROM spot_gate.enqueued_messages m WHERE m.session_id = s.id AND m.delivered_at IS NULL)
        AS enqueued"""


def class_sql(overrides: Mapping[Genesis, SchedulingClass]) -> str:
    """The resolved class as SQL, mirroring `resolve_class` (the values are our own enums)."""
    cases = " ".join(f"WHEN '{g.value}' THEN '{overrides.get(g, c).value}'" for g, c in DEFAULT_GENESIS_CLASS.items())
    return f"COALESCE(s.scheduling_class, CASE s.genesis {cases} END)"


def to_view(row: Row[Any], overrides: Mapping[Genesis, SchedulingClass]) -> SessionView:
    return view_of(row._mapping, overrides)


VIEW_COLUMNS = ("id", "parent_session_id", "forked_from_session_id", "genesis", "scheduling_class", "precedence",
                "status", "runtime", "harness", "model", "title", "goal", "prompt", "trigger_id", "clone_path",
                "is_status_summary_fork", "ever_started", "spot_hold_reason", "spot_hold_retry_at",
                "spot_hold_count", "held_turn_kind", "created_at", "updated_at", "version")


def view_of(s: Mapping[str, Any], overrides: Mapping[Genesis, SchedulingClass]) -> SessionView:
    own = SchedulingClass(s["scheduling_class"]) if s["scheduling_class"] else None
    return SessionView(
        **{k: s[k] for k in VIEW_COLUMNS}, metadata=s["metadata"] or {},
        priority_class=resolve_class(own, Genesis(s["genesis"]), overrides).value,
        queued_prompt_coming=s["held_turn_kind"] is not None or s["enqueued"] > 0, enqueued_messages=s["enqueued"])


async def fetch(conn: AsyncConnection, session_id: int, *, lock: bool = False) -> Row[Any]:
    sql = f"SELECT {COLUMNS} FROM spot_gate.sessions s WHERE s.id = :id"
    if lock:
        # Lock the row first (the count subquery cannot be FOR UPDATE), then read it whole.
        await conn.execute(text("SELECT 1 FROM spot_gate.sessions WHERE id = :id FOR UPDATE"), {"id": session_id})
    row = (await conn.execute(text(sql), {"id": session_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"session {session_id} does not exist", {"session_id": session_id})
    return row


def key_scope() -> str:
    """Whose idempotency keys these are: the caller the request came from (the gateway's realm,
    and the session a connection speaks for; a service names itself), so no caller can claim
    another's key."""
    return deadline.current_caller() or "service"


async def by_idempotency_key(conn: AsyncConnection, key: str) -> Row[Any] | None:
    return (await conn.execute(text(f"SELECT {COLUMNS} FROM spot_gate.sessions s "
                                    "WHERE s.idempotency_scope = :scope AND s.idempotency_key = :k"),
                               {"scope": key_scope(), "k": key})).first()


async def lineage(conn: AsyncConnection, session_id: int, field: str) -> Lineage:
    row = (await conn.execute(text("SELECT genesis, scheduling_class, precedence FROM spot_gate.sessions WHERE id = :id"),
                              {"id": session_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.INVALID, f"{field} {session_id} does not exist", {"field": field})
    return Lineage(Genesis(row.genesis), SchedulingClass(row.scheduling_class) if row.scheduling_class else None,
                   row.precedence)


async def insert(conn: AsyncConnection, req: SpawnSession, origin: Origin, trigger_id: int | None) -> int | None:
    """Insert; None when a concurrent spawn with the same idempotency key won."""
    row = (await conn.execute(text("""
        INSERT INTO spot_gate.sessions (idempotency_scope, idempotency_key, parent_session_id, forked_from_session_id,
            genesis, scheduling_class, precedence, runtime, harness, model, title, goal, prompt, trigger_id, metadata,
            is_status_summary_fork)
        VALUES (:scope, :key, :parent, :fork, :genesis, :cls, :precedence, :runtime, :harness, :model, :title, :goal,
            :prompt, :trigger, CAST(:metadata AS jsonb), :fork_summary)
        ON CONFLICT (idempotency_scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING id"""), {
        "scope": key_scope(), "key": req.idempotency_key, "parent": req.parent_session_id,
        "fork": req.forked_from_session_id,
        "genesis": origin.genesis.value, "cls": origin.scheduling_class.value if origin.scheduling_class else None,
        "precedence": origin.precedence, "runtime": req.runtime, "harness": req.harness, "model": req.model,
        "title": req.title, "goal": req.goal, "prompt": req.prompt, "trigger": trigger_id,
        "metadata": json.dumps(req.metadata), "fork_summary": req.is_status_summary_fork})).first()
    return int(row.id) if row else None


async def search(conn: AsyncConnection, q: SessionQuery, overrides: Mapping[Genesis, SchedulingClass]) -> tuple[list[Row[Any]], int]:
    where, params = ["true"], {"limit": q.limit, "offset": q.offset}
    if q.status:
        where.append("s.status = ANY(:statuses)")
        params["statuses"] = list(q.status)
    if q.genesis:
        where.append("s.genesis = ANY(:geneses)")
        params["geneses"] = list(q.genesis)
    if q.priority_class:
        where.append(f"{class_sql(overrides)} = :cls")
        params["cls"] = q.priority_class
    if q.parent_session_id is not None:
        where.append("s.parent_session_id = :parent")
        params["parent"] = q.parent_session_id
    order = {"precedence": "s.precedence DESC, s.created_at ASC, s.id ASC", "created_at": "s.created_at DESC, s.id DESC",
             "updated_at": "s.updated_at DESC, s.id DESC"}[q.order]
    cond = " AND ".join(where)
    rows = (await conn.execute(text(f"SELECT {COLUMNS} FROM spot_gate.sessions s WHERE {cond} ORDER BY {order} "
                                    "LIMIT :limit OFFSET :offset"), params)).all()
    total = (await conn.execute(text(f"SELECT count(*) FROM spot_gate.sessions s WHERE {cond}"), params)).scalar_one()
    return list(rows), int(total)


async def update_fields(conn: AsyncConnection, session_id: int, **fields: Any) -> None:
    if not fields:
        return
    sets = ", ".join(f"{k} = :{k}" if k not in ("held_attachments", "metadata") else f"{k} = CAST(:{k} AS jsonb)"
                     for k in fields)
    values = {k: json.dumps(v) if k in ("held_attachments", "metadata") and v is not None else v for k, v in fields.items()}
    await conn.execute(text(f"UPDATE spot_gate.sessions SET {sets}, updated_at = now(), version = version + 1 "
                            "WHERE id = :id"), {**values, "id": session_id})


async def pop_enqueued(conn: AsyncConnection, session_id: int) -> Row[Any] | None:
    return (await conn.execute(text("""
        UPDATE spot_gate.enqueued_messages SET delivered_at = now()
        WHERE id = (SELECT id FROM spot_gate.enqueued_messages WHERE session_id = :s AND delivered_at IS NULL
                    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING turn_kind, prompt, attachments"""), {"s": session_id})).first()


async def decisions(conn: AsyncConnection, session_id: int, limit: int) -> list[Row[Any]]:
    return list((await conn.execute(text(
        "SELECT id, session_id, turn_kind, allowed, reason, ceiling, sentence, numbers, decided_at "
        "FROM spot_gate.gate_decisions WHERE session_id = :s ORDER BY id DESC LIMIT :n"),
        {"s": session_id, "n": limit})).all())


async def due_holds(conn: AsyncConnection, now: datetime, limit: int) -> list[int]:
    """Held sessions whose re-check is due, highest precedence first, oldest first within a tie
    (seed 004: precedence decides who gets the headroom back). Not locked here: each re-check
    locks its row and re-reads it."""
    rows = await conn.execute(text("""
        SELECT id FROM spot_gate.sessions
        WHERE spot_hold_reason IS NOT NULL AND spot_hold_retry_at <= :now
        ORDER BY precedence DESC, created_at, id LIMIT :n"""), {"now": now, "n": limit})
    return [r.id for r in rows]


async def stranded_holds(conn: AsyncConnection, overdue_before: datetime, limit: int) -> list[int]:
    rows = await conn.execute(text("""
        SELECT id FROM spot_gate.sessions
        WHERE spot_hold_reason IS NOT NULL AND status = 'waiting'
          AND (spot_hold_retry_at IS NULL OR spot_hold_retry_at < :before)
        ORDER BY spot_hold_retry_at NULLS FIRST LIMIT :n"""), {"before": overdue_before, "n": limit})
    return [r.id for r in rows]


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


async def advisory_xact_lock(conn: AsyncConnection, key: str) -> None:
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": key})


async def fetch_many(conn: AsyncConnection, ids: list[int], *, lock: bool = False) -> list[Row[Any]]:
    """Sessions by id, in id order; locked in that order, so two batches cannot deadlock."""
    suffix = " FOR UPDATE OF s" if lock else ""
    return list((await conn.execute(text(f"SELECT {COLUMNS} FROM spot_gate.sessions s WHERE s.id = ANY(:ids) "
                                         f"ORDER BY s.id{suffix}"), {"ids": ids})).all())


async def save_turn_state(conn: AsyncConnection, sessions: list[dict[str, Any]]) -> dict[int, Row[Any]]:
    """Write the status and hold record the gate decided, for many sessions in one statement;
    returns each row's new `updated_at` and `version` (the database's, not this process's clock)."""
    if not sessions:
        return {}
    cols = ("id", "status", "ever_started", "spot_hold_reason", "spot_hold_retry_at", "spot_hold_count",
            "held_turn_kind", "held_prompt")
    arrays = {c: [s[c] for s in sessions] for c in cols}
    arrays["held_attachments"] = [dumps(s["held_attachments"]) for s in sessions]
    rows = (await conn.execute(text("""
        UPDATE spot_gate.sessions t SET status = u.status, ever_started = u.ever_started,
            spot_hold_reason = u.spot_hold_reason, spot_hold_retry_at = u.spot_hold_retry_at,
            spot_hold_count = u.spot_hold_count, held_turn_kind = u.held_turn_kind, held_prompt = u.held_prompt,
            held_attachments = CAST(u.held_attachments AS jsonb), updated_at = now(), version = t.version + 1
        FROM unnest(CAST(:id AS bigint[]), CAST(:status AS text[]), CAST(:ever_started AS boolean[]),
                    CAST(:spot_hold_reason AS text[]), CAST(:spot_hold_retry_at AS timestamptz[]),
                    CAST(:spot_hold_count AS integer[]), CAST(:held_turn_kind AS text[]), CAST(:held_prompt AS text[]),
                    CAST(:held_attachments AS text[]))
             AS u(id, status, ever_started, spot_hold_reason, spot_hold_retry_at, spot_hold_count, held_turn_kind,
                  held_prompt, held_attachments)
        WHERE t.id = u.id RETURNING t.id, t.updated_at, t.version"""), arrays)).all()
    return {r.id: r for r in rows}


async def log_decisions(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(text("""
            INSERT INTO spot_gate.gate_decisions (session_id, turn_kind, allowed, reason, ceiling, sentence, numbers,
                decided_at)
            VALUES (:s, :k, :a, :r, :c, :sent, CAST(:n AS jsonb), :at)"""), rows)


async def enqueue_messages(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(text("INSERT INTO spot_gate.enqueued_messages (session_id, turn_kind, prompt, attachments) "
                                "VALUES (:s, :k, :p, CAST(:a AS jsonb))"), rows)
