"""Transactional outbox and idempotent-consumer helpers (DESIGN §5 "Nothing lost").

A service calls `emit()` on the connection of the transaction that changes its state, so
the event exists if and only if the change committed. `OutboxRelay` publishes unsent rows to
JetStream with `Nats-Msg-Id = <schema>.<event uuid>` and then marks them sent. A crash between
the publish and the mark leaves the row unsent; the next relay publishes it again with the
same id and JetStream's duplicate window drops the copy, so consumers see it once. Past that
window a duplicate can still arrive, which is why consumers are idempotent too
(`claim_message`). The mark is therefore committed without waiting for the WAL's flush: losing
it to a database crash is that same case, and no event's own commit is ever asynchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ARRAY, Text, bindparam, cast, column, func, insert, literal, select, table, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.dml import Insert

from zimmer_common import idempotency
from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import Payload
from zimmer_common.logs import kv
from zimmer_common.metrics import ServiceMetrics
from zimmer_common.outage import Outages

log = logging.getLogger("zimmer.outbox")

RELAY_BATCH = 500
# After a pass that published something, the next waits this long: under a stream of commits one
# pass carries the events of several (its five round trips competed with the writers' own under
# their locks), while an event after a quiet moment still leaves at once.
GATHER_SECONDS = 0.01
PENDING_GAUGE_SECONDS = 1.0


def outbox_message_id(schema: str, event_id: object) -> str:
    return f"{schema}.{event_id}"


# Set on a connection whose transaction wrote outbox rows, so whoever commits it can wake the relay
# (a durable consumer's transaction: its events would otherwise wait for the relay's poll).
ANNOUNCED = "zimmer.outbox.announced"


def announced(conn: AsyncConnection) -> None:
    """Note that `conn`'s transaction wrote outbox rows (`emit` does; a statement with `events_from`
    or `unnested_events` in it says so itself)."""
    conn.info[ANNOUNCED] = True


def _take_announced(conn: AsyncConnection) -> bool:
    """Whether `conn`'s transaction wrote outbox rows since the last take (and forget it)."""
    return bool(conn.info.pop(ANNOUNCED, False))


@contextlib.asynccontextmanager
async def transaction(engine: AsyncEngine, kick: Callable[[], None] | None) -> AsyncIterator[AsyncConnection]:
    """A transaction on `engine` that wakes the outbox relay (`kick`) once it has committed, if it
    wrote events; one that wrote none costs the relay no pass."""
    async with engine.begin() as conn:
        _take_announced(conn)  # a flag left on the pooled connection by a transaction rolled back
        yield conn
        events = _take_announced(conn)
    if events and kick is not None:
        kick()


async def emit(conn: AsyncConnection, schema: str, subject: str, event_type: str,
               data: Payload | dict[str, Any]) -> int:
    """Record an event in the caller's transaction; returns the outbox row id."""
    announced(conn)
    row = await conn.execute(
        text(f'INSERT INTO "{schema}".outbox (subject, event_type, payload) '
             "VALUES (:subject, :etype, CAST(:payload AS jsonb)) RETURNING id"),
        {"subject": subject, "etype": event_type, "payload": _stored(data)},
    )
    return int(row.scalar_one())


def _stored(data: Payload | dict[str, Any]) -> str:
    # Hot (every event of every admission): pydantic writes the JSON itself, once.
    if isinstance(data, BaseModel):
        return f'{{"version": {data.VERSION if isinstance(data, Payload) else 1}, "data": {data.model_dump_json()}}}'
    return json.dumps({"version": 1, "data": data})


def events_from(schema: str, subject: str, event_type: str, payload: type[Payload], data: Any,
                source: Any, order_by: Any) -> Any:
    """`emit` as part of a statement that writes the state it announces: an INSERT … SELECT of
    one event per row of `source` (a CTE of the rows just written), in `order_by` order, with
    `data` the SQL expression of each event's `payload` (jsonb shaped as `payload` dumps it).
    For a write path where one more round trip under a lock is the cost: the caller adds it to
    its statement (`Select.add_cte`), and the events commit or roll back with the rows."""
    outbox = table("outbox", column("subject"), column("event_type"), column("payload"), schema=schema)
    stored = func.jsonb_build_object("version", payload.VERSION, "data", data)  # as `_stored` writes it
    return insert(outbox).from_select(
        ["subject", "event_type", "payload"],
        select(literal(subject), literal(event_type), stored).select_from(source).order_by(order_by)).cte(
        f"{event_type}_events")


Events = list[tuple[str, str, Payload | dict[str, Any]]]  # (subject, event_type, data), in order


def unnested_events(schema: str) -> Insert:
    """The INSERT of `emit_many`: one array per column (`event_arrays`), unnested into rows in
    their order (an executemany binds and executes every row on its own, on both sides of the
    connection). As a CTE (`.cte()`), the events are written by the statement that writes the
    state they announce: no round trip of their own."""
    outbox = table("outbox", column("subject"), column("event_type"), column("payload"), schema=schema)
    e = func.unnest(*(cast(bindparam(f"e_{name}"), ARRAY(Text)) for name in ("subjects", "etypes", "payloads"))
                    ).table_valued(column("subject", Text), column("etype", Text), column("payload", Text),
                                   with_ordinality="n").render_derived("e")
    return insert(outbox).from_select(["subject", "event_type", "payload"],
                                      select(e.c.subject, e.c.etype, cast(e.c.payload, JSONB)).order_by(e.c.n))


def event_arrays(events: Events) -> dict[str, list[str]]:
    """The bound arrays of `unnested_events`."""
    return {"e_subjects": [subject for subject, _, _ in events], "e_etypes": [etype for _, etype, _ in events],
            "e_payloads": [_stored(data) for _, _, data in events]}


_emit_many: dict[str, Insert] = {}  # per schema, built once: the statement is hot


async def emit_many(conn: AsyncConnection, schema: str, events: Events) -> None:
    """`emit` for many events in one statement, in order."""
    if not events:
        return
    announced(conn)
    statement = _emit_many.get(schema)
    if statement is None:
        statement = _emit_many[schema] = unnested_events(schema)
    await conn.execute(statement, event_arrays(events))


async def claim_message(conn: AsyncConnection, schema: str, consumer: str, message_id: str) -> bool:
    """True the first time `consumer` sees `message_id`; False for a redelivery.

    Call it in the same transaction as the message's effects: if that transaction rolls
    back, the claim does too and the redelivery is processed.
    """
    row = await conn.execute(
        text(f'INSERT INTO "{schema}".processed_messages (consumer, message_id) VALUES (:c, :m) '
             "ON CONFLICT DO NOTHING RETURNING 1"),
        {"c": consumer, "m": message_id},
    )
    return row.first() is not None


class OutboxRelay:
    """Publishes a schema's outbox to JetStream, in id order.

    Replicas may each run one, but only one publishes at a time: a pass runs under a
    transaction-scoped advisory lock on the schema's outbox and a relay that cannot take it
    skips the pass. So events leave in the order their rows were written, and rows of one
    aggregate are written in commit order (their writers lock the aggregate), which keeps
    per-aggregate order across replicas. Rows are read without row locks: the owner lock is
    what keeps a second relay away.

    A kick (a commit that wrote events) starts a pass at once when the relay is idle; after a
    pass that published something the next waits `gather_seconds`, so under load one pass
    carries several commits' events."""

    def __init__(self, engine: AsyncEngine, bus: Bus, *, schema: str, source: str,
                 metrics: ServiceMetrics | None = None, poll_interval: float = 0.5, outages: Outages | None = None,
                 gather_seconds: float = GATHER_SECONDS):
        self.engine = engine
        self.bus = bus
        self.schema = schema
        self.source = source
        self.metrics = metrics
        self.poll_interval = poll_interval
        self.gather_seconds = gather_seconds
        self.outages = outages or Outages(metrics)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stopped = False
        # A pass runs for every commit that announces something: its statements and the parts of
        # the envelope that never change are built once, not per pass or per row.
        # The pass's commit (marking rows sent) does not wait for the WAL's flush: a mark lost to
        # a database crash is the crash between publish and mark above, already answered by the
        # same message ids. Transaction-local (set_config's `true`): the pooled connection's own
        # commits stay synchronous. One statement with the ownership check, no round trip more.
        self._take_owner = text("SELECT pg_try_advisory_xact_lock(hashtext(:k)) "
                                "AND set_config('synchronous_commit', 'off', true) = 'off'"
                                ).bindparams(k=f"zimmer.outbox.{schema}")
        self._unsent = text(
            "SELECT id, event_id, subject, event_type, COALESCE((payload->>'version')::int, 1) AS version, "
            f"COALESCE(payload->'data', '{{}}'::jsonb)::text AS data, created_at FROM \"{schema}\".outbox "
            "WHERE sent_at IS NULL ORDER BY id LIMIT :n")
        self._mark_sent = text(f'UPDATE "{schema}".outbox SET sent_at = now() WHERE id = ANY(:ids)')
        # A poll nobody kicked finds the outbox empty nearly always: one statement outside a
        # transaction says so (a pass is BEGIN, the lock, the read and COMMIT: four round trips,
        # and a tenth of a test stack's CPU at the tests' 0.1 s poll, profiled).
        self._any_unsent = text(f'SELECT EXISTS (SELECT 1 FROM "{schema}".outbox WHERE sent_at IS NULL)')
        self._count_unsent = text(f'SELECT count(*) FROM "{schema}".outbox WHERE sent_at IS NULL')
        self._source_json = json.dumps(source)
        self._type_json: dict[str, str] = {}  # per event type: a service has a handful
        # Fault-injection seam for tests: runs for each row after its batch is acked, before the mark.
        self.after_publish: Callable[[int], Awaitable[None]] | None = None

    def kick(self) -> None:
        """Wake the relay now (called after this process commits an event)."""
        self._wake.set()

    def stop(self) -> None:
        """Let `run()` return after the pass in progress (cancellation alone is not enough:
        nats-py can turn a cancelled publish into a timeout that a retry loop would absorb)."""
        self._stopped = True
        self._stopping.set()
        self._wake.set()

    async def relay_once(self, limit: int = RELAY_BATCH) -> int:
        async with self.engine.begin() as conn:
            if not (await conn.execute(self._take_owner)).scalar_one():
                return 0  # another replica's relay is publishing this outbox now
            rows = (await conn.execute(self._unsent, {"n": limit})).all()
            if rows:
                await self.bus.publish_many([self._message(r) for r in rows])
            for row in rows:
                if self.after_publish is not None:
                    await self.after_publish(row.id)
            if rows:
                await conn.execute(self._mark_sent, {"ids": [r.id for r in rows]})
        if rows and self.metrics:
            self.metrics.outbox_relayed.labels(self.source).inc(len(rows))
        return len(rows)

    def _message(self, row: Any) -> tuple[str, bytes, str]:
        """An `EventEnvelope` as JSON, written around the stored payload's own JSON text (the
        relay is hot: decoding each payload to re-encode it was most of its work)."""
        msg_id = outbox_message_id(self.schema, row.event_id)
        event_type = self._type_json.get(row.event_type)
        if event_type is None:
            event_type = self._type_json[row.event_type] = json.dumps(row.event_type)
        body = (f'{{"id":{json.dumps(msg_id)},"type":{event_type},"version":{int(row.version)},'
                f'"source":{self._source_json},"occurred_at":"{row.created_at.isoformat()}","data":{row.data}}}')
        return row.subject, body.encode(), msg_id

    async def pending(self) -> int:
        n = int(await self._scalar(self._count_unsent))
        self._gauge(n)
        return n

    def _gauge(self, unsent: int) -> None:
        if self.metrics:
            self.metrics.outbox_pending.labels(self.source).set(unsent)

    async def _scalar(self, statement: Any) -> Any:
        """One read outside a transaction: no BEGIN or ROLLBACK around it."""
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            return (await conn.execute(statement)).scalar_one()

    async def run(self) -> None:
        """Relay until stopped. Errors are logged and retried: the rows stay unsent."""
        counted_at = 0.0
        kicked = True  # the first pass: whatever was left unsent before this start
        while not self._stopped:
            # Cleared before the pass, not after it: a commit's kick that lands during the pass or
            # the gathering is what the next pass is for, not something to wait a poll for.
            self._wake.clear()
            try:
                # A kick, or a full pass before, means rows; a bare poll asks first.
                unsent = kicked or bool(await self._scalar(self._any_unsent))
                moved = await self.relay_once() if unsent else 0
                if moved == RELAY_BATCH and not self._stopped:
                    kicked = True
                    continue  # more waiting; don't sleep between full batches
                if time.monotonic() - counted_at > PENDING_GAUGE_SECONDS:
                    # The gauge, at most once a second: not a query per pass, nor one to count none.
                    if unsent:
                        await self.pending()
                    else:
                        self._gauge(0)
                    counted_at = time.monotonic()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep relaying after a transient failure
                if self.outages.report(exc, where=f"outbox relay {self.schema}") is None:
                    log.warning("outbox relay pass failed; will retry", extra=kv(error=repr(exc), schema=self.schema))
                await self._rest(self.poll_interval)  # back off a poll, then retry, kicked or not
                kicked = True
                continue
            if moved:
                await self._rest(self.gather_seconds)  # let the commits that follow gather for the next pass
            if self._stopped:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_interval)
            kicked = self._wake.is_set()

    async def _rest(self, seconds: float) -> None:
        """Wait `seconds`, or until `stop()`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)


async def prune_outbox(engine: AsyncEngine, schema: str, *, keep: timedelta = timedelta(days=7)) -> int:
    """Delete relayed outbox rows and processed-message records older than `keep`, and
    idempotency keys past theirs.

    `keep` must outlast JetStream's duplicate window and any consumer's redelivery horizon.
    """
    async with engine.begin() as conn:
        a = await conn.execute(text(f'DELETE FROM "{schema}".outbox WHERE sent_at < now() - CAST(:keep AS interval)'),
                               {"keep": keep})
        b = await conn.execute(text(f'DELETE FROM "{schema}".processed_messages '
                                    'WHERE processed_at < now() - CAST(:keep AS interval)'), {"keep": keep})
        c = await idempotency.prune(conn, schema)
    return int(a.rowcount or 0) + int(b.rowcount or 0) + c
