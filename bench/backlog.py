"""Work backlog benchmarks (issue 4).

- appends: appends/s through REST (gateway → backlog) and through NATS RPC, 32 appenders in
  flight, against the serialized advisory-lock + INSERT transaction rate measured in the same
  run (the physical limit of "every append under one lock"); target REST ≥ 1.0 (issue 9). Ordinary
  appends (bands with room) are the headline; a crowded run (every append re-spaces its band)
  is reported beside it. p50/p99 append latency with 8 concurrent appenders. REST goes through
  aiohttp; the same client's rate on the gateway's trivial `GET /healthz` (same 32 callers) is
  measured in the same rounds and reported beside it, with wrk's on the same route when a wrk
  binary is on PATH, so the table shows whether the client bounds the REST figure. The services'
  own peak RSS (VmHWM) over the group is in the REST entry's footnote.
- pull_list: with 5,000 queued rows, the latency of a pull of one item (through spot-gate's
  spawn) and of listing the top 100, over NATS RPC.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid
from typing import Any

import asyncpg

from bench.harness import (
    BenchContext, Entry, Series, ServiceProcess, Sizes, advisory_lock_tx_rate, note_dead_services, vm_hwm_mb)
from bench.spot_gate import _fresh_db

APPENDERS = 8  # for the latency figures (issue 4)
THROUGHPUT_APPENDERS = 32  # appenders in flight for the rates; also the /healthz callers and wrk's connections
HEALTHZ_REQUESTS, HEALTHZ_REQUESTS_QUICK = 2000, 600  # GET /healthz per round: the client's own rate
WRK_SECONDS, WRK_THREADS = 2, 2  # wrk on /healthz each round, when a wrk binary is on PATH
APPEND_PATH = "/api/v1/work_backlog_items"
QUEUED = 5000
# Two small, two medium, one large: 240 ordinary appends put 96 in the small and medium bands and
# 48 in the large one, each under what its band takes at 10 apart before a re-space (100, 100, 50).
COSTS = ("small", "medium", "large", "small", "medium")


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
    from bench.harness import http_get_rate, http_session, percentile, run_wrk, wrk_binary
    from zimmer_cli.embedded import free_port
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.backlog import APPEND, AppendItem

    quick = sizes.rounds <= 3
    ordinary = 80 if quick else 240  # ordinary appends: no band re-spaces (see COSTS)
    crowded = 300 if quick else 900  # bands past 100 items: every append re-spaces its band
    healthz_n = HEALTHZ_REQUESTS_QUICK if quick else HEALTHZ_REQUESTS
    wrk_seconds = 1 if quick else WRK_SECONDS
    rpc_rate = Series("backlog.append.rpc", "app/s", False, ordinary)
    rest_rate = Series("backlog.append.rest", "app/s", False, ordinary)
    healthz_rate = Series("http.healthz.aiohttp", "req/s", False, healthz_n)
    wrk_rate = Series("http.healthz.wrk", "req/s", False, 0)  # per_round: wrk's median request count
    crowded_rate = Series("backlog.append.rpc.respacing", "app/s", False, crowded)
    p50 = Series("backlog.append.latency.8_appenders", "ms", True, ordinary)
    p99 = Series("backlog.append.latency.8_appenders.p99", "ms", True, ordinary)
    baseline = Series("pg.tx.advisory_lock_insert", "tx/s", False, ordinary)
    wrk: dict[str, Any] = ({"available": True, "binary": wrk_binary(), "seconds": wrk_seconds,
                            "connections": THROUGHPUT_APPENDERS, "threads": WRK_THREADS, "round_requests": [],
                            "errors": None}
                           if wrk_binary() else {"available": False, "reason": "no wrk binary on PATH"})
    db = await _fresh_db(ctx.pg_url)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    services: list[ServiceProcess] = []
    bus = None
    http = None

    async def run(n: int, appenders: int, via: str, samples: list[float] | None = None) -> float:
        assert bus is not None and http is not None
        tag = uuid.uuid4().hex[:6]
        # Untimed: one append per appender (over REST it opens the pool's connections again, which
        # the client closed after 2 s idle), then the queue is cleared so the timed run's bands
        # start empty. A run measures appends, not TCP set-up or the first batch after idle.
        await _clear_queue(db)
        await appends(appenders, appenders, via, f"{tag}w", None)
        await _clear_queue(db)
        started = time.perf_counter()
        await appends(n, appenders, via, tag, samples)
        return n / (time.perf_counter() - started)

    async def appends(n: int, appenders: int, via: str, tag: str, samples: list[float] | None) -> None:
        assert bus is not None and http is not None

        async def one(worker: int) -> None:
            for i in range(worker, n, appenders):
                # The key names its issue ({repo}#{n}); the repo carries the run's tag.
                body = {"key": f"r{tag}#{i + 1}", "estimated_cost": COSTS[i % len(COSTS)],
                        "issue_url": f"https://github.com/acme/r{tag}/issues/{i + 1}"}
                t0 = time.perf_counter()
                if via == "rpc":
                    await bus.request(APPEND, AppendItem(**body))
                else:
                    async with http.post(APPEND_PATH, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}) as resp:
                        text = await resp.read()
                        if resp.status != 201:
                            raise RuntimeError(f"POST {APPEND_PATH} answered {resp.status}: {text[:300]!r}")
                if samples is not None:
                    samples.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(one(w) for w in range(appenders)))

    async def measure(what: str) -> None:
        assert http is not None
        if what == "healthz":
            healthz_rate.add_rate(await http_get_rate(http, "/healthz", healthz_n, THROUGHPUT_APPENDERS))
        elif what == "wrk":
            if not wrk["available"] or wrk["errors"]:
                return
            try:
                result = await run_wrk(f"{base_url}/healthz", wrk_seconds, THROUGHPUT_APPENDERS, WRK_THREADS)
            except Exception as exc:  # optional tool: its failure is reported, not the group's
                wrk["errors"] = f"{type(exc).__name__}: {exc}"
                return
            wrk_rate.add_rate(result.requests_per_second)
            wrk["round_requests"].append(result.requests)
            if result.errors:
                wrk["errors"] = result.errors
        else:
            (rpc_rate if what == "rpc" else rest_rate).add_rate(await run(ordinary, THROUGHPUT_APPENDERS, what))

    try:
        services.append(ServiceProcess("backlog", ctx, db))
        services.append(ServiceProcess("gateway", ctx, db, ZIMMER_HTTP_PORT=str(port), ZIMMER_HTTP_HOST="127.0.0.1",
                                       ZIMMER_API_KEY="bench-key", ZIMMER_OPERATOR_TOKEN="bench-operator"))
        bus = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
        http = http_session(THROUGHPUT_APPENDERS, base_url, headers={"Authorization": "Bearer bench-key"})
        for service in services:
            await service.ready(bus)
        order = ["rpc", "rest", "healthz", "wrk"]
        for round_no in range(sizes.rounds):
            for what in (order if round_no % 2 == 0 else order[::-1]):
                await measure(what)
            samples: list[float] = []
            await run(ordinary, APPENDERS, "rpc", samples)
            p50.add_latencies(samples)
            p99.add_latencies([percentile(samples, 99)])
            crowded_rate.add_rate(await run(crowded, THROUGHPUT_APPENDERS, "rpc"))
            baseline.add_rate(await advisory_lock_tx_rate(db, ordinary))
        service_peak_rss = {s.name: vm_hwm_mb(s.proc.pid) for s in services}
    except BaseException as exc:
        note_dead_services(exc, services)
        raise
    finally:
        if http is not None:
            await http.close()
        if bus is not None:
            await bus.close()
        for service in reversed(services):
            service.stop()
    note = f"{THROUGHPUT_APPENDERS} appenders in flight; target REST ≥ 1.0 of the lock-tx baseline (issue 9)"
    healthz_note = (f"the bench's HTTP client (aiohttp) on GET /healthz, same {THROUGHPUT_APPENDERS} callers and "
                    "connection pool as the REST appends; ratio = /healthz ÷ REST appends: well above 1 means the "
                    "client is not what bounds the REST figure")
    healthz_extra: dict[str, Any] = {"wrk": wrk}
    rss_note = ", ".join(f"{name} {mb:.1f} MB" for name, mb in service_peak_rss.items() if mb is not None)
    entries = [Entry("backlog_appends", rest_rate, baseline, note=note, extra={
                   "service_peak_rss_mb": service_peak_rss,
                   "footnote": f"peak RSS (VmHWM) of the services' own processes over the group: {rss_note}"}),
               Entry("backlog_appends", healthz_rate, rest_rate, note=healthz_note, extra=healthz_extra)]
    if wrk_rate.rounds:
        wrk_rate.per_round = int(statistics.median(wrk["round_requests"]))
        entries.append(Entry("backlog_appends", wrk_rate, healthz_rate, extra={"wrk": wrk},
                             note=f"wrk -t{WRK_THREADS} -c{THROUGHPUT_APPENDERS} -d{wrk_seconds}s on GET /healthz "
                                  "each round; ratio = wrk ÷ aiohttp on the same route"))
        if wrk["errors"]:
            entries[-1].extra["footnote"] = f"wrk reported: {wrk['errors']}"
    else:
        healthz_extra["footnote"] = (f"wrk not run: {wrk['reason']}" if not wrk["available"]
                                     else f"wrk failed, not reported: {wrk['errors']}")
    entries += [Entry("backlog_appends", rpc_rate, baseline, note=note),
                Entry("backlog_appends", crowded_rate, baseline, note="bands past 100 items: each append re-spaces"),
                Entry("backlog_appends", p50, None, note="8 concurrent appenders: median (p95 column = round p95s)"),
                Entry("backlog_appends", p99, None, note="8 concurrent appenders: p99 per round")]
    return entries


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
    pulls = max(20, sizes.rounds * 10)
    pull_latency = Series("backlog.pull1.latency.5k_queued", "ms", True, pulls)
    list_latency = Series("backlog.list100.latency.5k_queued", "ms", True, 50)
    services: list[ServiceProcess] = []
    bus = None
    try:
        services.append(ServiceProcess("spot-gate", ctx, db))
        services.append(ServiceProcess("backlog", ctx, db))
        bus = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
        for service in services:
            await service.ready(bus)
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
    except BaseException as exc:
        note_dead_services(exc, services)
        raise
    finally:
        if bus is not None:
            await bus.close()
        for service in reversed(services):
            service.stop()
    return [Entry("backlog_pull_list", pull_latency, list_latency,
                  note="a pull of one spawns through spot-gate; ratio = pull / list latency")]
