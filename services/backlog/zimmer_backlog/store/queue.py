"""Queries on the backlog schema, built with SQLAlchemy Core from the table models in `tables`.
Functions take the caller's connection: a ranking change, the row it makes room for and the event
announcing it commit together."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    cast,
    column,
    exists,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    text,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, distinct_on, insert
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_backlog.domain import liveness
from zimmer_backlog.domain.ranking import BANDS, RankedItem, plan_rerank
from zimmer_backlog.store import on_github
from zimmer_backlog.store.tables import SCHEMA, items, produced
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, read_within
from zimmer_common.columns import TIMESTAMPTZ
from zimmer_common.contracts.backlog import ITEM_APPENDED, AppendItem, Counts, ItemEvent, ItemView
from zimmer_common.contracts.spot import SessionView
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import announced, events_from

__all__ = ["SCHEMA"]
RANKING_LOCK = "zimmer.backlog.ranking"
log = logging.getLogger("zimmer.backlog.store")

# An item as the contract shows it: its own columns, the status of the session it became, and its
# issue as the GitHub snapshot last read it (issue 27 #2, in the same statement).
ITEM_COLUMNS = [items.c[name] for name in ItemView.model_fields if name in items.c]
WITH_SESSION = items.outerjoin(produced, produced.c.session_id == items.c.started_session_id)
SELECT_ITEMS = select(*ITEM_COLUMNS, produced.c.status.label("session_status"), *on_github.SNAPSHOT_COLUMNS
                      ).select_from(on_github.joined(WITH_SESSION))
# A row just written by this backlog has no session yet: its view needs no join.
RETURNING_ITEM = (*ITEM_COLUMNS, null().label("session_status"))


def is_(col: Any, *values: str) -> ColumnElement[bool]:
    """`col` equal to one of our own constants, written into the SQL (not bound) so the planner
    matches the partial indexes (`WHERE status = 'queued'`) under any plan."""
    consts = [literal_column(f"'{v}'", Text) for v in values]
    return col == consts[0] if len(consts) == 1 else col.in_(consts)


RANKED = select(items.c.id, items.c.estimated_cost, items.c.precedence, items.c.pinned, items.c.added_at)
QUEUED = is_(items.c.status, "queued")
OPEN = is_(items.c.status, "queued", "starting")
ORDER_OF_QUEUE = (items.c.precedence.desc(), items.c.added_at, items.c.id)

IN_FLIGHT = is_(produced.c.status, "running", "waiting")
ENDED = ("archived", "failed", "deleted")
DELETED_VERSION = 2**63 - 1  # a deleted session has no later word: no event can roll it back
CLAIMED = is_(produced.c.status, "running", "waiting", "needs_input")  # DESIGN §9: in_flight ∪ parked
# Seed 000 "Where the count shows up": the rows the liveness sweep has not resolved, by the stored
# verdict alone. A hold in force moves a row to awaiting_decision; a held row reading pr_open is in
# neither (a moving PR suspends the hold); a lapsed hold is stranded again at its original age.
LEFT_QUEUE = is_(items.c.status, "started", "removed")
UNRESOLVED = is_(items.c.liveness_state, *sorted(liveness.UNRESOLVED))
NOT_CLAIMED = ~func.coalesce(CLAIMED, False)
LEFT_QUEUE_AT = func.coalesce(items.c.started_at, items.c.removed_at)


def hold_in_force(now: Any) -> ColumnElement[bool]:
    return func.coalesce(items.c.held_until > now, False)


def stranded(now: Any) -> ColumnElement[bool]:
    return and_(LEFT_QUEUE, UNRESOLVED, NOT_CLAIMED, ~hold_in_force(now))


def awaiting_decision(now: Any) -> ColumnElement[bool]:
    return and_(LEFT_QUEUE, UNRESOLVED, NOT_CLAIMED, hold_in_force(now))


STATUS_FILTERS: dict[str, ColumnElement[bool]] = {
    "queued": QUEUED,
    "started": is_(items.c.status, "started"),
    "removed": is_(items.c.status, "removed"),
    "all": true(),
    "in_flight": IN_FLIGHT,
    "spot_held": and_(IN_FLIGHT, produced.c.spot_held),
    "parked": is_(produced.c.status, "needs_input"),
    "claimed": CLAIMED,
}


def status_filter(status: str, now: Any) -> ColumnElement[bool]:
    if status == "stranded":
        return stranded(now)
    if status == "awaiting_decision":
        return awaiting_decision(now)
    return STATUS_FILTERS[status]



def view(row: Row[Any]) -> ItemView:
    return ItemView(**row._mapping, github=on_github.state_of(row._mapping))


def _ranked(rows: Any) -> list[RankedItem]:
    return [RankedItem(r.id, r.estimated_cost, r.precedence, r.pinned, r.added_at) for r in rows]


LOCK_RANKING = text("SELECT pg_advisory_xact_lock(hashtext(:k))")


async def lock_ranking(conn: AsyncConnection) -> None:
    """Every writer of precedences serialises here (seed 000: two gates appending at once)."""
    await conn.execute(LOCK_RANKING, {"k": RANKING_LOCK})


async def queued_ranked(conn: AsyncConnection) -> list[RankedItem]:
    return _ranked(await conn.execute(RANKED.where(QUEUED)))


_MOVES = func.unnest(bindparam("ids", type_=ARRAY(BigInteger)), bindparam("ps", type_=ARRAY(Integer))).table_valued(
    column("id", BigInteger), column("p", Integer)).render_derived(name="m")
MOVE = update(items).where(items.c.id == _MOVES.c.id).values(precedence=_MOVES.c.p)


async def move(conn: AsyncConnection, moves: dict[int, int]) -> None:
    """Apply precedence changes in one statement: a re-space moves every item of a band."""
    if moves:
        await conn.execute(MOVE, {"ids": list(moves), "ps": list(moves.values())})


async def open_row(conn: AsyncConnection, key: str) -> Row[Any] | None:
    return (await conn.execute(select(items.c.id, items.c.status).where(items.c.key == key, OPEN))).first()


async def newest_row(conn: AsyncConnection, key: str) -> Row[Any] | None:
    return (await conn.execute(select(items.c.id, items.c.status).where(items.c.key == key)
                               .order_by(items.c.id.desc()).limit(1))).first()


APPENDED = [name for name in AppendItem.model_fields if name in items.c]  # what an append writes as given
_WRITTEN = [*APPENDED, "precedence", "writing_session_id"]
# The rows arrive as one array per column (one cached statement whatever the batch's size; a
# multi-row VALUES is compiled afresh each time). jsonb travels as text: arrays of jsonb do not bind.
_ARRAY_TYPE = {name: Text if name == "payload" else items.c[name].type for name in _WRITTEN}
_ROWS = func.unnest(*(bindparam(name, type_=ARRAY(t)) for name, t in _ARRAY_TYPE.items())).table_valued(
    *(column(name, t) for name, t in _ARRAY_TYPE.items()), with_ordinality="ord").render_derived(name="r")
INSERT_APPENDED = insert(items).from_select(
    [*_WRITTEN, "added_at"],
    select(*(cast(_ROWS.c[n], JSONB) if n == "payload" else _ROWS.c[n] for n in _WRITTEN),
           func.clock_timestamp() + _ROWS.c.ord * literal_column("interval '1 microsecond'")).order_by(_ROWS.c.ord),
).returning(*RETURNING_ITEM)


async def insert_many(conn: AsyncConnection, rows: list[tuple[AppendItem, int]], now: datetime, *,
                      announce: bool = False) -> tuple[list[ItemView], Counts]:
    """Insert appended items in one statement, in order, and return them as written with the
    counts after them; their added_at increases with that order (the moment they joined the queue
    under the ranking lock). `announce`: the statement writes their item_appended events too."""
    arrays: dict[str, Any] = {name: [getattr(req, name) for req, _ in rows] for name in APPENDED}
    arrays["payload"] = [json.dumps(req.payload) for req, _ in rows]
    arrays["precedence"] = [precedence for _, precedence in rows]
    arrays["writing_session_id"] = [req.acting_session_id for req, _ in rows]
    if announce:
        announced(conn)
    result = list(await conn.execute(INSERT_ANNOUNCED if announce else INSERT_COUNTED, {**arrays, "now": now}))
    written = {r.key: view(r) for r in result}
    return [written[req.key] for req, _ in rows], _counts(result[0], inserted=len(result))


async def fetch(conn: AsyncConnection, item_id: int) -> ItemView:
    row = (await conn.execute(SELECT_ITEMS.where(items.c.id == item_id))).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"work backlog item {item_id} does not exist", {"item_id": item_id})
    return view(row)


async def search(conn: AsyncConnection, status: str, limit: int, offset: int,
                 now: datetime | None = None, budget: int = ANSWER_ROWS_MAX_BYTES) -> tuple[list[ItemView], int]:
    """Queued rows in rank order; stranded and awaiting_decision oldest first (by when they left the
    queue); others in rank order after the queued ones. At most `limit` rows, and only as many as
    fit in `budget` bytes (issue 27 #13: a list never fails for its size)."""
    where = status_filter(status, _now(now))
    order = (LEFT_QUEUE_AT, items.c.id) if status in ("stranded", "awaiting_decision") else (
        QUEUED.desc(), *ORDER_OF_QUEUE)
    total = (await conn.execute(select(func.count()).select_from(WITH_SESSION).where(where))).scalar_one()
    rows = await views_within(conn, SELECT_ITEMS.where(where).order_by(*order).limit(limit).offset(offset), budget)
    return rows, int(total)


async def views_within(conn: AsyncConnection, stmt: Any, budget: int) -> list[ItemView]:
    """The leading rows of `stmt` as views, as many as fit in `budget` bytes, read a few at a time."""
    return await read_within(conn, stmt, budget, view)


_NOW = bindparam("now", type_=TIMESTAMPTZ)
_LEFT = select(func.count().filter(stranded(_NOW)).label("stranded"),
               func.count().filter(awaiting_decision(_NOW)).label("awaiting"),
               func.count().filter(hold_in_force(_NOW)).label("held")).select_from(WITH_SESSION).where(
    LEFT_QUEUE, items.c.held_until.is_not(None) | UNRESOLVED).subquery()  # a small population (partial index)
# The session counts read the claimed sessions alone (`CLAIMED`, through the partial index
# produced_sessions_claimed): every FILTER below is a subset of them, and produced_sessions keeps
# every session ever produced.
COUNTS = select(
    select(func.count()).select_from(items).where(QUEUED).scalar_subquery().label("queued"),
    func.count().filter(IN_FLIGHT).label("in_flight"),
    func.count().filter(and_(IN_FLIGHT, produced.c.spot_held)).label("spot_held"),
    func.count().filter(STATUS_FILTERS["parked"]).label("parked"),
    select(_LEFT.c.stranded).scalar_subquery().label("stranded"),
    select(_LEFT.c.awaiting).scalar_subquery().label("awaiting_decision"),
    select(_LEFT.c.held).scalar_subquery().label("held")).select_from(produced).where(CLAIMED)


def _now(now: datetime | None) -> Any:
    return func.now() if now is None else literal(now, TIMESTAMPTZ)


# An append batch reads the counts in the statement that inserts its rows (one round trip fewer
# under the ranking lock). The statement sees the table as it stood before it, so the rows it
# inserted are added to `queued`; nothing else an append writes moves a count.
_INSERTED = INSERT_APPENDED.cte("inserted")
_COUNTS_BEFORE = COUNTS.subquery("counts_before")
INSERT_COUNTED = select(_INSERTED, _COUNTS_BEFORE).select_from(_INSERTED.join(_COUNTS_BEFORE, true()))
# The same, writing each row's item_appended event too, when nothing will move the rows after
# their insert: each event is the row as inserted (its columns are ItemView's, to_jsonb of the
# whole row), so the batch's outbox INSERT is not a round trip of its own.
INSERT_ANNOUNCED = INSERT_COUNTED.add_cte(events_from(
    SCHEMA, ITEM_APPENDED, "item_appended", ItemEvent,
    func.jsonb_build_object("item", func.to_jsonb(_INSERTED.table_valued())), _INSERTED, _INSERTED.c.added_at))


async def counts(conn: AsyncConnection, now: datetime | None = None) -> Counts:
    return _counts((await conn.execute(COUNTS, {"now": now or datetime.now(UTC)})).one())


def _counts(row: Row[Any], inserted: int = 0) -> Counts:
    queued = row.queued + inserted  # rows the counting statement inserted itself
    return Counts(queued=queued, in_flight=row.in_flight, spot_held=row.spot_held, parked=row.parked,
                  claimed=row.in_flight + row.parked, stranded=row.stranded, awaiting_decision=row.awaiting_decision,
                  held=row.held)


def spot_held(session: SessionView) -> bool:
    """Seed 000 "spot_held": waiting at the spot gate before its first turn (a subset of in_flight)."""
    return session.status == "waiting" and session.spot_hold_reason is not None and not session.ever_started


async def record_session(conn: AsyncConnection, session_id: int, item_id: int, status: str, spot_held: bool,
                         as_of: datetime, version: int) -> None:
    """Keep the newest word on a session: events may arrive out of order, and an older one (a
    lower version of the session, as spot-gate numbers its changes) must not roll it back. A
    session that ended (archived or failed) keeps the moment it first ended: the liveness sweep's
    grace runs from it; a session brought back forgets it."""
    ended_at = as_of if status in ENDED else None
    word = select(literal(session_id, BigInteger), literal(item_id, BigInteger), literal(status, Text),
                  literal(spot_held), literal(as_of), literal(version, BigInteger), literal(ended_at, TIMESTAMPTZ)
                  ).where(exists().where(items.c.id == item_id))
    stmt = insert(produced).from_select(
        ["session_id", "item_id", "status", "spot_held", "updated_at", "version", "ended_at"], word)
    await conn.execute(stmt.on_conflict_do_update(
        index_elements=[produced.c.session_id],
        set_={**{c: stmt.excluded[c] for c in ("status", "spot_held", "updated_at", "version")},
              "ended_at": case((stmt.excluded.ended_at.is_(None), null()),
                               else_=func.coalesce(produced.c.ended_at, stmt.excluded.ended_at))},
        where=produced.c.version < stmt.excluded.version))


async def session_deleted(conn: AsyncConnection, session_id: int, at: datetime) -> bool:
    """A produced session's row is gone from spot-gate (DELETE /api/v1/sessions/{id}): it has
    ended, as an archived one has (it counts in neither in_flight nor parked; the liveness
    sweep's grace runs from when it ended), and no later event can bring it back."""
    done = await conn.execute(update(produced).where(produced.c.session_id == session_id).values(
        status="deleted", spot_held=False, version=DELETED_VERSION,
        ended_at=func.coalesce(produced.c.ended_at, at)))
    return bool(done.rowcount)


async def remove(conn: AsyncConnection, item_id: int, reason: str, by: str | None) -> ItemView | None:
    """Queued → removed, returning the removed row; None when it was not queued."""
    row = (await conn.execute(update(items).where(items.c.id == item_id, QUEUED).values(
        status="removed", removal_reason=reason, removed_by=by, removed_at=func.now())
        .returning(*RETURNING_ITEM))).first()
    return None if row is None else view(row)


async def set_pin(conn: AsyncConnection, item_id: int, pinned: bool, precedence: int | None) -> ItemView:
    """Pin (at `precedence`, or where it is) or unpin a queued item, returning it as written."""
    row = (await conn.execute(update(items).where(items.c.id == item_id).values(
        pinned=pinned, precedence=func.coalesce(literal(precedence, Integer), items.c.precedence))
        .returning(*RETURNING_ITEM))).one()
    return view(row)


async def status_counts(conn: AsyncConnection) -> dict[str, int]:
    rows = await conn.execute(select(items.c.status, func.count().label("n")).group_by(items.c.status))
    return {r.status: int(r.n) for r in rows}


async def rerank(conn: AsyncConnection, *, needs: str | None = None) -> dict[int, int]:
    """Every writer re-ranks after it writes: drifted unpinned items move back into their band,
    band by band. A band that cannot make room is never silent: when the write needed it (`needs`:
    an unpin puts its item back into that band) the write is refused, `band_full`, and its
    transaction rolls back with nothing moved; otherwise the band's drift is left, with a
    WARNING, and every other band is corrected. Returns the moves (item id → new precedence)."""
    plan = plan_rerank(await queued_ranked(conn))
    if needs is not None and needs in plan.full:
        raise ZimmerError(ErrorCode.BAND_FULL, str(plan.full[needs]),
                          {"field": "estimated_cost", "estimated_cost": needs})
    await move(conn, plan.moves)
    for cost, exc in plan.full.items():
        log.warning("re-rank left the %s band's drifted items where they are: %s", cost, exc)
    return plan.moves


def moved(item: ItemView, moves: dict[int, int]) -> ItemView:
    """The item as it stands after `moves` (a re-rank may have moved the row just written)."""
    return item.model_copy(update={"precedence": moves[item.id]}) if item.id in moves else item


@dataclass(frozen=True)
class BeforeAppending:
    """What an append batch reads before it plans, in one round trip under the ranking lock."""

    open_ids: dict[str, int]  # key → the id of its open (queued or starting) row
    lowest_peers: dict[str, RankedItem]  # per cost, the lowest unpinned queued item inside its band
    drifted: bool  # some unpinned queued item sits outside its band (an unpin or the import put it there)


IN_BAND = or_(*(and_(items.c.estimated_cost == cost, items.c.precedence.between(band.floor, band.top))
                for cost, band in BANDS.items()))
_NO_TEXT, _NO_INT = cast(null(), Text), cast(null(), Integer)
_LOWEST_PEERS = (RANKED.where(QUEUED, ~items.c.pinned, IN_BAND).ext(distinct_on(items.c.estimated_cost))
                 .order_by(items.c.estimated_cost, items.c.precedence, items.c.added_at.desc(), items.c.id.desc())
                 ).subquery()
# Built once: building the statement costs more than running it. Each row says what it is.
BEFORE_APPENDING = union_all(
    select(literal("open").label("what"), items.c.id, items.c.key, _NO_TEXT, _NO_INT, cast(null(), Boolean),
           cast(null(), TIMESTAMPTZ)).where(items.c.key == func.any(bindparam("keys", type_=ARRAY(Text))), OPEN),
    select(literal("peer"), _LOWEST_PEERS.c.id, _NO_TEXT, _LOWEST_PEERS.c.estimated_cost, _LOWEST_PEERS.c.precedence,
           _LOWEST_PEERS.c.pinned, _LOWEST_PEERS.c.added_at),
    select(literal("drifted"), cast(null(), BigInteger), _NO_TEXT, _NO_TEXT, _NO_INT, cast(null(), Boolean),
           cast(null(), TIMESTAMPTZ)).where(exists().where(QUEUED, ~items.c.pinned, ~IN_BAND)))


async def before_appending(conn: AsyncConnection, keys: list[str]) -> BeforeAppending:
    open_ids: dict[str, int] = {}
    peers: dict[str, RankedItem] = {}
    drifted = False
    for what, item_id, key, cost, precedence, pinned, added_at in await conn.execute(BEFORE_APPENDING, {"keys": keys}):
        if what == "open":
            open_ids[key] = item_id
        elif what == "peer":
            peers[cost] = RankedItem(item_id, cost, precedence, pinned, added_at)
        else:
            drifted = True
    return BeforeAppending(open_ids, peers, drifted)


async def queued_of_cost(conn: AsyncConnection, cost: str) -> list[RankedItem]:
    return _ranked(await conn.execute(RANKED.where(QUEUED, items.c.estimated_cost == cost)))
