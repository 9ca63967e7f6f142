"""SQL for the backlog schema. Functions take the caller's connection: a ranking change, the row
it makes room for and the event announcing it commit together."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_backlog.domain.ranking import RankedItem, plan_rerank
from zimmer_common.contracts.backlog import AppendItem, Counts, ItemView
from zimmer_common.contracts.spot import SessionView
from zimmer_common.errors import ErrorCode, ZimmerError

SCHEMA = "backlog"
RANKING_LOCK = "zimmer.backlog.ranking"
log = logging.getLogger("zimmer.backlog.store")
ITEM_COLUMNS = """i.id, i.key, i.issue_url, i.repo, i.surface, i.title, i.kind, i.scope_direction, i.estimated_cost,
    i.gate_verdict, i.decided_at, i.added_at, i.added_by, i.added_via, i.precedence, i.pinned, i.status,
    i.writing_session_id, i.started_session_id, i.started_by_session_id, i.started_at, i.removed_at, i.removed_by,
    i.removal_reason, i.liveness_state, i.liveness_checked_at, i.held_at, i.held_until, i.held_by,
    i.held_by_session_id, i.hold_reason, i.held_liveness_state, i.payload, p.status AS session_status"""
FROM = "backlog.work_backlog_items i LEFT JOIN backlog.produced_sessions p ON p.session_id = i.started_session_id"

IN_FLIGHT = "p.status IN ('running', 'waiting')"
STATUS_FILTERS = {
    "queued": "i.status = 'queued'",
    "started": "i.status = 'started'",
    "removed": "i.status = 'removed'",
    "all": "true",
    "in_flight": IN_FLIGHT,
    "spot_held": f"{IN_FLIGHT} AND p.spot_held",
    "parked": "p.status = 'needs_input'",
    "claimed": "p.status IN ('running', 'waiting', 'needs_input')",  # DESIGN §9: in_flight ∪ parked
}


def view(row: Row[Any]) -> ItemView:
    return ItemView(**row._mapping)


async def lock_ranking(conn: AsyncConnection) -> None:
    """Every writer of precedences serialises here (seed 000: two gates appending at once)."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": RANKING_LOCK})


async def queued_ranked(conn: AsyncConnection) -> list[RankedItem]:
    rows = await conn.execute(text("SELECT id, estimated_cost, precedence, pinned, added_at "
                                   "FROM backlog.work_backlog_items WHERE status = 'queued'"))
    return [RankedItem(r.id, r.estimated_cost, r.precedence, r.pinned, r.added_at) for r in rows]


async def move(conn: AsyncConnection, moves: dict[int, int]) -> None:
    """Apply precedence changes in one statement: a re-space moves every item of a band."""
    if moves:
        await conn.execute(text("UPDATE backlog.work_backlog_items i SET precedence = m.p "
                                "FROM unnest(CAST(:ids AS bigint[]), CAST(:ps AS integer[])) AS m(id, p) "
                                "WHERE i.id = m.id"), {"ids": list(moves), "ps": list(moves.values())})


async def open_row(conn: AsyncConnection, key: str) -> Row[Any] | None:
    return (await conn.execute(text("SELECT id, status FROM backlog.work_backlog_items "
                                    "WHERE key = :k AND status IN ('queued', 'starting')"), {"k": key})).first()


INSERTED = ("key", "issue_url", "repo", "surface", "title", "kind", "scope_direction", "estimated_cost",
            "gate_verdict", "decided_at", "added_by", "added_via")


async def insert_many(conn: AsyncConnection, rows: list[tuple[AppendItem, int]]) -> list[int]:
    """Insert appended items in one statement, in order; their added_at increases with that
    order (the moment they joined the queue under the ranking lock)."""
    columns = {c: [getattr(req, c) for req, _ in rows] for c in INSERTED}
    result = await conn.execute(text("""
        INSERT INTO backlog.work_backlog_items (key, issue_url, repo, surface, title, kind, scope_direction,
            estimated_cost, gate_verdict, decided_at, added_by, added_via, precedence, writing_session_id, payload,
            added_at)
        SELECT key, issue_url, repo, surface, title, kind, scope_direction, estimated_cost, gate_verdict, decided_at,
            added_by, added_via, precedence, writing_session_id, payload::jsonb,
            clock_timestamp() + ord * interval '1 microsecond'
        FROM unnest(CAST(:key AS text[]), CAST(:issue_url AS text[]), CAST(:repo AS text[]),
                    CAST(:surface AS text[]), CAST(:title AS text[]), CAST(:kind AS text[]),
                    CAST(:scope_direction AS text[]), CAST(:estimated_cost AS text[]),
                    CAST(:gate_verdict AS text[]), CAST(:decided_at AS timestamptz[]), CAST(:added_by AS text[]),
                    CAST(:added_via AS text[]), CAST(:precedence AS integer[]), CAST(:writing_session_id AS bigint[]),
                    CAST(:payload AS text[]))
            WITH ORDINALITY AS r(key, issue_url, repo, surface, title, kind, scope_direction, estimated_cost,
                                 gate_verdict, decided_at, added_by, added_via, precedence, writing_session_id,
                                 payload, ord)
        ORDER BY ord
        RETURNING id, key"""), {**columns, "precedence": [p for _, p in rows],
                                "writing_session_id": [req.acting_session_id for req, _ in rows],
                                "payload": [json.dumps(req.payload) for req, _ in rows]})
    ids = {r.key: r.id for r in result}
    return [ids[req.key] for req, _ in rows]


async def fetch(conn: AsyncConnection, item_id: int) -> ItemView:
    row = (await conn.execute(text(f"SELECT {ITEM_COLUMNS} FROM {FROM} WHERE i.id = :id"), {"id": item_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"work backlog item {item_id} does not exist", {"item_id": item_id})
    return view(row)


async def search(conn: AsyncConnection, status: str, limit: int, offset: int) -> tuple[list[ItemView], int]:
    where = STATUS_FILTERS[status]
    rows = (await conn.execute(text(
        f"SELECT {ITEM_COLUMNS} FROM {FROM} WHERE {where} "
        "ORDER BY (i.status = 'queued') DESC, i.precedence DESC, i.added_at, i.id LIMIT :limit OFFSET :offset"),
        {"limit": limit, "offset": offset})).all()
    total = (await conn.execute(text(f"SELECT count(*) FROM {FROM} WHERE {where}"))).scalar_one()
    return [view(r) for r in rows], int(total)


async def counts(conn: AsyncConnection) -> Counts:
    row = (await conn.execute(text(f"""
        SELECT (SELECT count(*) FROM backlog.work_backlog_items WHERE status = 'queued') AS queued,
               count(*) FILTER (WHERE {IN_FLIGHT}) AS in_flight,
               count(*) FILTER (WHERE {IN_FLIGHT} AND p.spot_held) AS spot_held,
               count(*) FILTER (WHERE p.status = 'needs_input') AS parked
        FROM backlog.produced_sessions p"""))).one()
    return Counts(queued=row.queued, in_flight=row.in_flight, spot_held=row.spot_held, parked=row.parked,
                  claimed=row.in_flight + row.parked)


def spot_held(session: SessionView) -> bool:
    """Seed 000 "spot_held": waiting at the spot gate before its first turn (a subset of in_flight)."""
    return session.status == "waiting" and session.spot_hold_reason is not None and not session.ever_started


async def record_session(conn: AsyncConnection, session_id: int, item_id: int, status: str, spot_held: bool,
                         as_of: datetime, version: int) -> None:
    """Keep the newest word on a session: events may arrive out of order, and an older one (a
    lower version of the session, as spot-gate numbers its changes) must not roll it back."""
    await conn.execute(text("""
        INSERT INTO backlog.produced_sessions (session_id, item_id, status, spot_held, updated_at, version)
        SELECT :s, :i, :st, :h, :at, :v WHERE EXISTS (SELECT 1 FROM backlog.work_backlog_items WHERE id = :i)
        ON CONFLICT (session_id) DO UPDATE SET status = EXCLUDED.status, spot_held = EXCLUDED.spot_held,
            updated_at = EXCLUDED.updated_at, version = EXCLUDED.version
        WHERE backlog.produced_sessions.version < EXCLUDED.version"""),
        {"s": session_id, "i": item_id, "st": status, "h": spot_held, "at": as_of, "v": version})


async def by_keys(conn: AsyncConnection, keys: list[str]) -> list[Row[Any]]:
    """For each key, its open row if it has one, else its newest started row (a retried pull)."""
    return list((await conn.execute(text(f"""
        SELECT DISTINCT ON (i.key) {ITEM_COLUMNS} FROM {FROM}
        WHERE i.key = ANY(:keys) AND i.status IN ('queued', 'starting', 'started')
        ORDER BY i.key, (i.status IN ('queued', 'starting')) DESC, i.id DESC"""), {"keys": keys})).all())


async def top_queued(conn: AsyncConnection, n: int) -> list[Row[Any]]:
    return list((await conn.execute(text(f"SELECT {ITEM_COLUMNS} FROM {FROM} WHERE i.status = 'queued' "
                                         "ORDER BY i.precedence DESC, i.added_at, i.id LIMIT :n"), {"n": n})).all())


async def mark_starting(conn: AsyncConnection, item_id: int, spawn_key: str, by_session: int | None,
                        start_class: str, start_precedence: int | None, start_deadline: float) -> bool:
    """Queued → starting for a new start; a row already `starting` is taken over by this request
    (its deadline replaces the last one, so the recovery job leaves it to this request)."""
    row = (await conn.execute(text(
        "UPDATE backlog.work_backlog_items SET status = 'starting', spawn_key = :k, "
        "started_by_session_id = CASE WHEN status = 'queued' THEN :by ELSE started_by_session_id END, "
        "start_class = CASE WHEN status = 'queued' THEN :cls ELSE start_class END, "
        "start_precedence = CASE WHEN status = 'queued' THEN :prec ELSE start_precedence END, "
        "start_deadline = :d WHERE id = :id AND status IN ('queued', 'starting') RETURNING id"),
        {"id": item_id, "k": spawn_key, "by": by_session, "cls": start_class, "prec": start_precedence,
         "d": start_deadline})).first()
    return row is not None


async def mark_started(conn: AsyncConnection, item_id: int, session_id: int) -> bool:
    row = (await conn.execute(text(
        "UPDATE backlog.work_backlog_items SET status = 'started', started_session_id = :s, started_at = now() "
        "WHERE id = :id AND status = 'starting' RETURNING id"), {"id": item_id, "s": session_id})).first()
    return row is not None


async def start_precedence(conn: AsyncConnection, item_id: int) -> int:
    return int((await conn.execute(text("SELECT COALESCE(start_precedence, 0) FROM backlog.work_backlog_items "
                                        "WHERE id = :id"), {"id": item_id})).scalar_one())


async def back_to_queued(conn: AsyncConnection, item_id: int, *, if_deadline: float | None = None) -> bool:
    """Starting → queued; with `if_deadline`, only if no later request has taken the row over."""
    row = (await conn.execute(text(
        "UPDATE backlog.work_backlog_items SET status = 'queued', started_by_session_id = NULL, start_deadline = NULL "
        "WHERE id = :id AND status = 'starting' "
        "AND (CAST(:d AS double precision) IS NULL OR start_deadline = CAST(:d AS double precision)) RETURNING id"),
        {"id": item_id, "d": if_deadline})).first()
    return row is not None


async def stale_starting(conn: AsyncConnection, limit: int, before: float) -> list[Row[Any]]:
    """Rows left `starting` by a request whose deadline passed before `before`: nothing will
    commit for them any more, so what spot-gate holds now is final."""
    return list((await conn.execute(text(
        f"SELECT {ITEM_COLUMNS}, i.start_class, i.start_precedence, i.spawn_key, i.start_deadline FROM {FROM} "
        "WHERE i.status = 'starting' AND (i.start_deadline IS NULL OR i.start_deadline < :before) "
        "ORDER BY i.id LIMIT :n"), {"n": limit, "before": before})).all())


async def remove(conn: AsyncConnection, item_id: int, reason: str, by: str | None) -> bool:
    row = (await conn.execute(text(
        "UPDATE backlog.work_backlog_items SET status = 'removed', removal_reason = :r, removed_by = :by, "
        "removed_at = now() WHERE id = :id AND status = 'queued' RETURNING id"),
        {"id": item_id, "r": reason, "by": by})).first()
    return row is not None


async def set_pin(conn: AsyncConnection, item_id: int, pinned: bool, precedence: int | None) -> None:
    await conn.execute(text("UPDATE backlog.work_backlog_items SET pinned = :p, "
                            "precedence = COALESCE(:prec, precedence) WHERE id = :id"),
                       {"id": item_id, "p": pinned, "prec": precedence})


async def status_counts(conn: AsyncConnection) -> dict[str, int]:
    rows = await conn.execute(text("SELECT status, count(*) AS n FROM backlog.work_backlog_items GROUP BY status"))
    return {r.status: int(r.n) for r in rows}


async def rerank(conn: AsyncConnection, *, needs: str | None = None) -> None:
    """Every writer re-ranks after it writes: drifted unpinned items move back into their band,
    band by band. A band that cannot make room is never silent: when the write needed it (`needs`:
    an unpin puts its item back into that band) the write is refused, `band_full`, and its
    transaction rolls back with nothing moved; otherwise the band's drift is left, with a
    WARNING, and every other band is corrected."""
    plan = plan_rerank(await queued_ranked(conn))
    if needs is not None and needs in plan.full:
        raise ZimmerError(ErrorCode.BAND_FULL, str(plan.full[needs]),
                          {"field": "estimated_cost", "estimated_cost": needs})
    await move(conn, plan.moves)
    for cost, exc in plan.full.items():
        log.warning("re-rank left the %s band's drifted items where they are: %s", cost, exc)


async def open_rows(conn: AsyncConnection, keys: list[str]) -> dict[str, Row[Any]]:
    rows = await conn.execute(text("SELECT id, key, status FROM backlog.work_backlog_items "
                                   "WHERE key = ANY(:keys) AND status IN ('queued', 'starting')"), {"keys": keys})
    return {r.key: r for r in rows}


async def lowest_peers(conn: AsyncConnection, bands: dict[str, tuple[int, int]]) -> dict[str, RankedItem]:
    """Per cost, the lowest unpinned queued item inside its band: all an ordinary append needs."""
    in_band = " OR ".join(f"(estimated_cost = '{c}' AND precedence BETWEEN {f} AND {t})" for c, (f, t) in bands.items())
    rows = await conn.execute(text(
        "SELECT DISTINCT ON (estimated_cost) id, estimated_cost, precedence, pinned, added_at "
        f"FROM backlog.work_backlog_items WHERE status = 'queued' AND NOT pinned AND ({in_band}) "
        "ORDER BY estimated_cost, precedence, added_at DESC, id DESC"))
    return {r.estimated_cost: RankedItem(r.id, r.estimated_cost, r.precedence, r.pinned, r.added_at) for r in rows}


async def queued_of_cost(conn: AsyncConnection, cost: str) -> list[RankedItem]:
    rows = await conn.execute(text("SELECT id, estimated_cost, precedence, pinned, added_at "
                                   "FROM backlog.work_backlog_items WHERE status = 'queued' AND estimated_cost = :c"),
                              {"c": cost})
    return [RankedItem(r.id, r.estimated_cost, r.precedence, r.pinned, r.added_at) for r in rows]


async def any_drifted(conn: AsyncConnection, bands: dict[str, tuple[int, int]]) -> bool:
    """Whether some unpinned queued item sits outside its band (an unpin or the import put it there)."""
    outside = " OR ".join(f"(estimated_cost = '{c}' AND precedence NOT BETWEEN {f} AND {t})"
                          for c, (f, t) in bands.items())
    row = (await conn.execute(text(f"SELECT 1 FROM backlog.work_backlog_items WHERE status = 'queued' AND NOT pinned "
                                   f"AND ({outside}) LIMIT 1"))).first()
    return row is not None


async def fetch_many(conn: AsyncConnection, ids: list[int]) -> dict[int, ItemView]:
    rows = await conn.execute(text(f"SELECT {ITEM_COLUMNS} FROM {FROM} WHERE i.id = ANY(:ids)"), {"ids": ids})
    return {r.id: view(r) for r in rows}
