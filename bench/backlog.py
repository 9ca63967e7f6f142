"""Work backlog benchmarks (issue 4).

- appends: appends/s through REST (gateway → backlog) and through NATS RPC, 8 concurrent
  appenders, against the serialized advisory-lock + INSERT transaction rate measured in the
  same run (the physical limit of "every append under one lock"); target ≥ 40 % end to end.
  p50/p99 append latency ride along.
- pull_list: with 5,000 queued rows, the latency of a pull of one item (through spot-gate's
  spawn) and of listing the top 100, over NATS RPC.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg

from bench.harness import BenchContext, Entry, Series, ServiceProcess, Sizes
from bench.spot_gate import _fresh_db

APPENDERS = 8
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
    import httpx

    from zimmer_cli.embedded import free_port
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.backlog import APPEND, AppendItem

    n = 900 if sizes.rounds > 3 else 150  # three bands hold ~1,500 between them
    rpc_rate = Series("backlog.append.rpc", "app/s", False, n)
    rest_rate = Series("backlog.append.rest", "app/s", False, n)
    rpc_latency = Series("backlog.append.rpc.latency", "ms", True, n)
    baseline = Series("pg.tx.advisory_lock_insert", "tx/s", False, n)
    db = await _fresh_db(ctx.pg_url)
    port = free_port()
    backlog = ServiceProcess("backlog", ctx, db)
    gateway = ServiceProcess("gateway", ctx, db, ZIMMER_HTTP_PORT=str(port), ZIMMER_HTTP_HOST="127.0.0.1",
                             ZIMMER_API_KEY="bench-key", ZIMMER_OPERATOR_TOKEN="bench-operator")
    bus = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
    http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer bench-key"},
                             timeout=60)
    try:
        await backlog.ready(bus)
        await gateway.ready(bus)
        for round_no in range(sizes.rounds):
            tag = uuid.uuid4().hex[:6]
            samples: list[float] = []

            async def via_rpc(worker: int) -> None:
                for i in range(worker, n, APPENDERS):
                    t0 = time.perf_counter()
                    await bus.request(APPEND, AppendItem(key=f"r{tag}#{i}", estimated_cost=COSTS[i % 3],
                                                         issue_url=f"https://github.com/acme/z/issues/{i}"))
                    samples.append((time.perf_counter() - t0) * 1000)

            async def via_rest(worker: int) -> None:
                for i in range(worker, n, APPENDERS):
                    resp = await http.post("/api/v1/work_backlog_items", json={
                        "key": f"h{tag}#{i}", "estimated_cost": COSTS[i % 3],
                        "issue_url": f"https://github.com/acme/z/issues/{i}"})
                    assert resp.status_code == 201, resp.text

            for name in (("rpc", "rest") if round_no % 2 == 0 else ("rest", "rpc")):
                await _clear_queue(db)
                started = time.perf_counter()
                await asyncio.gather(*((via_rpc if name == "rpc" else via_rest)(w) for w in range(APPENDERS)))
                (rpc_rate if name == "rpc" else rest_rate).add_rate(n / (time.perf_counter() - started))
            rpc_latency.add_latencies(samples)
            baseline.add_rate(await _baseline_lock_tx(db, n))
    finally:
        await http.aclose()
        await bus.close()
        gateway.stop()
        backlog.stop()
    note = f"{APPENDERS} concurrent appenders; target ≥ 0.40 of the lock-tx baseline end to end"
    return [Entry("backlog_appends", rest_rate, baseline, note=note), Entry("backlog_appends", rpc_rate, baseline, note=note),
            Entry("backlog_appends", rpc_latency, None, note="p50 = median column; p99 in the JSON round values")]


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
