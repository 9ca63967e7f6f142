"""Work backlog benchmarks (issue 4).

- appends: appends/s through REST (gateway → backlog) and through NATS RPC, 32 appenders in
  flight, against the serialized advisory-lock + INSERT transaction rate measured in the same
  run (the physical limit of "every append under one lock"); target REST ≥ 1.0 (issue 9).
  Ordinary appends (bands with room) are the headline; a crowded run (every append re-spaces its
  band) is reported beside it, and so are REST appends that each carry an idempotency key. The
  database holds a year of history (100,000 started items whose sessions ended; 20,000 quick),
  so a statement that scans it shows. p50/p99 append latency with 8 concurrent appenders.
  REST goes through the lean keep-alive client (`bench.http_clients.KeepAliveClient`): the
  client runs on the services' cores, where aiohttp would take a fifth to a quarter of them;
  aiohttp's rate on the same appends is reported beside it. The lean client's rate on the
  gateway's trivial `GET /healthz` (same 32 callers) is measured in the same rounds, with wrk's
  on the same route when a wrk binary is on PATH, so the table shows whether the client bounds
  the REST figure. The services' own peak RSS (VmHWM) over the group is in the REST entry's
  footnote.
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

from bench.harness import BenchContext, Entry, Series, ServiceProcess, Sizes, advisory_lock_tx_rate, note_dead_services, vm_hwm_mb
from bench.spot_gate import _fresh_db

APPENDERS = 8  # for the latency figures (issue 4)
THROUGHPUT_APPENDERS = 32  # appenders in flight for the rates; also the /healthz callers and wrk's connections
HEALTHZ_REQUESTS, HEALTHZ_REQUESTS_QUICK = 2000, 600  # GET /healthz per round: the lean client's own rate
WRK_SECONDS, WRK_THREADS = 2, 2  # wrk on /healthz each round, when a wrk binary is on PATH
APPEND_PATH = "/api/v1/work_backlog_items"
QUEUED = 5000
# A year of history: started items whose sessions ended, as production's database holds them.
# Nothing an append reads may scan them (the counts once scanned every produced session).
HISTORY, HISTORY_QUICK = 100_000, 20_000
# Two small, two medium, one large: 240 ordinary appends put 96 in the small and medium bands and
# 48 in the large one, each under what its band takes at 10 apart before a re-space (100, 100, 50).
COSTS = ("small", "medium", "large", "small", "medium")


async def _seed_history(db: str, n: int) -> None:
    """`n` started items with an ended (archived) session each, then ANALYZE."""
    from zimmer_common.db import asyncpg_dsn

    conn = await asyncpg.connect(asyncpg_dsn(db))
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, precedence, status, "
                "started_session_id, started_at, added_via) SELECT 'history#' || g, "
                "'https://github.com/acme/history/issues/' || g, 'small', 0, 'started', g, now(), 'rest' "
                "FROM generate_series(1, $1::int) g", n)
            await conn.execute(
                "INSERT INTO backlog.produced_sessions (session_id, item_id, status) SELECT started_session_id, id, "
                "'archived' FROM backlog.work_backlog_items WHERE key LIKE 'history#%'")
        await conn.execute("ANALYZE backlog.work_backlog_items")
        await conn.execute("ANALYZE backlog.produced_sessions")
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
    from bench.harness import percentile
    from bench.http_clients import KeepAliveClient, get_rate, http_session, run_wrk, wrk_binary
    from zimmer_cli.embedded import free_port
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.backlog import APPEND, AppendItem

    quick = sizes.rounds <= 3
    ordinary = 80 if quick else 240  # ordinary appends: no band re-spaces (see COSTS)
    crowded = 300 if quick else 900  # bands past 100 items: every append re-spaces its band
    healthz_n = HEALTHZ_REQUESTS_QUICK if quick else HEALTHZ_REQUESTS
    wrk_seconds = 1 if quick else WRK_SECONDS
    history = HISTORY_QUICK if quick else HISTORY
    rpc_rate = Series("backlog.append.rpc", "app/s", False, ordinary)
    rest_rate = Series("backlog.append.rest", "app/s", False, ordinary)
    keyed_rate = Series("backlog.append.rest.keyed", "app/s", False, ordinary)
    aiohttp_rate = Series("backlog.append.rest.aiohttp", "app/s", False, ordinary)
    healthz_rate = Series("http.healthz", "req/s", False, healthz_n)
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
    http = None  # aiohttp
    lean: KeepAliveClient | None = None

    async def run(n: int, appenders: int, via: str, samples: list[float] | None = None) -> float:
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
        assert bus is not None and http is not None and lean is not None

        async def one(worker: int) -> None:
            for i in range(worker, n, appenders):
                # The key names its issue ({repo}#{n}); the repo carries the run's tag.
                body = {"key": f"r{tag}#{i + 1}", "estimated_cost": COSTS[i % len(COSTS)],
                        "issue_url": f"https://github.com/acme/r{tag}/issues/{i + 1}"}
                if via == "keyed":  # as an agent that retries after a 503 sends it
                    body["idempotency_key"] = f"append-{tag}-{i + 1}"
                t0 = time.perf_counter()
                if via == "rpc":
                    await bus.request(APPEND, AppendItem(**body))
                elif via in ("rest", "keyed"):
                    status, text = await lean.post(worker, APPEND_PATH, json.dumps(body).encode())
                    if status != 201:
                        raise RuntimeError(f"POST {APPEND_PATH} answered {status}: {text[:300]!r}")
                else:
                    async with http.post(APPEND_PATH, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}) as resp:
                        text = await resp.read()
                        if resp.status != 201:
                            raise RuntimeError(f"POST {APPEND_PATH} answered {resp.status} (aiohttp): "
                                               f"{text[:300]!r}")
                if samples is not None:
                    samples.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(one(w) for w in range(appenders)))

    async def measure(what: str) -> None:
        assert lean is not None
        if what == "healthz":
            healthz_rate.add_rate(await get_rate(lean, "/healthz", healthz_n, THROUGHPUT_APPENDERS))
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
            rate = {"rpc": rpc_rate, "rest": rest_rate, "keyed": keyed_rate, "aiohttp": aiohttp_rate}[what]
            rate.add_rate(await run(ordinary, THROUGHPUT_APPENDERS, what))

    try:
        services.append(ServiceProcess("backlog", ctx, db))
        services.append(ServiceProcess("gateway", ctx, db, ZIMMER_HTTP_PORT=str(port), ZIMMER_HTTP_HOST="127.0.0.1",
                                       ZIMMER_API_KEY="bench-key", ZIMMER_OPERATOR_TOKEN="bench-operator"))
        bus = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
        http = http_session(THROUGHPUT_APPENDERS, base_url, headers={"Authorization": "Bearer bench-key"})
        lean = KeepAliveClient("127.0.0.1", port, headers={"Authorization": "Bearer bench-key"})
        for service in services:
            await service.ready(bus)
        await _seed_history(db, history)
        order = ["rpc", "rest", "keyed", "aiohttp", "healthz", "wrk"]
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
        if lean is not None:
            await lean.close()
        if bus is not None:
            await bus.close()
        for service in reversed(services):
            service.stop()
    note = (f"{THROUGHPUT_APPENDERS} appenders in flight, {history:,} started items with ended sessions in the "
            "database; target REST ≥ 1.0 of the lock-tx baseline (issue 9)")
    healthz_note = (f"the REST appends' client (bench.http_clients.KeepAliveClient) on GET /healthz, same "
                    f"{THROUGHPUT_APPENDERS} callers and connections; ratio = /healthz ÷ REST appends: well above 1 "
                    "means the client is not what bounds the REST figure")
    aiohttp_note = ("the same REST appends with aiohttp as the client: on the services' cores it costs about 0.3 ms "
                    "of CPU per request, the lean client about 0.09 (bench/README.md, HTTP clients)")
    healthz_extra: dict[str, Any] = {"wrk": wrk}
    rss_note = ", ".join(f"{name} {mb:.1f} MB" for name, mb in service_peak_rss.items() if mb is not None)
    entries = [Entry("backlog_appends", rest_rate, baseline, note=note, extra={
                   "service_peak_rss_mb": service_peak_rss,
                   "footnote": f"peak RSS (VmHWM) of the services' own processes over the group: {rss_note}"}),
               Entry("backlog_appends", keyed_rate, baseline,
                     note="the same REST appends, each with its own idempotency key (claimed and answered under the "
                          "ranking lock)"),
               Entry("backlog_appends", aiohttp_rate, baseline, note=aiohttp_note),
               Entry("backlog_appends", healthz_rate, rest_rate, note=healthz_note, extra=healthz_extra)]
    if wrk_rate.rounds:
        wrk_rate.per_round = int(statistics.median(wrk["round_requests"]))
        entries.append(Entry("backlog_appends", wrk_rate, healthz_rate, extra={"wrk": wrk},
                             note=f"wrk -t{WRK_THREADS} -c{THROUGHPUT_APPENDERS} -d{wrk_seconds}s on GET /healthz "
                                  "each round; ratio = wrk ÷ the lean client on the same route"))
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
