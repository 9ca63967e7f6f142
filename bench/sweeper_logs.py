"""The sweeper's session-log benchmark groups (issue 14): `sweeper_ingest`, `sweeper_retention`,
`sweeper_timeline`.

- ingest: N log lines (80 % verbose, the rest info / warning / error; ~120-character messages;
  300 sessions) published into JetStream (`zimmer.ingest.logs`, stream ZIMMER_INGEST) as the
  runtime publishes them, in both shapes the sweeper reads (a `log_line` message a line, and
  `log_lines` batches of 500), then the sweeper started as its own process (`zimmer serve
  sweeper`) and timed from its first fetch to the last message acked (every row written).
  Baseline in the same rounds (the order rotating): a raw asyncpg COPY of the same rows into the
  same partitioned table. The sweeper's peak RSS (VmHWM) beside it, against its RSS when ready
  with nothing to ingest.
- retention: a `sweeper.logs` of 8 days (80 % verbose) at two sizes, day partitions made by
  `partitions.create_one` and `LogRetention.create_ahead`, loaded with COPY. The clock is frozen
  at noon of the day after the last, so exactly one partition is past its window: the oldest
  day's verbose rows, the same 100,000 at both sizes (the other 7 days share the rest), so only
  the table's size differs. Subject: one `LogRetention.run` tick, which drops it. Baseline: the
  seed's chunked loop (5,000-row `DELETE … WHERE id IN (SELECT … ORDER BY id DESC LIMIT 5000)`,
  a transaction each, until a chunk deletes fewer) over
  the same rows copied into a plain table with a bigint primary key and the seed's index
  (level, id, created_at), the cutoff at the end of that day so both remove the same rows.
  Reported as expired rows removed per second (ratio = speedup), and the tick's time at the
  large size against the small one (independent of table size means ≈ 1).
- timeline: `timeline.page` on the large table (kept from `sweeper_retention` when it ran in the
  same run): the first page of a session, a page in the middle through the cursor, and a middle
  page with verbose lines asked for; limit 100. Baseline in the same rounds, chunk by chunk: a
  single-row primary-key lookup on the plain table, on the same engine and server.

Peak RSS beside every figure. See bench/README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from bench.harness import (
    BenchContext,
    Entry,
    Op,
    Series,
    ServiceProcess,
    Sizes,
    alternate,
    interleaved_round,
    note_dead_services,
    peak_rss_mb,
    rss_mb,
    vm_hwm_mb,
)
from bench.spot_gate import _fresh_db

SESSIONS = 300
DAYS = 8  # days of rows in the retention table; the oldest day's verbose partition is the one past its window
DELETE_BATCH = 5_000  # the seed's chunk
PAGE_LIMIT = 100
# Lines in one log_lines message: what a runtime buffering a busy fleet's output sends every few
# hundred milliseconds (docs/sweeper.md).
LINES_PER_MESSAGE = 500
READ_SESSIONS = 30  # sessions the timeline reads, one every SESSIONS // READ_SESSIONS
WAIT_SECONDS = 300.0  # bound on any one wait for the service

_DELETE = ("DELETE FROM public.seed_logs WHERE id IN (SELECT id FROM public.seed_logs "
           "WHERE level = 'verbose' AND created_at < $1 ORDER BY id DESC LIMIT 5000)")
_SEED_TABLE = """
    CREATE TABLE public.seed_logs (
        id bigint NOT NULL, level text NOT NULL, created_at timestamptz NOT NULL, session_id bigint NOT NULL,
        level_class text NOT NULL, message text NOT NULL, logged_at timestamptz NOT NULL, message_id text NOT NULL)"""
_SEED_COLUMNS = "id, level, created_at, session_id, level_class, message, logged_at, message_id"
_LOG_COLUMNS = ["id", "level_class", "created_at", "session_id", "level", "message", "logged_at", "message_id"]


def _quick(sizes: Sizes) -> bool:
    return sizes.rounds <= 3


def _table_sizes(quick: bool) -> tuple[int, int]:
    """The retention table's two sizes; the timeline reads the larger."""
    return (100_000, 300_000) if quick else (1_000_000, 10_000_000)


def _label(rows: int) -> str:
    return f"{rows // 1_000_000}m" if rows % 1_000_000 == 0 else f"{rows // 1_000}k"


# ---- the lines ----------------------------------------------------------------------------

_WORDS = ("src/zimmer/api.py", "tests/test_api.py", "PASSED", "FAILED", "collected", "items", "error:", "warning:",
          "def", "return", "await", "import", "session", "turn", "tool_use", "Bash", "Read", "Edit", "Grep",
          "git", "diff", "--stat", "npm", "run", "build", "ok", "0.42s", "1.7s", "line", "column", "TypeError",
          "None", "self", "config", "retry", "timeout", "connected", "closing", "response", "200", "404", "{",
          "}", "=>", "|", "...", "done", "queued", "compiled", "modules", "in", "the", "of", "with", "for")
_PREFIXES = {"verbose": ("stdout | ", "stderr | ", "[tool_result] ", "[assistant] ", "  "),
             "info": ("turn started: ", "tool call: ", "commit pushed: ", "checkpoint: "),
             "warning": ("retrying after rate limit: ", "slow tool call: ", "context near limit: "),
             "error": ("tool failed: ", "turn aborted: ", "process exited 1: ")}


def _message_pool(rng: random.Random, level: str, count: int) -> list[str]:
    """Messages of 100-140 characters (120 on average), a prefix by level and words after it."""
    out = []
    for _ in range(count):
        target = rng.randint(100, 140)
        text = rng.choice(_PREFIXES[level])
        while len(text) < target:
            text += rng.choice(_WORDS) + " "
        out.append(text[:target])
    return out


_RNG = random.Random(14)
POOLS = {level: _message_pool(_RNG, level, 4096 if level == "verbose" else 1024)
         for level in ("verbose", "info", "warning", "error")}


def _level(i: int) -> str:
    """80 % verbose, 10 % info, 5 % warning, 5 % error, interleaved."""
    r = i % 10
    if r < 8:
        return "verbose"
    if r == 8:
        return "info"
    return "warning" if i % 20 == 9 else "error"


def _klass(level: str) -> str:
    return "verbose" if level == "verbose" else "other"


# ---- sweeper_ingest ---------------------------------------------------------------------------


def _rss_of(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / (1024 * 1024)
    except psutil.Error:
        return 0.0


async def bench_ingest(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from nats.js.errors import NotFoundError

    from zimmer_common.bus import Bus
    from zimmer_common.clock import SystemClock
    from zimmer_common.contracts.envelope import EventEnvelope
    from zimmer_common.contracts.logs import INGEST_LOGS, LOG_LINE, LOG_LINES, LogLineIn, LogLineItem, LogLinesIn
    from zimmer_common.contracts.subjects import Stream
    from zimmer_common.db import asyncpg_dsn, create_engine, migrate
    from zimmer_common.streams import provision_streams
    from zimmer_sweeper.logs.domain import storable
    from zimmer_sweeper.logs.ingest import DURABLE
    from zimmer_sweeper.logs.retention import LogRetention
    from zimmer_sweeper.logs.tables import COPY_COLUMNS

    n = 20_000 if _quick(sizes) else 50_000
    rng = random.Random(1414)
    lines = []
    for i in range(n):
        level = _level(i)
        pool = POOLS[level]
        lines.append((1 + rng.randrange(SESSIONS), level, pool[rng.randrange(len(pool))]))
    # The messages as the runtime makes them, built once, in both shapes the sweeper reads: a
    # `log_line` per line, and `log_lines` batches of LINES_PER_MESSAGE. Each round's ids differ
    # (the stream drops a repeated Nats-Msg-Id inside its duplicate window): a replace of "TAG-".
    made = datetime.now(UTC)
    shapes: dict[str, tuple[list[bytes], list[str]]] = {
        "log_line": ([EventEnvelope(id=f"TAG-{i}", type=LOG_LINE, version=1, source="runtime", occurred_at=made,
                                    data=LogLineIn(session_id=sid, level=level, message=text,  # type: ignore[arg-type]  # the level is one of the literals
                                                   at=made).model_dump(mode="json")).model_dump_json().encode()
                      for i, (sid, level, text) in enumerate(lines)],
                     [f"{i}" for i in range(n)]),
        "log_lines": ([EventEnvelope(id=f"TAG-b{k}", type=LOG_LINES, version=1, source="runtime", occurred_at=made,
                                     data=LogLinesIn(lines=[
                                         LogLineItem(message_id=f"TAG-{i}", session_id=sid, level=level,  # type: ignore[arg-type]  # the level is one of the literals
                                                     message=text, at=made)
                                         for i, (sid, level, text) in enumerate(lines[k:k + LINES_PER_MESSAGE], k)]
                                                   ).model_dump(mode="json")).model_dump_json().encode()
                       for k in range(0, n, LINES_PER_MESSAGE)],
                      [f"b{k}" for k in range(0, n, LINES_PER_MESSAGE)]),
    }
    names = {"log_line": "sweeper.ingest.rows", "log_lines": f"sweeper.ingest.rows.log_lines_{LINES_PER_MESSAGE}"}
    rates = {shape: Series(names[shape], "rows/s", False, n) for shape in shapes}
    peaks = {shape: Series(names[shape].replace(".rows", "") + ".peak_rss", "MB", True, n) for shape in shapes}
    copy_rate = Series("pg.copy.sweeper_logs", "rows/s", False, n)
    idle = Series("sweeper.idle_rss", "MB", True, 1)
    end_rss: dict[str, list[float]] = {shape: [] for shape in shapes}
    publish_s: list[float] = []
    stream = Stream.INGEST.value

    db = await _fresh_db(ctx.pg_url)
    await migrate(db, "sweeper", "zimmer_sweeper.migrations")
    engine = create_engine(db)
    try:
        # Today's partitions and a week ahead, as the service's log_partitions job makes them at start.
        await LogRetention(_units(engine), SystemClock().now, None).create_ahead()  # type: ignore[arg-type]  # no pager: the bench pages nobody
    finally:
        await engine.dispose()
    conn = await asyncpg.connect(asyncpg_dsn(db))
    client = await Bus.connect([ctx.nats_url], service="bench", instance_id=f"bench-{uuid.uuid4().hex[:4]}",
                               rpc_timeout=60)
    rss_start = rss_mb()
    # The ingest asks spot-gate which sessions exist (once per session a sweeper process has not
    # seen): spot-gate runs beside it, owning the bench's sessions (archived rows: nothing
    # schedules them). Each round's fresh sweeper asks once, inside the timed round, as it would.
    spot = ServiceProcess("spot-gate", ctx, db)
    try:
        await provision_streams(client)
        await spot.ready(client)
        await conn.execute(
            "INSERT INTO spot_gate.sessions (id, genesis, status) OVERRIDING SYSTEM VALUE "
            "SELECT g, 'api', 'archived' FROM generate_series(1, $1::bigint) g", SESSIONS)

        async def reset() -> None:
            """No rows, no ledger, no consumer, an empty stream; no dirty buffers."""
            await conn.execute("TRUNCATE sweeper.logs, sweeper.ingest_ledger")
            with contextlib.suppress(NotFoundError):
                await client.js.delete_consumer(stream, DURABLE)
            await client.js.purge_stream(stream)
            await conn.execute("CHECKPOINT")

        async def publish(tag: str, shape: str) -> int:
            """The round's messages into the stream (untimed). Plain NATS publishes with the
            Nats-Msg-Id header: the stream stores the same messages `Bus.publish_many` would, without
            its per-message ack futures (4,000 messages/s in nats-py); then the stream's count is
            checked. Returns the last message's stream sequence."""
            bodies, ids = shapes[shape]
            started = time.perf_counter()
            marker = f'"{tag}-'.encode()
            for body, mid in zip(bodies, ids, strict=True):
                await client.nc.publish(INGEST_LOGS, body.replace(b'"TAG-', marker),
                                        headers={"Nats-Msg-Id": f"{tag}-{mid}"})
            await client.nc.flush()
            deadline = time.perf_counter() + 60
            while True:
                state = (await client.js.stream_info(stream)).state
                if state.messages >= len(bodies) or time.perf_counter() > deadline:
                    break
                await asyncio.sleep(0.05)
            publish_s.append(time.perf_counter() - started)
            if state.messages != len(bodies):
                raise RuntimeError(f"published {len(bodies)} messages, the stream holds {state.messages}")
            return int(state.last_seq)

        def alive(service: ServiceProcess, what: str) -> None:
            if service.proc.poll() is not None:
                raise service.failure(f"exited while {what}")

        async def idle_service() -> None:
            """Warm-up, untimed: the service ready with nothing to ingest, its RSS the baseline."""
            await reset()
            service = ServiceProcess("sweeper", ctx, db)
            try:
                await service.ready(client)
                await asyncio.sleep(1.0)
                idle.add_latencies([_rss_of(service.proc.pid)])
            except BaseException as exc:
                note_dead_services(exc, [service])
                raise
            finally:
                service.stop()

        async def ingest_round(round_no: int, shape: str) -> None:
            await reset()
            last_seq = await publish(f"bench-{round_no}-{uuid.uuid4().hex[:6]}", shape)
            gc.collect()
            service = ServiceProcess("sweeper", ctx, db)
            sampled = 0.0
            try:
                deadline = time.perf_counter() + WAIT_SECONDS
                while True:  # the service's first fetch: its consumer has delivered
                    with contextlib.suppress(NotFoundError):
                        info = await client.js.consumer_info(stream, DURABLE)
                        if info.delivered is not None and (info.delivered.stream_seq or 0) > 0:
                            t0 = time.perf_counter()
                            break
                    alive(service, "starting")
                    if time.perf_counter() > deadline:
                        raise service.failure(f"fetched nothing within {WAIT_SECONDS:.0f} s")
                    await asyncio.sleep(0.005)
                while True:  # every message acked, which the sweeper does after its batch's commit
                    info = await client.js.consumer_info(stream, DURABLE)
                    if info.ack_floor is not None and info.ack_floor.stream_seq >= last_seq:
                        t1 = time.perf_counter()
                        break
                    sampled = max(sampled, _rss_of(service.proc.pid))
                    alive(service, "ingesting")
                    if time.perf_counter() > deadline:
                        raise service.failure(f"acked up to {info.ack_floor}, not {last_seq}, "
                                              f"within {WAIT_SECONDS:.0f} s")
                    await asyncio.sleep(0.02)
                written = await conn.fetchval("SELECT count(*) FROM sweeper.logs")
                if written != n:
                    raise RuntimeError(f"{n} lines published as {shape}, {written} rows in sweeper.logs")
                rates[shape].add_rate(n / (t1 - t0))
                end_rss[shape].append(_rss_of(service.proc.pid))
                peaks[shape].add_latencies([vm_hwm_mb(service.proc.pid) or max(sampled, end_rss[shape][-1])])
            except BaseException as exc:
                note_dead_services(exc, [service])
                raise
            finally:
                service.stop()

        now = datetime.now(UTC)
        records = [(_klass(level), now, sid, level, storable(text), now, f"copy-{i}")
                   for i, (sid, level, text) in enumerate(lines)]

        async def copy_round(_round_no: int) -> None:
            await reset()
            gc.collect()
            started = time.perf_counter()
            await conn.copy_records_to_table("logs", schema_name="sweeper", columns=list(COPY_COLUMNS), records=records)
            copy_rate.add_rate(n / (time.perf_counter() - started))
            written = await conn.fetchval("SELECT count(*) FROM sweeper.logs")
            if written != n:
                raise RuntimeError(f"COPY of {n} rows left {written} in sweeper.logs")

        await idle_service()
        for r in range(sizes.rounds):
            steps = [lambda r=r: ingest_round(r, "log_line"), lambda r=r: ingest_round(r, "log_lines"),
                     lambda r=r: copy_round(r)]
            for step in steps[r % 3:] + steps[:r % 3]:  # the order rotates every round
                await step()
        await reset()
    except BaseException as exc:
        note_dead_services(exc, [spot])
        raise
    finally:
        spot.stop()
        await client.close()
        await conn.close()
    await _drop_db(ctx, db)
    rss_end = rss_mb()

    idle_mb = idle.median
    mean_chars = statistics.mean(len(t) for _s, _l, t in lines)
    bench_rss = {"before": rss_start, "after": rss_end, "peak": max(rss_end, peak_rss_mb())}

    def rss_note(shape: str) -> str:
        return (f"the sweeper's own process: peak RSS {peaks[shape].median:.1f} MB (VmHWM), "
                f"{statistics.median(end_rss[shape]):.1f} MB at the end, {idle_mb:.1f} MB ready and idle")

    common = {"lines": n, "sessions": SESSIONS, "verbose_share": 0.8, "mean_message_chars": round(mean_chars, 1),
              "publish_seconds": publish_s, "rss_mb": bench_rss}
    single = dict(common, sweeper_rss_mb={"idle": idle_mb, "peak": peaks["log_line"].round_medians,
                                          "at_end": end_rss["log_line"]},
                  footnote=f"{n:,} lines a round, one log_line message each, 80 % verbose, {SESSIONS} sessions, "
                           f"messages {mean_chars:.0f} characters on average; timed from the service's first fetch "
                           f"to the last message acked; {rss_note('log_line')}; bench process peak "
                           f"{bench_rss['peak']:.1f} MB")
    batched = dict(common, lines_per_message=LINES_PER_MESSAGE,
                   sweeper_rss_mb={"idle": idle_mb, "peak": peaks["log_lines"].round_medians,
                                   "at_end": end_rss["log_lines"]},
                   footnote=f"the same {n:,} lines as log_lines messages of {LINES_PER_MESSAGE} "
                            f"({n // LINES_PER_MESSAGE:,} messages); {rss_note('log_lines')}")
    ratio_note = "ratio = sweeper ÷ raw COPY of the same rows into the same table (target ≥ 0.45)"
    return [
        Entry("sweeper_ingest", rates["log_line"], copy_rate, extra=single,
              note=f"zimmer.ingest.logs → sweeper.logs rows/s, one line a message, the sweeper as its own process; "
                   f"{ratio_note}"),
        Entry("sweeper_ingest", rates["log_lines"], copy_rate, extra=batched,
              note=f"the same lines as log_lines batches of {LINES_PER_MESSAGE}; {ratio_note}"),
        Entry("sweeper_ingest", peaks["log_line"], idle,
              note="the sweeper process's peak RSS (VmHWM) over a round of log_line messages ÷ its RSS when ready "
                   "with nothing to ingest"),
        Entry("sweeper_ingest", peaks["log_lines"], idle, note="the same over a round of log_lines batches"),
    ]


# ---- the retention table --------------------------------------------------------------------


class _NoPager:
    """The retention tick pages only when a drop failed: here that fails the group."""

    async def report(self, **kwargs: Any) -> None:
        raise RuntimeError(f"log retention paged: {kwargs.get('message')}")


@dataclass
class LogTable:
    """A `sweeper.logs` of `rows` rows over DAYS days, and the seed's plain table of the same rows.
    The oldest day holds rows 1..day0_rows at every size (so the expired day is the same work at
    both sizes and only the rest of the table grows); the other days share the rest evenly."""

    db: str
    rows: int
    day0_rows: int
    day0: datetime  # midnight of the oldest day
    now: datetime  # noon of the day after the last: only day0's verbose partition is past its window
    expired_rows: int = 0  # verbose rows on day0
    expired_bytes: int = 0
    build_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def cutoff(self) -> datetime:
        return self.day0 + timedelta(days=1)

    def created_at(self, g: int) -> datetime:
        """Row g's time: ids in time order, as the sequence gives them."""
        if g <= self.day0_rows:
            return self.day0 + timedelta(microseconds=(g - 1) * (86_400_000_000 // self.day0_rows))
        rest = (DAYS - 1) * 86_400_000_000 // (self.rows - self.day0_rows)
        return self.cutoff + timedelta(microseconds=(g - self.day0_rows - 1) * rest)


_SESSION_RNG = random.Random(300)
_SESSION_OF = [1 + _SESSION_RNG.randrange(SESSIONS) for _ in range(65_537)]  # row g's session: g mod 65,537


def _log_rows(table: LogTable, lo: int, hi: int, verbose_only: bool = False) -> Iterator[tuple[Any, ...]]:
    """Rows lo..hi (ids), in `_LOG_COLUMNS` order; created_at in id order, as the sequence gives them."""
    lag = timedelta(milliseconds=150)
    for g in range(lo, hi + 1):
        level = _level(g)
        if verbose_only and level != "verbose":
            continue
        at = table.created_at(g)
        pool = POOLS[level]
        yield (g, _klass(level), at, _SESSION_OF[g % len(_SESSION_OF)], level, pool[(g * 2654435761) % len(pool)],
               at - lag, f"line-{g}")


async def _parallel(dsn: str, *statements: str) -> None:
    """Statements at once, each on its own connection (the box has 2 cores)."""
    async def one(sql: str) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("SET maintenance_work_mem = '256MB'")
            await conn.execute(sql)
        finally:
            await conn.close()
    await asyncio.gather(*(one(s) for s in statements))


async def _copy_rows(dsn: str, table: LogTable, lo: int, hi: int, verbose_only: bool = False) -> None:
    """COPY rows lo..hi into sweeper.logs on two connections, halves of the range each."""
    mid = (lo + hi) // 2

    async def half(a: int, b: int) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.copy_records_to_table("logs", schema_name="sweeper", columns=_LOG_COLUMNS,
                                             records=_log_rows(table, a, b, verbose_only))
        finally:
            await conn.close()
    await asyncio.gather(half(lo, mid), half(mid + 1, hi))


def _units(engine: Any) -> Any:
    """The service's unit-of-work factory over a bare engine (no outbox relay to wake)."""
    from types import SimpleNamespace

    from zimmer_common.unit_of_work import UnitsOfWork

    return UnitsOfWork(SimpleNamespace(engine=engine, relay=None), "sweeper")


def _retention(engine: Any, now: datetime) -> Any:
    from zimmer_common.clock import FrozenClock
    from zimmer_sweeper.logs.retention import LogRetention

    return LogRetention(_units(engine), FrozenClock(now).now, _NoPager())  # type: ignore[arg-type]  # a stand-in pager


async def _build(ctx: BenchContext, rows: int, day0_rows: int) -> LogTable:
    from zimmer_common.db import asyncpg_dsn, create_engine, migrate
    from zimmer_sweeper.logs import partitions
    from zimmer_sweeper.logs.domain import CLASSES, DayPartition

    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    day0 = today - timedelta(days=DAYS)
    table = LogTable(db=await _fresh_db(ctx.pg_url), rows=rows, day0_rows=day0_rows, day0=day0,
                     now=today + timedelta(hours=12))
    dsn = asyncpg_dsn(table.db)
    started = time.perf_counter()
    await migrate(table.db, "sweeper", "zimmer_sweeper.migrations")
    engine = create_engine(table.db)
    try:
        for k in range(DAYS):
            for klass in CLASSES:
                await partitions.create_one(engine, DayPartition((day0 + timedelta(days=k)).date(), klass))
        await _retention(engine, table.now).create_ahead()  # today's and a week ahead, as the job does
    finally:
        await engine.dispose()
    mark = time.perf_counter()
    await _copy_rows(dsn, table, 1, rows)
    table.build_seconds["copy_logs"] = time.perf_counter() - mark
    mark = time.perf_counter()
    await _parallel(dsn, _SEED_TABLE)
    await _parallel(dsn, *(f"INSERT INTO public.seed_logs ({_SEED_COLUMNS}) SELECT {_SEED_COLUMNS} FROM sweeper.{parent}"
                           for parent in ("logs_verbose", "logs_other")))
    await _parallel(dsn, "ALTER TABLE public.seed_logs ADD PRIMARY KEY (id)",
                    "CREATE INDEX seed_logs_level ON public.seed_logs (level, id, created_at)")
    table.build_seconds["seed_table"] = time.perf_counter() - mark
    mark = time.perf_counter()
    await _parallel(dsn, "VACUUM (ANALYZE) sweeper.logs", "VACUUM (ANALYZE) public.seed_logs")
    table.build_seconds["vacuum"] = time.perf_counter() - mark
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT setval('sweeper.logs_id_seq', $1)", rows)
        name = DayPartition(day0.date(), "verbose").name
        table.expired_rows = await conn.fetchval(f'SELECT count(*) FROM sweeper."{name}"')
        table.expired_bytes = await conn.fetchval(f"SELECT pg_total_relation_size('sweeper.\"{name}\"')")
        total = await conn.fetchval("SELECT count(*) FROM public.seed_logs")
        if total != rows or table.expired_rows != sum(1 for g in range(1, day0_rows + 1) if _level(g) == "verbose"):
            raise RuntimeError(f"built {total} rows ({table.expired_rows} expired), wanted {rows}")
    finally:
        await conn.close()
    table.build_seconds["total"] = time.perf_counter() - started
    return table


async def _drop_db(ctx: BenchContext, db: str) -> None:
    conn = await asyncpg.connect(ctx.pg_url)
    try:
        await conn.execute(f'DROP DATABASE "{db.partition("?")[0].rsplit("/", 1)[1]}"')  # the URL's query has slashes
    finally:
        await conn.close()


# The large table, kept for sweeper_timeline when sweeper_retention built it in this run (the
# embedded server and its data directory go at the end of the run in any case).
_KEPT: dict[tuple[str, int], LogTable] = {}


# ---- sweeper_retention ------------------------------------------------------------------------


@dataclass
class _SizeResult:
    table: LogTable
    tick_rate: Series
    loop_rate: Series
    tick_ms: Series
    loop_ms: list[float]
    loop_chunks: list[int]
    rss: dict[str, float]


async def _retention_at(ctx: BenchContext, rows: int, day0_rows: int, tick_rounds: int, loop_rounds: int
                        ) -> _SizeResult:
    from zimmer_common.budget import SweepBudget
    from zimmer_common.db import asyncpg_dsn, create_engine
    from zimmer_sweeper.logs import partitions
    from zimmer_sweeper.logs.domain import DayPartition
    from zimmer_sweeper.logs.retention import BUDGET_SECONDS

    label = _label(rows)
    rss_before = rss_mb()
    table = await _build(ctx, rows, day0_rows)
    dsn = asyncpg_dsn(table.db)
    expired = DayPartition(table.day0.date(), "verbose")
    tick_rate = Series(f"sweeper.retention.tick.{label}", "rows/s", False, table.expired_rows)
    loop_rate = Series(f"seed.delete_loop.{label}", "rows/s", False, table.expired_rows)
    tick_ms = Series(f"sweeper.retention.tick_ms.{label}", "ms", True, 1)
    loop_ms: list[float] = []
    loop_chunks: list[int] = []
    engine = create_engine(table.db)
    retention = _retention(engine, table.now)
    conn = await asyncpg.connect(dsn)
    try:
        async def tick() -> None:
            await conn.execute("CHECKPOINT")
            gc.collect()
            started = time.perf_counter()
            report = await retention.run(SweepBudget(BUDGET_SECONDS))
            seconds = time.perf_counter() - started
            if [d["partition"] for d in report.dropped] != [expired.name] or report.failed:
                raise RuntimeError(f"the tick dropped {report.dropped}, failed {report.failed}; wanted {expired.name}")
            tick_rate.add_rate(table.expired_rows / seconds)
            tick_ms.add_latencies([seconds * 1000])
            # Put the day back (untimed): the partition as the job makes it, the same rows, vacuumed.
            await partitions.create_one(engine, expired)
            await _copy_rows(dsn, table, 1, table.day0_rows, verbose_only=True)
            await conn.execute(f'VACUUM (ANALYZE) sweeper."{expired.name}"')

        async def delete_loop(restore: bool) -> None:
            await conn.execute("CHECKPOINT")
            gc.collect()
            deleted = chunks = 0
            started = time.perf_counter()
            while True:
                async with conn.transaction():
                    status = await conn.execute(_DELETE, table.cutoff)
                got = int(status.split()[-1])
                deleted += got
                chunks += 1
                if got < DELETE_BATCH:
                    break
            seconds = time.perf_counter() - started
            if deleted != table.expired_rows:
                raise RuntimeError(f"the seed's loop deleted {deleted} rows, the expired day holds {table.expired_rows}")
            loop_rate.add_rate(deleted / seconds)
            loop_ms.append(seconds * 1000)
            loop_chunks.append(chunks)
            if restore:  # untimed: the same rows back, and the dead ones vacuumed away
                await conn.execute(f"INSERT INTO public.seed_logs ({_SEED_COLUMNS}) SELECT {_SEED_COLUMNS} "
                                   "FROM sweeper.logs_verbose WHERE created_at < $1", table.cutoff)
                await conn.execute("VACUUM (ANALYZE) public.seed_logs")

        # Warm-up, untimed: the engine's first connection, the catalog reads of a tick with nothing to drop.
        await _retention(engine, table.now - timedelta(days=1)).run(SweepBudget(BUDGET_SECONDS))
        for r in range(max(tick_rounds, loop_rounds)):
            steps = []
            if r < tick_rounds:
                steps.append(tick)
            if r < loop_rounds:
                steps.append(lambda r=r: delete_loop(restore=r + 1 < loop_rounds))
            if len(steps) == 2:
                steps = alternate(steps[0], steps[1], r)
            for step in steps:
                await step()
    finally:
        await conn.close()
        await engine.dispose()
    rss = {"before": rss_before, "after": rss_mb(), "peak": max(rss_mb(), peak_rss_mb())}
    return _SizeResult(table, tick_rate, loop_rate, tick_ms, loop_ms, loop_chunks, rss)


async def bench_retention(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    quick = _quick(sizes)
    small_rows, large_rows = _table_sizes(quick)
    day0_rows = small_rows // DAYS
    small = await _retention_at(ctx, small_rows, day0_rows, sizes.rounds, sizes.rounds)
    await _drop_db(ctx, small.table.db)
    # At 10M rows a pass of the seed's loop, and putting its rows back and vacuuming the 10M-row
    # table after it, take tens of seconds: 3 passes (quick: as many as the small size).
    large = await _retention_at(ctx, large_rows, day0_rows, sizes.rounds, sizes.rounds if quick else 3)
    for key in [k for k in _KEPT if k[0] == ctx.pg_url]:
        await _drop_db(ctx, _KEPT.pop(key).db)
    _KEPT[(ctx.pg_url, large_rows)] = large.table

    entries = []
    target = f" (target ≥ 100× at {_label(large_rows)} rows)"
    for res in (small, large):
        t = res.table
        label = _label(t.rows)
        speedup = res.tick_rate.median / res.loop_rate.median
        loop_median = statistics.median(res.loop_ms)
        extra = {"table_rows": t.rows, "expired_rows": t.expired_rows, "expired_partition_bytes": t.expired_bytes,
                 "tick_ms": {"median": res.tick_ms.median, "round_values": res.tick_ms.round_medians},
                 "delete_loop_ms": {"median": loop_median, "round_values": res.loop_ms, "chunks": res.loop_chunks},
                 "speedup": speedup, "build_seconds": t.build_seconds, "rss_mb": res.rss,
                 "footnote": f"{t.rows:,} rows over {DAYS} days, the expired day {t.expired_rows:,} verbose rows "
                             f"({t.expired_bytes / 2**20:,.0f} MB with its index): tick {res.tick_ms.median:,.1f} ms, "
                             f"seed's loop {loop_median / 1000:,.2f} s in {statistics.median(res.loop_chunks):.0f} "
                             f"chunks: {speedup:,.0f}× faster{target if res is large else ''}; "
                             f"tick rounds {res.tick_rate.rounds}, loop rounds {res.loop_rate.rounds}; "
                             f"built in {t.build_seconds['total']:.0f} s; bench "
                             f"process RSS {res.rss['after']:.1f} MB ({res.rss['after'] - res.rss['before']:+.1f}), "
                             f"peak {res.rss['peak']:.1f} MB"}
        entries.append(Entry("sweeper_retention", res.tick_rate, res.loop_rate, extra=extra,
                             note=f"expired rows removed per second at {label} rows: one LogRetention.run tick "
                                  "(drops the day's verbose partition) ÷ the seed's chunked DELETE loop on the same "
                                  "rows in a plain table; ratio = speedup (target ≥ 100)"))
    grows = statistics.median(large.loop_ms) / statistics.median(small.loop_ms)
    flat = large.tick_ms.median / small.tick_ms.median
    entries.append(Entry(
        "sweeper_retention", large.tick_ms, small.tick_ms,
        extra={"delete_loop_growth": grows, "rss_mb": large.rss,
               "footnote": f"the tick at {_label(large_rows)} rows ÷ at {_label(small_rows)}: {flat:.2f} "
                           f"(≈ 1: independent of table size); the seed's loop grew {grows:,.1f}× over the same step"},
        note=f"one retention tick's time at {_label(large_rows)} rows ÷ at {_label(small_rows)} rows, the same "
             "expired day in both (≈ 1 when independent of table size)"))
    return entries


# ---- sweeper_timeline -------------------------------------------------------------------------


async def bench_timeline(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from sqlalchemy import text

    from zimmer_common.contracts.logs import LogQuery
    from zimmer_common.db import asyncpg_dsn, create_engine
    from zimmer_sweeper.logs import timeline

    quick = _quick(sizes)
    small_rows, rows = _table_sizes(quick)
    rss_before = rss_mb()
    table = _KEPT.pop((ctx.pg_url, rows), None)
    reused = table is not None
    phases: dict[str, float] = {}
    mark = time.perf_counter()
    if table is None:
        table = await _build(ctx, rows, small_rows // DAYS)
        phases["build"] = time.perf_counter() - mark
    n = 50 if quick else 200
    engine = create_engine(table.db)
    conn = await asyncpg.connect(asyncpg_dsn(table.db))
    all_levels = ["verbose", "info", "warning", "error"]
    try:
        middle: dict[int, str] = {}
        middle_all: dict[int, str] = {}
        counts: dict[str, list[int]] = {"default": [], "all": []}
        mark = time.perf_counter()
        for sid in range(1, SESSIONS + 1, SESSIONS // READ_SESSIONS):  # untimed: the line half-way through each
            for klass, into, key in ((["other"], middle, "default"), (["verbose", "other"], middle_all, "all")):
                total = await conn.fetchval("SELECT count(*) FROM sweeper.logs WHERE session_id = $1 "
                                            "AND level_class = ANY($2::text[])", sid, klass)
                row = await conn.fetchrow(
                    "SELECT created_at, id FROM sweeper.logs WHERE session_id = $1 AND level_class = ANY($2::text[]) "
                    "ORDER BY created_at, id OFFSET $3 LIMIT 1", sid, klass, total // 2)
                counts[key].append(total)
                if row is not None and total - total // 2 - 1 > PAGE_LIMIT:  # a full page after the middle, and more
                    into[sid] = timeline.encode_cursor(row["created_at"], row["id"])
        # Every session at 10M rows (~6,700 lines not verbose each); the quick table's ~200 leave some out.
        sessions = sorted(set(middle) & set(middle_all))
        if len(sessions) < 5:
            raise RuntimeError(f"only {len(sessions)} sessions have lines enough for a middle page")
        phases["cursors"] = time.perf_counter() - mark
        mark = time.perf_counter()
        rng = random.Random(7)
        ids = [g for g in (rng.randrange(1, rows + 1) for _ in range(4 * n)) if _level(g) != "verbose"][:n]
        lookup = text("SELECT id, session_id, level, message, logged_at, created_at FROM public.seed_logs "
                      "WHERE id = :id LIMIT 1")

        def sid_of(i: int) -> int:
            return sessions[(i * 37) % len(sessions)]

        async def check(query: LogQuery) -> None:
            got = await timeline.page(engine, query)
            if len(got.lines) != PAGE_LIMIT or got.next_cursor is None:
                raise RuntimeError(f"session {query.session_id}: a page of {len(got.lines)} lines, "
                                   f"next_cursor {got.next_cursor!r}")

        async def first(i: int) -> None:
            await check(LogQuery(session_id=sid_of(i), limit=PAGE_LIMIT))

        async def mid(i: int) -> None:
            sid = sid_of(i)
            await check(LogQuery(session_id=sid, limit=PAGE_LIMIT, cursor=middle[sid]))

        async def mid_all(i: int) -> None:
            sid = sid_of(i)
            await check(LogQuery(session_id=sid, limit=PAGE_LIMIT, cursor=middle_all[sid], levels=all_levels))  # type: ignore[arg-type]  # the levels are the literals

        async def pk(i: int) -> None:
            async with engine.connect() as c:
                if (await c.execute(lookup, {"id": ids[i % len(ids)]})).first() is None:
                    raise RuntimeError(f"no row {ids[i % len(ids)]}")

        variants: dict[str, Op] = {"first": first, "middle": mid, "middle_all": mid_all, "pk": pk}
        names = {"first": "sweeper.timeline.first_page", "middle": "sweeper.timeline.middle_page",
                 "middle_all": "sweeper.timeline.middle_page.all_levels", "pk": "pg.select.pk_row"}
        lat = {v: Series(names[v], "ms", True, n) for v in variants}
        per_s = {v: Series(names[v] + ".rate", "op/s", False, n) for v in variants}
        for i in range(20):  # warm-up
            for once in variants.values():
                await once(i)
        for r in range(sizes.rounds):
            gc.collect()
            samples: dict[str, Series] = {v: Series(names[v], "µs", True, n) for v in variants}
            await interleaved_round(variants, n, sizes.chunk, r, samples, per_s)
            for v in variants:  # interleaved_round measures µs; the entries are in ms
                lat[v].round_medians.append(samples[v].round_medians[0] / 1000)
                lat[v].round_p95s.append(samples[v].round_p95s[0] / 1000)
        phases["rounds"] = time.perf_counter() - mark
    finally:
        await conn.close()
        await engine.dispose()
    mark = time.perf_counter()
    await _drop_db(ctx, table.db)
    phases["drop_database"] = time.perf_counter() - mark
    rss = {"before": rss_before, "after": rss_mb(), "peak": max(rss_mb(), peak_rss_mb())}
    base = lat["pk"]

    def extra(v: str, footnote: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"p95_ratio": lat[v].p95 / base.p95, "table_rows": rows, "reused_table": reused,
                               "sessions_read": len(sessions), "phase_seconds": phases,
                               "session_lines": {"default_levels_median": statistics.median(counts["default"]),
                                                 "all_levels_median": statistics.median(counts["all"])},
                               "rss_mb": rss}
        if footnote:
            out["footnote"] = (f"{rows:,} rows ({'kept from sweeper_retention' if reused else 'built for this group'}), "
                               f"{len(sessions)} sessions read in turn, {statistics.median(counts['all']):,.0f} lines each "
                               f"({statistics.median(counts['default']):,.0f} not verbose), limit {PAGE_LIMIT}; p95 "
                               f"ratios: first {lat['first'].p95 / base.p95:.2f}, middle "
                               f"{lat['middle'].p95 / base.p95:.2f}, middle all levels "
                               f"{lat['middle_all'].p95 / base.p95:.2f}; bench process RSS {rss['after']:.1f} MB "
                               f"({rss['after'] - rss['before']:+.1f}), peak {rss['peak']:.1f} MB")
        return out

    note = "ratio = page ms ÷ single-row primary-key lookup ms (same engine, same server, same rounds)"
    return [
        Entry("sweeper_timeline", lat["first"], base, extra=extra("first", True),
              note=f"timeline.page, a session's first page (default levels: no verbose), {_label(rows)} rows; {note}"),
        Entry("sweeper_timeline", lat["middle"], base, extra=extra("middle", False),
              note=f"timeline.page through the cursor half-way through the session; {note}"),
        Entry("sweeper_timeline", lat["middle_all"], base, extra=extra("middle_all", False),
              note=f"the same with every level asked for (verbose included: both classes' partitions); {note}"),
    ]
