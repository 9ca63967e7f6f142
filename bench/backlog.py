"""Work backlog benchmarks (issue 4).

- appends: appends/s through REST (gateway → backlog) and through NATS RPC, 32 appenders in
  flight, against the serialized advisory-lock + INSERT transaction rate measured in the same
  run (the physical limit of "every append under one lock"); target ≥ 40 % end to end. Ordinary
  appends (bands with room) are the headline; a crowded run (every append re-spaces its band)
  is reported beside it. p50/p99 append latency with 8 concurrent appenders.
- pull_list: with 5,000 queued rows, the latency of a pull of one item (through spot-gate's
  spawn) and of listing the top 100, over NATS RPC.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import asyncpg

from bench.harness import BenchContext, Entry, Series, ServiceProcess, Sizes
from bench.spot_gate import _fresh_db

APPENDERS = 8  # for the latency figures (issue 4)
THROUGHPUT_APPENDERS = 32
QUEUED = 5000
COSTS = ("small", "medium", "large")


async def _baseline_lock_tx(db: str, n: int) -> float:
    """Serialized `pg_advisory_xact_lock` + one INSERT transactions per second, one connection."""
    from zimmer_common.db import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(db))
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_lock (id bigserial PRIMARY KEY, v text)")
        started = time.perf_counter()
        for i in range(n):
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(42)")
                await conn.execute("INSERT INTO bench_lock (v) VALUES ($1)", str(i))
        return n / (time.perf_counter() - started)
    finally:
        await conn.close()


class RawHttp:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams, one connection per appender.

    httpx's pool tops out near 400 requests/s on this machine however fast the server is (wrk
    measures the same gateway at ~15,000/s on /healthz), so it would measure the client, not
    the gateway."""

    def __init__(self, port: int, token: str):
        self.port = port
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), timeout=60)
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        return int(lines[0].split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _clear_queue(db: str) -> None:
    """Between rounds: take every row off the queue, so bands never fill across rounds."""
    from zimmer_common.db import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(db))
    try:
        await conn.execute("UPDATE backlog.work_backlog_items SET status = 'removed', removal_reason = 'bench' "
                           "WHERE status = 'queued'")
    finally:
        await conn.close()


async def bench_appends(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from bench.harness import percentile
    from zimmer_cli.embedded import free_port
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.backlog import APPEND, AppendItem

    ordinary = 270 if sizes.rounds > 3 else 90  # 90 per band: ordinary appends, no re-space
    crowded = 900 if sizes.rounds > 3 else 300  # bands past 100 items: every append re-spaces its band
    rpc_rate = Series("backlog.append.rpc", "app/s", False, ordinary)
    rest_rate = Series("backlog.append.rest", "app/s", False, ordinary)
    crowded_rate = Series("backlog.append.rpc.respacing", "app/s", False, crowded)
    p50 = Series("backlog.append.latency.8_appenders", "ms", True, ordinary)
    p99 = Series("backlog.append.latency.8_appenders.p99", "ms", True, ordinary)
    baseline = Series("pg.tx.advisory_lock_insert", "tx/s", False, ordinary)
    db = await _fresh_db(ctx.pg_url)
    port = free_port()
    backlog = ServiceProcess("backlog", ctx, db)
    gateway = ServiceProcess("gateway", ctx, db, ZIMMER_HTTP_PORT=str(port), ZIMMER_HTTP_HOST="127.0.0.1",
                             ZIMMER_API_KEY="bench-key", ZIMMER_OPERATOR_TOKEN="bench-operator")
    bus = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
    clients = [RawHttp(port, "bench-key") for _ in range(THROUGHPUT_APPENDERS)]

    async def run(n: int, appenders: int, via: str, samples: list[float] | None = None) -> float:
        tag = uuid.uuid4().hex[:6]
        await _clear_queue(db)

        async def one(worker: int) -> None:
            for i in range(worker, n, appenders):
                body = {"key": f"{tag}#{i}", "estimated_cost": COSTS[i % 3],
                        "issue_url": f"https://github.com/acme/z/issues/{i}"}
                t0 = time.perf_counter()
                if via == "rpc":
                    await bus.request(APPEND, AppendItem(**body))
                else:
                    code, text = await clients[worker].post("/api/v1/work_backlog_items", json.dumps(body).encode())
                    assert code == 201, text
                if samples is not None:
                    samples.append((time.perf_counter() - t0) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(one(w) for w in range(appenders)))
        return n / (time.perf_counter() - started)

    try:
        await backlog.ready(bus)
        await gateway.ready(bus)
        for round_no in range(sizes.rounds):
            for via in (("rpc", "rest") if round_no % 2 == 0 else ("rest", "rpc")):
                (rpc_rate if via == "rpc" else rest_rate).add_rate(await run(ordinary, THROUGHPUT_APPENDERS, via))
            samples: list[float] = []
            await run(ordinary, APPENDERS, "rpc", samples)
            p50.add_latencies(samples)
            p99.add_latencies([percentile(samples, 99)])
            crowded_rate.add_rate(await run(crowded, THROUGHPUT_APPENDERS, "rpc"))
            baseline.add_rate(await _baseline_lock_tx(db, ordinary))
    finally:
        for client in clients:
            await client.close()
        await bus.close()
        gateway.stop()
        backlog.stop()
    note = f"{THROUGHPUT_APPENDERS} appenders in flight; target ≥ 0.40 of the lock-tx baseline end to end"
    return [Entry("backlog_appends", rest_rate, baseline, note=note),
            Entry("backlog_appends", rpc_rate, baseline, note=note),
            Entry("backlog_appends", crowded_rate, baseline, note="bands past 100 items: each append re-spaces"),
            Entry("backlog_appends", p50, None, note="8 concurrent appenders: median (p95 column = round p95s)"),
            Entry("backlog_appends", p99, None, note="8 concurrent appenders: p99 per round")]


async def bench_pull_list(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.backlog import GET_ITEMS, PULL, ItemQuery, PullItems
    from zimmer_common.db import asyncpg_dsn, migrate

    db = await _fresh_db(ctx.pg_url)
    await migrate(db, "backlog", "zimmer_backlog.migrations")
    conn = await asyncpg.connect(asyncpg_dsn(db))
    try:  # 5,000 queued rows spread across the three bands' ranges, straight into the table
        await conn.execute("""
            INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, precedence)
            SELECT 'q#' || g, 'https://github.com/acme/z/issues/' || g,
                   CASE WHEN g <= 2000 THEN 'small' WHEN g <= 4000 THEN 'medium' ELSE 'large' END, 'rest',
                   CASE WHEN g <= 2000 THEN 7000 - g WHEN g <= 4000 THEN 4000 - (g - 2000) ELSE 2000 - (g - 4000) END
            FROM generate_series(1, $1) g""", QUEUED)  # 2,000 small, 2,000 medium, 1,000 large, each in band
    finally:
        await conn.close()
    spot = ServiceProcess("spot-gate", ctx, db)
    backlog = ServiceProcess("backlog", ctx, db)
    bus = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
    pulls = max(20, sizes.rounds * 10)
    pull_latency = Series("backlog.pull1.latency.5k_queued", "ms", True, pulls)
    list_latency = Series("backlog.list100.latency.5k_queued", "ms", True, 50)
    try:
        await spot.ready(bus)
        await backlog.ready(bus)
        for _ in range(sizes.rounds):
            samples = []
            for _ in range(10):
                t0 = time.perf_counter()
                result = await bus.request(PULL, PullItems(count=1))
                samples.append((time.perf_counter() - t0) * 1000)
                assert len(result.started) == 1, result.sentence
            pull_latency.add_latencies(samples)
            samples = []
            for _ in range(50):
                t0 = time.perf_counter()
                await bus.request(GET_ITEMS, ItemQuery(limit=100))
                samples.append((time.perf_counter() - t0) * 1000)
            list_latency.add_latencies(samples)
    finally:
        await bus.close()
        backlog.stop()
        spot.stop()
    return [Entry("backlog_pull_list", pull_latency, list_latency,
                  note="a pull of one spawns through spot-gate; ratio = pull / list latency")]
