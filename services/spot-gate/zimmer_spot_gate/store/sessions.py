"""Sessions, their hold records, enqueued messages and the decision log."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    ColumnElement,
    Integer,
    Text,
    any_,
    bindparam,
    case,
    cast,
    column,
    func,
    literal,
    literal_column,
    null,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common import deadline
from zimmer_common.contracts.spot import SessionView, SpawnSession
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import Events, announced, event_arrays, unnested_events
from zimmer_spot_gate.domain.classes import DEFAULT_GENESIS_CLASS, Lineage, Origin, resolve_class
from zimmer_spot_gate.domain.lifecycle import ENDED
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, SessionStatus
from zimmer_spot_gate.store.tables import enqueued_messages as m
from zimmer_spot_gate.store.tables import gate_decisions
from zimmer_spot_gate.store.tables import session_wakes as w
from zimmer_spot_gate.store.tables import sessions as s

# A session as the service reads it: every column but its idempotency key, scope and first answer,
# and how many messages wait undelivered behind it.
ARMED = (w.c.fired_at.is_(None), w.c.cancelled_at.is_(None))
# The session's armed one-time wake (at most one): a wall-clock pause while it is still ahead.
NEXT_WAKE = select(w.c.wake_at).where(w.c.session_id == s.c.id, *ARMED).scalar_subquery()
OWN_COLUMNS = [c for c in s.c if c.name not in ("idempotency_key", "idempotency_scope", "spawn_answer")]
COLUMNS = [*OWN_COLUMNS,
           select(func.count()).where(m.c.session_id == s.c.id, m.c.delivered_at.is_(None))
           .scalar_subquery().label("enqueued"), NEXT_WAKE.label("next_wake_at")]
SESSION = select(*COLUMNS)
g = gate_decisions.c


def class_expr(overrides: Mapping[Genesis, SchedulingClass]) -> ColumnElement[str]:
    """The resolved class as SQL, mirroring `resolve_class` (inlined: the values are our own enums)."""
    def lit(v: str) -> ColumnElement[str]:
        return literal_column(f"'{v}'", Text)

    return func.coalesce(s.c.scheduling_class, case(
        {lit(g.value): lit(overrides.get(g, c).value) for g, c in DEFAULT_GENESIS_CLASS.items()}, value=s.c.genesis))


def to_view(row: Row[Any], overrides: Mapping[Genesis, SchedulingClass]) -> SessionView:
    return view_of(row._mapping, overrides)


VIEW_COLUMNS = ("id", "parent_session_id", "forked_from_session_id", "genesis", "scheduling_class", "precedence",
                "status", "runtime", "harness", "model", "title", "goal", "prompt", "trigger_id", "clone_path",
                "is_status_summary_fork", "ever_started", "spot_hold_reason", "spot_hold_retry_at",
                "spot_hold_count", "held_turn_kind", "created_at", "updated_at", "version", "paused_by",
                "spot_pause_at", "spot_pause_reason", "spot_pause_detail", "spot_pause_count", "archived_at")


def view_of(s: Mapping[str, Any], overrides: Mapping[Genesis, SchedulingClass]) -> SessionView:
    own = SchedulingClass(s["scheduling_class"]) if s["scheduling_class"] else None
    return SessionView(
        **{k: s[k] for k in VIEW_COLUMNS}, metadata=s["metadata"] or {},
        priority_class=resolve_class(own, Genesis(s["genesis"]), overrides).value,
        queued_prompt_coming=s["held_turn_kind"] is not None or s["enqueued"] > 0, enqueued_messages=s["enqueued"],
        pause_sentence=pause_sentence(s), next_wake_at=s.get("next_wake_at"), clone_host=s.get("clone_host"))


def pause_sentence(s: Mapping[str, Any]) -> str | None:
    """Why a paused session sleeps and what brings it back (get_session, the session page)."""
    if s.get("paused_by") is None:
        return None
    if s["spot_pause_reason"] == "user_spot_queue":
        why = "Parked in the spot queue by a person."
    elif s["spot_pause_reason"] == "auth_outage":
        account = f" ({s['parked_account']})" if s.get("parked_account") else ""
        return (f"Parked by an auth outage of its account{account}. A priority session resumes when the account "
                "recovers (5 a sweep every 15 minutes, oldest park first); a spot session waits its turn in the spot "
                "queue.")
    else:
        why = f"Paused mid-run for quota headroom. {str(s['spot_pause_detail'] or '').rstrip('.')}."
    return (f"{why} It resumes when the windows have 5 points more headroom than their reserve, highest "
            "precedence first (oldest pause first within a tie), up to 5 a sweep every 5 minutes; making it "
            "priority resumes it on the next sweep.")


FETCH = SESSION.where(s.c.id == bindparam("id"))
FETCH_LOCKED = FETCH.with_for_update(of=s)  # the session's row; the count's rows stay unlocked


async def fetch(conn: AsyncConnection, session_id: int, *, lock: bool = False) -> Row[Any]:
    row = (await conn.execute(FETCH_LOCKED if lock else FETCH, {"id": session_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"session {session_id} does not exist", {"session_id": session_id})
    return row


async def fetch_live(conn: AsyncConnection, session_id: int, refused: str) -> Row[Any]:
    """The session's row, locked; refused (409, naming its status) when it has ended."""
    row = await fetch(conn, session_id, lock=True)
    if SessionStatus(row.status) in ENDED:
        raise ZimmerError(ErrorCode.REFUSED, f"session {session_id} is {row.status}; {refused}", {"status": row.status})
    return row


def key_scope() -> str:
    """Whose idempotency keys these are: the caller the request came from (the gateway's realm,
    and the session a connection speaks for; a service names itself), so no caller can claim
    another's key."""
    return deadline.current_caller() or "service"


BY_KEY = select(*COLUMNS, s.c.spawn_answer).where(s.c.idempotency_scope == bindparam("scope"),
                                                  s.c.idempotency_key == bindparam("k"))


async def by_idempotency_key(conn: AsyncConnection, key: str) -> Row[Any] | None:
    return (await conn.execute(BY_KEY, {"scope": key_scope(), "k": key})).first()


LINEAGE = select(s.c.genesis, s.c.scheduling_class, s.c.precedence).where(s.c.id == bindparam("id"))


async def lineage(conn: AsyncConnection, session_id: int, field: str) -> Lineage:
    row = (await conn.execute(LINEAGE, {"id": session_id})).first()
    if row is None:
        raise ZimmerError(ErrorCode.INVALID, f"{field} {session_id} does not exist", {"field": field})
    return Lineage(Genesis(row.genesis), SchedulingClass(row.scheduling_class) if row.scheduling_class else None,
                   row.precedence)


# A new session has no enqueued messages: its row as written is the whole of it.
INSERT = pg_insert(s).on_conflict_do_nothing(
    index_elements=[s.c.idempotency_scope, s.c.idempotency_key], index_where=s.c.idempotency_key.is_not(None),
).returning(*OWN_COLUMNS, literal(0).label("enqueued"), null().label("next_wake_at"))  # a new session: nothing yet


async def insert(conn: AsyncConnection, req: SpawnSession, origin: Origin, trigger_id: int | None) -> Row[Any] | None:
    """Insert, returning the row as written; None when a concurrent spawn with the same
    idempotency key won."""
    row = (await conn.execute(INSERT, {
        "idempotency_scope": key_scope(), "idempotency_key": req.idempotency_key,
        "parent_session_id": req.parent_session_id, "forked_from_session_id": req.forked_from_session_id,
        "genesis": origin.genesis.value,
        "scheduling_class": origin.scheduling_class.value if origin.scheduling_class else None,
        "precedence": origin.precedence, "runtime": req.runtime, "harness": req.harness, "model": req.model,
        "title": req.title, "goal": req.goal, "prompt": req.prompt, "trigger_id": trigger_id,
        "metadata": req.metadata, "is_status_summary_fork": req.is_status_summary_fork})).first()
    return row


async def update_fields(conn: AsyncConnection, session_id: int, **fields: Any) -> Row[Any]:
    """Change `fields` (a new version of the row), returning the row as it now is."""
    row = (await conn.execute(update(s).where(s.c.id == session_id)
                              .values(**fields, updated_at=func.now(), version=s.c.version + 1)
                              .returning(*COLUMNS))).first()
    if row is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, f"session {session_id} does not exist", {"session_id": session_id})
    return row


async def top_of_spot(conn: AsyncConnection, overrides: Mapping[Genesis, SchedulingClass],
                      excluding: int | None = None) -> int | None:
    """The highest precedence in the spot queue: spot sessions not ended (the Ranked view's list)."""
    where = [class_expr(overrides) == literal_column("'spot'", Text), s.c.status.not_in(["archived", "failed"])]
    if excluding is not None:
        where.append(s.c.id != excluding)
    return (await conn.execute(select(func.max(s.c.precedence)).where(*where))).scalar_one()


async def arm_wake(conn: AsyncConnection, session_id: int, wake_at: datetime, prompt: str | None, by: str,
                   now: datetime) -> None:
    """A new pause replaces the one before it (one armed wake per session). Stamped with the
    service's clock, the clock its decisions are stamped with: "stood down for this wake yet?"
    compares the two, and the database's clock ahead of the service's (skew, or a test's clock)
    made every re-check pass log the stand-down again."""
    await cancel_wakes(conn, session_id)
    await conn.execute(pg_insert(w).values(session_id=session_id, wake_at=wake_at, prompt=prompt, set_by=by,
                                           created_at=now))


async def cancel_wakes(conn: AsyncConnection, session_id: int) -> int:
    """Cancel the session's unfired wake (a direct follow-up, the web Restart, a park in the spot queue)."""
    done = await conn.execute(update(w).where(w.c.session_id == session_id, *ARMED).values(cancelled_at=func.now()))
    return int(done.rowcount or 0)


async def cancel_wakes_of(conn: AsyncConnection, session_ids: list[int]) -> int:
    """`cancel_wakes` for each of `session_ids`, in one statement (a batch's direct follow-ups)."""
    done = await conn.execute(update(w).where(w.c.session_id.in_(session_ids), *ARMED).values(cancelled_at=func.now()))
    return int(done.rowcount or 0)


async def due_wakes(conn: AsyncConnection, now: datetime, limit: int) -> list[Row[Any]]:
    return list((await conn.execute(select(w.c.id, w.c.session_id, w.c.prompt).where(*ARMED, w.c.wake_at <= now)
                                    .order_by(w.c.wake_at, w.c.id).limit(limit))).all())


async def mark_fired(conn: AsyncConnection, wake_id: int) -> bool:
    done = await conn.execute(update(w).where(w.c.id == wake_id, *ARMED).values(fired_at=func.now()))
    return bool(done.rowcount)


def wake_ahead(now: Any) -> ColumnElement[bool]:
    """SQL for "a wall-clock pause is still ahead of this session" (domain.wakes.paused_until)."""
    return select(w.c.id).where(w.c.session_id == s.c.id, *ARMED, w.c.wake_at > now).exists()


async def end_pause(conn: AsyncConnection, session_id: int) -> None:
    await conn.execute(update(s).where(s.c.id == session_id).values(
        paused_by=None, spot_pause_at=None, spot_pause_reason=None, spot_pause_detail=None, spot_pause_acked_at=None,
        resume_prompt=None))


_next_enqueued = (select(m.c.id).where(m.c.session_id == bindparam("s"), m.c.delivered_at.is_(None))
                  .order_by(m.c.id).limit(1).with_for_update(skip_locked=True).correlate(None).scalar_subquery())
POP_ENQUEUED = (update(m).where(m.c.id == _next_enqueued).values(delivered_at=func.now())
                .returning(m.c.turn_kind, m.c.prompt, m.c.attachments))


async def pop_enqueued(conn: AsyncConnection, session_id: int) -> Row[Any] | None:
    return (await conn.execute(POP_ENQUEUED, {"s": session_id})).first()


async def decisions(conn: AsyncConnection, session_id: int, limit: int, *, since: datetime | None = None,
                    until: datetime | None = None, at: datetime | None = None) -> list[Row[Any]]:
    """The decision log, newest first, within [since, until]; with `at`, the one row in force then."""
    where = [g.session_id == session_id]
    if since is not None:
        where.append(g.decided_at >= since)
    if until is not None:
        where.append(g.decided_at <= until)
    if at is not None:
        where.append(g.decided_at <= at)
        limit = 1
    query = select(gate_decisions).where(*where).order_by(g.decided_at.desc(), g.id.desc()).limit(limit)
    return list((await conn.execute(query)).all())


# A session with a wall-clock pause ahead stands down: its wake is the next event in its life, and
# its re-check is not re-armed (seed 004, the first of the five doors).
DUE_HOLDS = (select(s.c.id).where(s.c.spot_hold_reason.is_not(None), s.c.spot_hold_retry_at <= bindparam("now"),
                                  ~wake_ahead(bindparam("now")))
             .order_by(s.c.precedence.desc(), s.c.created_at, s.c.id).limit(bindparam("n")))


async def due_holds(conn: AsyncConnection, now: datetime, limit: int) -> list[int]:
    """Held sessions whose re-check is due, highest precedence first, oldest first within a tie
    (seed 004: precedence decides who gets the headroom back). Not locked here: each re-check
    locks its row and re-reads it."""
    rows = await conn.execute(DUE_HOLDS, {"now": now, "n": limit})
    return [r.id for r in rows]


# Due holds a wall-clock pause stands down, not yet recorded for the wake they stand down for.
_recorded = (select(g.id).where(g.session_id == s.c.id, g.event == literal_column("'wake_stand_down'", Text),
                                g.decided_at >= w.c.created_at).exists())
STANDING_DOWN = (select(s.c.id, w.c.wake_at)
                 .select_from(s.join(w, (w.c.session_id == s.c.id) & w.c.fired_at.is_(None) & w.c.cancelled_at.is_(None)))
                 .where(s.c.spot_hold_reason.is_not(None), s.c.spot_hold_retry_at <= bindparam("now"),
                        w.c.wake_at > bindparam("now"), ~_recorded)
                 .order_by(s.c.id).limit(bindparam("n"))
                 # Two passes at once (a tick every 15 s beside an enqueued run, or two replicas) would
                 # both see "not recorded yet" and both log: the first locks the rows it logs for.
                 .with_for_update(of=s, skip_locked=True))


async def standing_down(conn: AsyncConnection, now: datetime, limit: int) -> list[Row[Any]]:
    """Held sessions whose re-check is due while a wall-clock pause is ahead of them, each once
    per armed wake (seed 004: the re-check "stands down and logs why, without re-arming")."""
    return list((await conn.execute(STANDING_DOWN, {"now": now, "n": limit})).all())


STRANDED_HOLDS = (select(s.c.id)
                  .where(s.c.spot_hold_reason.is_not(None), s.c.status == literal_column("'waiting'", Text),
                         s.c.spot_hold_retry_at.is_(None) | (s.c.spot_hold_retry_at < bindparam("before")),
                         ~wake_ahead(bindparam("now")))
                  .order_by(s.c.spot_hold_retry_at.nulls_first()).limit(bindparam("n")))


async def stranded_holds(conn: AsyncConnection, overdue_before: datetime, limit: int,
                         now: datetime | None = None) -> list[int]:
    rows = await conn.execute(STRANDED_HOLDS, {"before": overdue_before, "n": limit,
                                               "now": now or overdue_before})
    return [r.id for r in rows]


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


ADVISORY_LOCK = text("SELECT pg_advisory_xact_lock(hashtext(:k))")  # no table to build it from: plain SQL reads best


async def advisory_xact_lock(conn: AsyncConnection, key: str) -> None:
    await conn.execute(ADVISORY_LOCK, {"k": key})


FETCH_MANY = SESSION.where(s.c.id == any_(cast(bindparam("ids"), ARRAY(BigInteger)))).order_by(s.c.id)
FETCH_MANY_LOCKED = FETCH_MANY.with_for_update(of=s)


FETCH_MANY_LOCKED_AT = FETCH_MANY_LOCKED.add_columns(func.now().label("tx_now"))


async def fetch_many(conn: AsyncConnection, ids: list[int], *, lock: bool = False) -> list[Row[Any]]:
    """Sessions by id, in id order; locked in that order, so two batches cannot deadlock."""
    return list((await conn.execute(FETCH_MANY_LOCKED if lock else FETCH_MANY, {"ids": ids})).all())


async def fetch_many_locked(conn: AsyncConnection, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Sessions by id, locked in id order, each with what a write in this transaction will stamp
    on it: `updated_at` the transaction's clock (`now()` is its start, the same for every
    statement of it) and `version` the next (the row is locked until the commit)."""
    rows = {}
    for r in (await conn.execute(FETCH_MANY_LOCKED_AT, {"ids": ids})).all():
        row = dict(r._mapping)
        rows[r.id] = row
        row["stamp"] = (row.pop("tx_now"), row["version"] + 1)
    return rows


# What a turn decision writes, one array per column, unnested into rows in one UPDATE.
TURN_STATE = (("id", BigInteger), ("status", Text), ("ever_started", Boolean), ("spot_hold_reason", Text),
              ("spot_hold_retry_at", s.c.spot_hold_retry_at.type), ("spot_hold_count", Integer),
              ("held_turn_kind", Text), ("held_prompt", Text), ("held_attachments", Text))
_u = func.unnest(*(cast(bindparam(f"u_{name}"), ARRAY(type_)) for name, type_ in TURN_STATE)).table_valued(
    *(column(name, type_) for name, type_ in TURN_STATE)).render_derived("u")
# The batch's decision log, unnested the same way and written by the same statement (a
# data-modifying CTE), in the plan's order; `numbers` arrives as JSON text, already dumped.
DECISION_LOG = (("session_id", BigInteger), ("turn_kind", Text), ("allowed", Boolean), ("reason", Text),
                ("ceiling", Text), ("sentence", Text), ("event", Text), ("numbers", Text), ("inputs", Text))
_JSON_TEXT = {"numbers", "inputs"}  # arrive as JSON text, already dumped
_d = func.unnest(*(cast(bindparam(f"d_{name}"), ARRAY(type_)) for name, type_ in DECISION_LOG)).table_valued(
    *(column(name, type_) for name, type_ in DECISION_LOG), with_ordinality="n").render_derived("d")
_logged = pg_insert(gate_decisions).from_select(
    [*(name for name, _ in DECISION_LOG), "decided_at"],
    select(*(cast(_d.c[name], JSONB) if name in _JSON_TEXT else _d.c[name] for name, _ in DECISION_LOG),
           bindparam("decided_at", type_=gate_decisions.c.decided_at.type)).order_by(_d.c.n)).cte("logged")
# ... and the events announcing the new rows (their views carry the stamps below, known in advance).
_announced = unnested_events(str(s.schema)).cte("announced")
SAVE_TURN_STATE = (update(s).where(s.c.id == _u.c.id).values(
    **{name: _u.c[name] for name, _ in TURN_STATE[1:-1]}, held_attachments=cast(_u.c.held_attachments, JSONB),
    updated_at=func.now(), version=s.c.version + 1).add_cte(_logged).add_cte(_announced)
    .returning(s.c.id, s.c.updated_at, s.c.version))


async def save_turn_state(conn: AsyncConnection, sessions: list[dict[str, Any]], decisions: list[dict[str, Any]],
                          decided_at: datetime, events: Events) -> None:
    """Write the status and hold record the gate decided for many sessions, the log of its
    decisions and the events announcing them, in one statement. Each session dict carries the
    `updated_at` and `version` the write stamps (`fetch_many_locked`): the events were built with
    them, so a row stamped otherwise fails the batch rather than announce what was not written."""
    if not sessions and not decisions and not events:
        return
    arrays = {f"u_{name}": [row[name] for row in sessions] for name, _ in TURN_STATE[:-1]}
    arrays["u_held_attachments"] = [dumps(row["held_attachments"]) for row in sessions]
    arrays.update({f"d_{name}": [d[name] for d in decisions] for name, _ in DECISION_LOG})
    if events:
        announced(conn)
    rows = (await conn.execute(SAVE_TURN_STATE, {**arrays, **event_arrays(events), "decided_at": decided_at})).all()
    expected = {row["id"]: (row["updated_at"], row["version"]) for row in sessions}
    if {r.id: (r.updated_at, r.version) for r in rows} != expected:
        raise AssertionError(f"sessions stamped otherwise than announced: {sorted(expected)}")


LOG_DECISION = pg_insert(gate_decisions).values(
    session_id=bindparam("session_id"), turn_kind=bindparam("turn_kind"), allowed=bindparam("allowed"),
    reason=bindparam("reason"), ceiling=bindparam("ceiling"), sentence=bindparam("sentence"),
    event=bindparam("event"), numbers=cast(bindparam("numbers", type_=Text), JSONB),
    inputs=cast(bindparam("inputs", type_=Text), JSONB),
    decided_at=bindparam("decided_at", type_=gate_decisions.c.decided_at.type))


async def log_decisions(conn: AsyncConnection, rows: list[dict[str, Any]], decided_at: datetime) -> None:
    """Decision-log rows that are not a turn's admission (a ceiling pause, a start-now refusal, a
    wake stand-down, a park): each a dict of DECISION_LOG's columns, `numbers` as JSON text."""
    if rows:
        await conn.execute(LOG_DECISION, [{"turn_kind": None, "ceiling": None, "numbers": "{}", "inputs": None, **r,
                                           "decided_at": decided_at} for r in rows])


_answers = func.unnest(cast(bindparam("ids"), ARRAY(BigInteger)), cast(bindparam("answers"), ARRAY(Text))
                       ).table_valued(column("id", BigInteger), column("answer", Text)).render_derived("a")
SAVE_SPAWN_ANSWERS = update(s).where(s.c.id == _answers.c.id).values(spawn_answer=cast(_answers.c.answer, JSONB))


async def save_spawn_answers(conn: AsyncConnection, answers: dict[int, str]) -> None:
    """Keep keyed spawns' first answers (JSON text by session id), in one statement: a retry with
    the same key gets its answer back whole. Not a change of the session: no version bump."""
    if answers:
        await conn.execute(SAVE_SPAWN_ANSWERS, {"ids": list(answers), "answers": list(answers.values())})


ENQUEUE = pg_insert(m).values(session_id=bindparam("s"), turn_kind=bindparam("k"), prompt=bindparam("p"),
                              attachments=cast(bindparam("a", type_=Text), JSONB))


async def enqueue_messages(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(ENQUEUE, rows)
