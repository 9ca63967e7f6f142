"""Session log ingest: `zimmer.ingest.logs` → `sweeper.logs`, in batches, with COPY.

Nothing lost: a message is acked only after the transaction holding its row has committed; a
write that fails naks the batch and the loop backs off. Nothing doubled: the same transaction
records each message's stream sequence in `ingest_ledger`, and only the sequences that
transaction newly recorded are written, so a batch redelivered after a crash between commit and
ack (kill -9) writes nothing twice; a re-publish of a message id inside the stream's duplicate
window never reaches the stream at all (the id is the Nats-Msg-Id).

Backpressure: when PostgreSQL is slow the loop fetches less (the batch halves after a slow write
and shrinks to its minimum after a failed one), and what it has not written stays in JetStream.
The stream keeps 3 days (`ZIMMER_INGEST` max_age); `ingest_lag.IngestLag` pages long before that
is reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.bus_link import BusLink
from zimmer_common.consumer import InterruptibleFetch
from zimmer_common.contracts.logs import INGEST_LOGS, LINES_MAX
from zimmer_common.contracts.subjects import Stream
from zimmer_common.logs import kv
from zimmer_common.outage import Outages
from zimmer_common.paging import PageFn, page_or_log
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.logs import copytext, partitions
from zimmer_sweeper.logs.decode import Decoded, Refused, decode
from zimmer_sweeper.logs.domain import CLASSES, DayPartition
from zimmer_sweeper.logs.known_sessions import KnownSessions
from zimmer_sweeper.logs.tables import ledger
from zimmer_sweeper.schema import SCHEMA

log = logging.getLogger("zimmer.sweeper.ingest")

DURABLE = "sweeper_logs"
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)
YIELD_LINES = 250  # decoding gives the event loop a turn this often (~0.5 ms of work)


@dataclass
class BatchSizing:
    """How many messages to fetch: halves after a slow write, back to the minimum after a failed
    one, grows by half after a quick full batch, and never so many that one transaction would
    carry more than `max_lines` lines at the size the last messages had (a `log_lines` message
    carries up to 1,000)."""

    size: int = 500
    minimum: int = 50
    maximum: int = 2000
    max_lines: int = 20_000
    slow_seconds: float = 1.0
    quick_seconds: float = 0.25
    # Lines a message carried in the last batch; until one is seen, assume the most a message can
    # carry, so the first fetch after a restart into a backlog of full batches is already bounded.
    per_message: int = LINES_MAX

    def __post_init__(self) -> None:
        self._cap()

    def after_write(self, elapsed: float, fetched: int, lines: int | None = None) -> None:
        if elapsed > self.slow_seconds:
            self.size = max(self.minimum, self.size // 2)
        elif elapsed < self.quick_seconds and fetched >= self.size:
            self.size = min(self.maximum, self.size + self.size // 2)
        if lines and fetched:
            self.per_message = max(1, lines // fetched)
        self._cap()

    def after_failure(self) -> None:
        self.size = self.minimum
        self._cap()

    def _cap(self) -> None:
        self.size = max(1, min(self.size, self.max_lines // self.per_message))


@dataclass(frozen=True)
class Prepared:
    decoded: list[tuple[Msg, Decoded]]
    refused: int  # messages that carried no line (already terminated)
    reasons: list[str] = field(default_factory=list)  # why each of those was refused


@dataclass(frozen=True)
class Written:
    rows: int
    never_existed: dict[int, int] = field(default_factory=dict)  # session id → its lines refused


@dataclass(frozen=True)
class BatchOutcome:
    written: int
    skipped: int  # already written (a redelivery), or its session deleted
    refused: int


class LogIngest:
    def __init__(self, bus: BusLink, units: UnitsOfWork, now: Callable[[], datetime], *,
                 outages: Outages, sizing: BatchSizing | None = None, ack_wait_seconds: float = 30.0,
                 on_batch: Callable[[BatchOutcome, float, int], None] | None = None, page: PageFn | None = None,
                 sessions: KnownSessions):
        self._bus = bus
        self.sessions = sessions  # which sessions exist: a line for one that does not is refused
        self.page = page  # refused lines are lost lines: one page per batch that had any
        self.units = units
        self.now = now
        self.outages = outages
        self.sizing = sizing or BatchSizing()
        self.on_batch = on_batch
        self.ack_wait_seconds = ack_wait_seconds
        self._stopping = asyncio.Event()
        self._fetch = InterruptibleFetch()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0

    async def start(self) -> None:
        cfg = ConsumerConfig(durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
                             ack_wait=self.ack_wait_seconds, max_ack_pending=self.sizing.maximum * 4,
                             filter_subject=INGEST_LOGS)
        await self._bus.bus.js.add_consumer(Stream.INGEST.value, cfg, timeout=self._bus.bus.admin_timeout)
        self._task = asyncio.create_task(self._loop(), name="sweeper-log-ingest")

    async def stop(self, grace: float = 5.0) -> None:
        """Stop fetching; the batch in hand is finished or left unacked for redelivery."""
        self._stopping.set()
        self._fetch.interrupt()
        if self._task:
            _done, pending = await asyncio.wait([self._task], timeout=grace)
            for task in pending:
                task.cancel()

    async def _loop(self) -> None:
        """Fetch and decode the next batch while the last one is being written: the decoding is
        Python's work and the COPY mostly PostgreSQL's, so on two cores they overlap. At most one
        batch is being written and one more held decoded; a failed write backs off before the next
        one starts."""
        sub = await self._bus.bus.js.pull_subscribe_bind(DURABLE, stream=Stream.INGEST.value)
        writing: asyncio.Task[BatchOutcome | None] | None = None
        try:
            while not self._stopping.is_set():
                try:
                    msgs = await self._fetch.fetch(sub, self.sizing.size, timeout=1.0)
                except (TimeoutError, NatsTimeoutError):
                    continue
                except Exception as exc:  # noqa: BLE001 - reconnecting, etc.
                    if self.outages.report(exc, where="log ingest") is None:
                        log.warning("log ingest fetch failed", extra=kv(error=repr(exc)))
                    await asyncio.sleep(1)
                    continue
                if msgs is None:
                    break  # stopping: the batch being written is still finished below
                decoded = await self.prepare(msgs)
                await _settled(writing)
                writing = asyncio.create_task(self.commit(decoded, len(msgs)))
            await _settled(writing)
        finally:
            if writing is not None and not writing.done():
                writing.cancel()  # stop() ran out of grace: its batch is unacked and comes back
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def handle(self, msgs: list[Msg]) -> BatchOutcome | None:
        """Write one fetched batch and ack it, or nak it whole and back off."""
        return await self.commit(await self.prepare(msgs), len(msgs))

    async def prepare(self, msgs: list[Msg]) -> Prepared:
        """Decode a fetched batch; what carries no line is terminated here. The event loop gets a
        turn every `YIELD_LINES` lines: the batch being written meanwhile needs it, to send the
        next statement and the rest of its COPY data (asyncpg pushes a buffer larger than the
        socket's as the loop turns), or PostgreSQL waits for the whole decode."""
        decoded: list[tuple[Msg, Decoded]] = []
        refused: list[Msg] = []
        reasons: list[str] = []
        with _no_cyclic_gc():
            since = 0
            for msg in msgs:
                found = self._decode_one(msg)
                if isinstance(found, str):
                    refused.append(msg)
                    reasons.append(found)
                    since += 1
                else:
                    decoded.append((msg, found))
                    since += len(found.lines)
                if since >= YIELD_LINES:
                    since = 0
                    await asyncio.sleep(0)
        for msg in refused:
            await _term(msg)
        return Prepared(decoded, len(refused), reasons)

    async def commit(self, prepared: Prepared, fetched: int) -> BatchOutcome | None:
        """Write a decoded batch and ack it, or nak it whole and back off."""
        decoded = prepared.decoded
        started = time.monotonic()
        try:
            missing = await self.sessions.missing({sid for _m, d in decoded for sid, _tail in d.lines})
            written = await self.write(decoded, missing)
        except Exception as exc:  # noqa: BLE001 - nothing was written (the transaction rolled back): retry it all
            self._failures += 1
            delay = RETRY_DELAYS[min(self._failures, len(RETRY_DELAYS)) - 1]
            if self.outages.report(exc, where="log ingest") is None:
                # A warning: nothing was written and the batch is redelivered; a batch that never
                # succeeds backs up the ingest lane, which the queue health and ZimmerLogIngestBehind page on.
                log.warning("log batch not written; it will be redelivered", exc_info=True, extra=kv(
                    messages=len(decoded), retry_in_seconds=delay))
            self.sizing.after_failure()
            for msg, _lines in decoded:
                with contextlib.suppress(Exception):  # a lost nak is an ack_wait timeout: redelivered all the same
                    await msg.nak(delay=delay)
            await asyncio.sleep(delay)
            return None
        self._failures = 0
        elapsed = time.monotonic() - started
        for msg, _lines in decoded:
            with contextlib.suppress(Exception):  # a lost ack is a redelivery, and the ledger dedupes it
                await msg.ack()
        carried = sum(len(d.lines) for _msg, d in decoded)
        self.sizing.after_write(elapsed, fetched, carried)
        never = sum(written.never_existed.values())
        outcome = BatchOutcome(written.rows, carried - written.rows - never,
                               prepared.refused + sum(len(d.refused_lines) for _m, d in decoded) + never)
        if self.on_batch is not None:
            self.on_batch(outcome, elapsed, self.sizing.size)
        if outcome.refused:
            reasons = [*(f"session {sid} does not exist: {n} line(s) for it refused"
                         for sid, n in sorted(written.never_existed.items())),
                       *prepared.reasons, *(why for _m, d in decoded for why in d.refused_lines)]
            await page_or_log(self.page, "Log lines refused", f"{outcome.refused} session log line(s) were refused "
                              "at ingest and are not stored; the rest of their batches were written",
                              ["ingest", "refused"], snippet_source="\n".join(reasons[:20]), refused=outcome.refused)
        return outcome

    @staticmethod
    def _decode_one(msg: Msg) -> Decoded | str:
        """The lines a message carries, or why it carries none (it is then terminated: waiting will
        not make it valid). A batch's refused lines are logged; its others are kept. Warnings here:
        the batch's write pages once for every refusal it carried ("Log lines refused")."""
        try:
            found = decode(msg.data)
        except Refused as exc:
            log.warning("log message refused and terminated", extra=kv(subject=msg.subject, error=str(exc)))
            return f"{msg.subject}: {exc}"
        if found.refused_lines:
            log.warning("log lines refused; the rest of their batch is written", extra=kv(
                refused=len(found.refused_lines), kept=len(found.lines), why=found.refused_lines[:5]))
        return found

    async def write(self, lines: list[tuple[Msg, Decoded]], missing: set[int] | frozenset[int] = frozenset()
                    ) -> Written:
        """Record the batch's sequences and COPY the rows new to the ledger, in one transaction,
        except those of a deleted session or of one in `missing` (no such session: refused). A
        day with no partition yet (log_partitions has not run) gets its partitions here and the
        batch is written once more."""
        if not lines:
            return Written(0)
        try:
            return await self._write_once(lines, missing)
        except asyncpg.exceptions.CheckViolationError as exc:
            if "no partition" not in str(exc):
                raise
            log.warning("no partition for today's log lines: creating it now (log_partitions has not run)")
            await ensure_today(self.units, self.now())
            return await self._write_once(lines, missing)

    async def _write_once(self, messages: list[tuple[Msg, Decoded]], missing: set[int] | frozenset[int]) -> Written:
        created_at = self.now()
        by_seq = {msg.metadata.sequence.stream: found for msg, found in messages}
        async with self.units.begin() as uow:
            conn = uow.conn
            sessions = {session_id for found in by_seq.values() for session_id, _tail in found.lines}
            fresh, deleted = await _record(conn, DURABLE, list(by_seq), sessions)
            rows = [row for seq in fresh for row in by_seq[seq].lines]
            # Counted on their first delivery only (fresh): a redelivered batch refuses nothing twice.
            never = Counter(sid for sid, _tail in rows if sid in missing and sid not in deleted)
            if deleted or missing:  # a deleted session's rows went with it, and its late ones follow
                rows = [row for row in rows if row[0] not in deleted and row[0] not in missing]
            if rows:
                await _copy(conn, copytext.buffer(created_at, [tail for _sid, tail in rows]))
        return Written(len(rows), dict(never))

    async def prune_ledger(self) -> int:
        """Forget the sequences at or below the consumer's ack floor: those are never redelivered."""
        info = await self._bus.bus.js.consumer_info(Stream.INGEST.value, DURABLE)
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        async with self.units.begin() as uow:
            result = await uow.conn.execute(ledger.delete().where(ledger.c.consumer == DURABLE,
                                                              ledger.c.stream_seq <= floor))
        return int(result.rowcount or 0)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Decoding a batch allocates a parsed dict and a row per line (a model per line on the
    pydantic path), the rows kept until the batch is written: the cyclic collector's generational
    passes over them cost more than the work itself (pydantic decoding measured 12-15 µs a line
    with it, 3-5 µs without). They hold no reference cycles, so reference counting frees them;
    the collector runs again as soon as the step is done (at most one batch: `BatchSizing.max_lines`)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


async def _settled(writing: asyncio.Task[BatchOutcome | None] | None) -> None:
    """Wait for the batch being written. `commit` handles a failed write itself; anything else it
    raises is logged here and its batch left unacked (redelivered), so the loop never dies of it."""
    if writing is None:
        return
    try:
        await writing
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - the ingest loop must outlive any one batch
        # A warning: unacked, the batch is redelivered; one that never succeeds backs up the lane.
        log.warning("log batch failed outside its write; it will be redelivered", exc_info=True)


async def _term(msg: Msg) -> None:
    with contextlib.suppress(Exception):
        await msg.term()


# One round trip: the batch's sequences into the ledger (those it did not already hold come back:
# the ones to write), and which of the batch's sessions were deleted. Through SQLAlchemy, not the
# raw connection: its first statement is what begins the transaction the COPY then runs in.
_RECORD = text(f"""
WITH fresh AS (
    INSERT INTO {SCHEMA}.ingest_ledger (consumer, stream_seq)
    SELECT CAST(:consumer AS text), unnest(CAST(:seqs AS bigint[]))
    ON CONFLICT DO NOTHING RETURNING stream_seq)
SELECT stream_seq, NULL::bigint AS deleted FROM fresh
UNION ALL
SELECT NULL, session_id FROM {SCHEMA}.log_purges WHERE session_id = ANY(CAST(:sessions AS bigint[]))""")


async def _record(conn: AsyncConnection, consumer: str, seqs: list[int],
                  session_ids: set[int]) -> tuple[list[int], set[int]]:
    """Insert the sequences into the ledger; returns those it did not already hold, and which of
    `session_ids` were deleted (`log_purges`)."""
    fresh: list[int] = []
    deleted: set[int] = set()
    result = await conn.execute(_RECORD, {"consumer": consumer, "seqs": seqs, "sessions": list(session_ids)})
    for seq, session_id in result:
        if seq is not None:
            fresh.append(seq)
        else:
            deleted.add(session_id)
    return fresh, deleted


async def _copy(conn: AsyncConnection, data: memoryview) -> None:
    """One text-format COPY of a batch's rows (`copytext`: built as its lines were decoded)."""
    raw = await conn.get_raw_connection()
    driver: asyncpg.Connection = raw.driver_connection
    if not driver.is_in_transaction():  # outside it, the rows would commit apart from the ledger's record
        raise RuntimeError("the COPY must run in the batch's transaction")
    await driver.copy_to_table("logs", schema_name=SCHEMA, columns=list(copytext.COLUMNS), source=data,
                               format="text")


async def ensure_today(units: UnitsOfWork, now: datetime) -> list[DayPartition]:
    """Today's partitions, created if missing: the ingest path's fallback when the job is late."""
    async with units.read() as conn:
        have = await partitions.existing(conn)
    made = [p for p in (DayPartition.holding(k, now) for k in CLASSES) if p not in have]
    for partition in made:
        async with units.begin() as uow:  # one partition a transaction (`partitions.create_in`)
            await partitions.create_in(uow.conn, partition)
    return made
