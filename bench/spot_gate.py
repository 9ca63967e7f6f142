"""Spot-gate benchmarks (issue 3): end-to-end admissions/s, decision latency, re-check scan.

- admissions: `request_turn` over NATS → decision → `start_turn` published on ZIMMER_RUNTIME by
  the outbox relay, for 1,000 sessions (after 200 untimed) with 10 accounts in the pool, 64
  requests in flight, the service running as its own process (`zimmer serve spot-gate`).
  Reported against serialized advisory-lock transactions on the same database in the same
  round (`pg.tx.advisory_lock`):
  admissions are decided under one lock, so that is the physical rate a one-at-a-time design
  could reach; batching exists so that the lock is not the bound (target ≥ 1.0). p50 and p99 of
  the `request_turn` round trip beside it.
- spawn_burst: 500 concurrent `POST /api/v1/sessions` with start true against max_sessions 20,
  through the gateway (own processes, the default 5 s deadline): every one must be answered 201,
  exactly 20 admitted, the rest held on fleet_at_cap, none `unavailable`. Reported as spawns/s
  against the same advisory-lock baseline, with the burst's p99.
- decision: the pure `decide()` vs the same decision with its inputs read from PostgreSQL
  (`read_pool` + `decide`): what reading the snapshot costs.
- recheck_scan: finding the due holds among 10,000 held sessions (`due_holds`, 500 a pass)
  vs a sequential count of the same table.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from bench.harness import (
    BenchContext,
    Entry,
    Series,
    ServiceProcess,
    Sizes,
    advisory_lock_tx_rate,
    note_dead_services,
    percentile,
)
from zimmer_common.db import with_database

SESSIONS = 1000
# Admissions a round makes before the clock starts: a fresh process prepares each statement on each
# pooled connection and fills its caches on its first batches; the figure is the steady rate.
WARMUP = 200
ACCOUNTS = 10
IN_FLIGHT = 64
HELD = 10_000


async def _fresh_db(base: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(base)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return with_database(base, name)


async def _start_service(ctx: BenchContext, db: str):  # type: ignore[no-untyped-def]  # returns a Service, imported lazily
    from zimmer_common.settings import Environment, Settings
    from zimmer_spot_gate.service import build

    settings = Settings(env=Environment.TEST, database_url=db, nats_url=ctx.nats_url, metrics_port=-1,
                        instance_id=f"bench-{uuid.uuid4().hex[:4]}", rpc_timeout_seconds=30, outbox_poll_seconds=0.05)
    service = build(settings)
    await service.start()
    return service


async def _seed_sql(db: str, sessions: int, accounts: int) -> list[int]:
    """Sessions and readings written straight into the migrated schema, before the service starts."""
    from zimmer_common.db import asyncpg_dsn, migrate

    await migrate(db, "spot_gate", "zimmer_spot_gate.migrations")
    now = datetime.now(UTC)
    conn = await asyncpg.connect(asyncpg_dsn(db))
    try:
        for i in range(accounts):
            await conn.execute("INSERT INTO spot_gate.accounts (account, status) VALUES ($1, 'active')", f"acct-{i}")
            await conn.execute(
                "INSERT INTO spot_gate.quota_readings (account, status, five_hour_utilization, five_hour_resets_at, "
                "seven_day_utilization, seven_day_resets_at, read_at) VALUES ($1, 'active', 0.1, $2, 0.1, $3, $4)",
                f"acct-{i}", now + timedelta(hours=3), now + timedelta(days=3), now)
        await conn.execute("UPDATE spot_gate.spot_policy SET max_sessions = 1000000")
        rows = await conn.fetch("INSERT INTO spot_gate.sessions (genesis, title, prompt) "
                                "SELECT 'api', 'bench ' || g, 'go' FROM generate_series(1, $1) g RETURNING id", sessions)
        return [r["id"] for r in rows]
    finally:
        await conn.close()


async def _seed(service: Any, sessions: int, accounts: int) -> list[int]:
    from sqlalchemy import text

    from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn

    now = datetime.now(UTC)
    for i in range(accounts):
        await service.app.record_reading(QuotaReadingIn(
            account=f"acct-{i}", status="active", read_at=now,
            five_hour=WindowReadingIn(utilization=0.1, resets_at=now + timedelta(hours=3)),
            seven_day=WindowReadingIn(utilization=0.1, resets_at=now + timedelta(days=3))))
    async with service.engine.begin() as conn:
        await conn.execute(text("UPDATE spot_gate.spot_policy SET max_sessions = 1000000"))
        rows = await conn.execute(text(
            "INSERT INTO spot_gate.sessions (genesis, title, prompt) "
            "SELECT 'api', 'bench ' || g, 'go' FROM generate_series(1, :n) g RETURNING id"), {"n": sessions})
        return [r.id for r in rows]


async def _runtime_messages(bus: Any) -> int:
    info = await bus.js_api("STREAM.INFO.ZIMMER_RUNTIME")
    return int(info["state"]["last_seq"])


async def bench_admissions(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.spot import REQUEST_TURN, RequestTurn

    n = SESSIONS if sizes.rounds > 3 else 300
    rate = Series("spot.admissions.e2e", "adm/s", False, n)
    latency = Series("spot.request_turn.latency", "ms", True, n)
    p99 = Series("spot.request_turn.latency.p99", "ms", True, n)
    reference = Series("pg.tx.advisory_lock", "tx/s", False, n)
    for _round in range(sizes.rounds):
        db = await _fresh_db(ctx.pg_url)
        ids = await _seed_sql(db, WARMUP + n, ACCOUNTS)
        service = ServiceProcess("spot-gate", ctx, db)
        client = None
        try:
            client = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
            await service.ready(client)

            async def admit(client: Bus, batch: list[int], samples: list[float]) -> float:
                """Admit every session of `batch`, IN_FLIGHT at a time; seconds until the last
                `start_turn` is on the runtime stream (end to end)."""
                before = await _runtime_messages(client)
                queue: asyncio.Queue[int] = asyncio.Queue()
                for i in batch:
                    queue.put_nowait(i)

                async def worker() -> None:
                    while not queue.empty():
                        sid = queue.get_nowait()
                        t0 = time.perf_counter()
                        result = await client.request(REQUEST_TURN, RequestTurn(session_id=sid, kind="first_start"))
                        samples.append((time.perf_counter() - t0) * 1000)
                        assert result.outcome == "admitted", result.outcome

                started = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
                while await _runtime_messages(client) - before < len(batch):
                    await asyncio.sleep(0.005)
                return time.perf_counter() - started

            await admit(client, ids[:WARMUP], [])
            samples: list[float] = []
            elapsed = await admit(client, ids[WARMUP:], samples)
            rate.add_rate(n / elapsed)
            latency.add_latencies(samples)
            p99.add_latencies([percentile(samples, 99)])
            service.stop()
            reference.add_rate(await advisory_lock_tx_rate(db, n))
        except BaseException as exc:
            note_dead_services(exc, [service])
            raise
        finally:
            if client is not None:
                await client.close()
            service.stop()
    return [Entry("spot_admissions", rate, reference,
                  note=f"{n} sessions after {WARMUP} untimed, {ACCOUNTS} accounts, {IN_FLIGHT} in flight; "
                       "ratio = admissions/s ÷ "
                       "serialized advisory-lock tx/s on the same database (target ≥ 1.0)"),
            Entry("spot_admissions", latency, None, note="request_turn round trip under that load"),
            Entry("spot_admissions", p99, None, note="request_turn round trip: p99 per round")]


BURST = 500
BURST_SLOTS = 20


async def bench_spawn_burst(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    """500 spawns at once through the gateway against 20 slots: all 201 inside the deadline,
    exactly 20 admitted, none `unavailable` (the gate never fails open on its own congestion)."""
    import json as _json

    from bench.http_clients import http_session
    from zimmer_cli.embedded import free_port
    from zimmer_common.bus import Bus

    rounds = 3 if sizes.rounds > 3 else 1
    rate = Series("spot.spawn_burst.500", "spawns/s", False, BURST)
    p99 = Series("spot.spawn_burst.latency.p99", "ms", True, BURST)
    reference = Series("pg.tx.advisory_lock", "tx/s", False, BURST)
    outcomes: list[dict[str, int]] = []
    for _round in range(rounds):
        db = await _fresh_db(ctx.pg_url)
        await _seed_sql(db, 0, ACCOUNTS)
        from zimmer_common.db import asyncpg_dsn

        conn = await asyncpg.connect(asyncpg_dsn(db))
        try:
            await conn.execute("UPDATE spot_gate.spot_policy SET max_sessions = $1", BURST_SLOTS)
        finally:
            await conn.close()
        port = free_port()
        key = "bench-fleet-key"
        common = {"ZIMMER_RPC_TIMEOUT_SECONDS": "5", "ZIMMER_API_KEY": key, "ZIMMER_OPERATOR_TOKEN": "bench-op"}
        services = [ServiceProcess("spot-gate", ctx, db, **common),
                    ServiceProcess("gateway", ctx, db, ZIMMER_HTTP_PORT=str(port), ZIMMER_HTTP_HOST="127.0.0.1",
                                   **common)]
        client = http = None
        try:
            client = await Bus.connect([ctx.nats_url], service="bench", instance_id="c", rpc_timeout=60)
            for service in services:
                await service.ready(client)
            http = http_session(BURST, f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"})
            samples: list[float] = []
            tally: dict[str, int] = {}

            async def one(http: Any, samples: list[float], tally: dict[str, int], i: int) -> None:
                body = _json.dumps({"genesis": "api", "title": f"burst {i}", "prompt": "go"}).encode()
                t0 = time.perf_counter()
                async with http.post("/api/v1/sessions", data=body,
                                     headers={"content-type": "application/json"}) as r:
                    answer = await r.json()
                samples.append((time.perf_counter() - t0) * 1000)
                if r.status != 201:
                    label = f"status_{r.status}:{answer.get('code')}"
                    tally[label] = tally.get(label, 0) + 1
                    return
                turn = answer["turn"]
                label = turn["outcome"] if turn["outcome"] == "admitted" else f"{turn['outcome']}:{turn['decision']['reason']}"
                tally[label] = tally.get(label, 0) + 1

            started = time.perf_counter()
            await asyncio.gather(*(one(http, samples, tally, i) for i in range(BURST)))
            elapsed = time.perf_counter() - started
            outcomes.append(tally)
            if tally != {"admitted": BURST_SLOTS, "held:fleet_at_cap": BURST - BURST_SLOTS}:
                raise AssertionError(f"500 spawns against {BURST_SLOTS} slots answered {tally}")
            rate.add_rate(BURST / elapsed)
            p99.add_latencies([percentile(samples, 99)])
        except BaseException as exc:
            note_dead_services(exc, services)
            raise
        finally:
            if http is not None:
                await http.close()
            if client is not None:
                await client.close()
            for service in reversed(services):
                service.stop()
        reference.add_rate(await advisory_lock_tx_rate(db, BURST))
    note = (f"{BURST} concurrent POST /api/v1/sessions (start true) against max_sessions {BURST_SLOTS}, 5 s deadline; "
            f"every round: all 201, exactly {BURST_SLOTS} admitted, the rest held on fleet_at_cap, 0 unavailable")
    return [Entry("spot_spawn_burst", rate, reference, note=note, extra={"outcomes": outcomes}),
            Entry("spot_spawn_burst", p99, None, note="time to the answer, p99 per round (the deadline is 5 s)")]


async def bench_decision(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from zimmer_spot_gate.domain.gate import Candidate, Snapshot, decide
    from zimmer_spot_gate.handlers.snapshot import read_inputs

    async def snapshot(conn: Any) -> Snapshot:  # the policy view's read: the pool, the policy, the fleet
        inputs, fleet = await read_inputs(conn, now)
        assert inputs.parts is not None
        return Snapshot(inputs.policy.policy, inputs.parts.windows, fleet, Candidate(2.0),
                        inputs.parts.accounts_averaged, inputs.parts.pool_size)

    service = await _start_service(ctx, await _fresh_db(ctx.pg_url))
    n = 2000 if sizes.rounds > 3 else 300
    pure = Series("spot.decide.pure", "µs", True, n)
    full = Series("spot.decide.with_reads", "µs", True, n)
    try:
        await _seed(service, 100, ACCOUNTS)
        now = datetime.now(UTC)
        async with service.engine.connect() as conn:
            snap = await snapshot(conn)
            for _ in range(sizes.rounds):
                samples = []
                for _ in range(n):
                    t0 = time.perf_counter_ns()
                    decide(snap)
                    samples.append((time.perf_counter_ns() - t0) / 1000)
                pure.add_latencies(samples)
                samples = []
                for _ in range(max(50, n // 10)):
                    t0 = time.perf_counter_ns()
                    decide(await snapshot(conn))
                    samples.append((time.perf_counter_ns() - t0) / 1000)
                full.add_latencies(samples)
    finally:
        await service.stop()
    return [Entry("spot_decision", full, pure, note="ratio: what reading the snapshot from PostgreSQL costs")]


async def bench_recheck_scan(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from sqlalchemy import text

    from zimmer_spot_gate.store.sessions import due_holds

    service = await _start_service(ctx, await _fresh_db(ctx.pg_url))
    scan = Series("spot.recheck_scan.10k_held", "ms", True, 1)
    baseline = Series("pg.seq_count.sessions", "ms", True, 1)
    try:
        now = datetime.now(UTC)
        async with service.engine.begin() as conn:
            await conn.execute(text("""
                INSERT INTO spot_gate.sessions (genesis, title, spot_hold_reason, spot_hold_retry_at, spot_hold_count)
                SELECT 'api', 'held ' || g, 'at_utilization_limit', CAST(:now AS timestamptz) - make_interval(secs => g), 1
                FROM generate_series(1, :n) g"""), {"n": HELD, "now": now})
            await conn.execute(text("ANALYZE spot_gate.sessions"))
        async with service.engine.connect() as conn:
            for _ in range(sizes.rounds):
                samples, base = [], []
                for _ in range(20):
                    t0 = time.perf_counter()
                    due = await due_holds(conn, now, 500)
                    samples.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    await conn.execute(text("SELECT count(*) FROM spot_gate.sessions"))
                    base.append((time.perf_counter() - t0) * 1000)
                    assert len(due) == 500
                scan.add_latencies(samples)
                baseline.add_latencies(base)
    finally:
        await service.stop()
    return [Entry("spot_recheck_scan", scan, baseline, note=f"{HELD} held, 500 due taken per pass; target ≤ 1 s")]
