"""Foundation benchmarks: the bus helpers against raw nats-py, and the embedded PostgreSQL's
physical limits (bulk COPY rows/s; serialized advisory-lock tx/s against autocommit INSERT tx/s).

Each runs its subject and its baseline in the same run, interleaved; see bench/run.py and
bench/README.md.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from bench.harness import BenchContext, Entry, Op, Series, Sizes, alternate, interleaved_round

# ---- (a) RPC round trip: bus helpers vs raw nats-py ---------------------------------------


async def bench_rpc(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    import nats

    from zimmer_common.bus import Bus
    from zimmer_common.contracts.envelope import Payload, RpcSpec

    class EchoRequest(Payload):
        seq: int
        body: str

    class EchoReply(Payload):
        seq: int
        body: str

    spec: RpcSpec[EchoRequest, EchoReply] = RpcSpec(ctx="bench", op="echo", request=EchoRequest, response=EchoReply)
    raw_subject = "bench.raw.echo"
    body = "x" * 64
    servers = [ctx.nats_url]

    async def echo(req: EchoRequest) -> EchoReply:
        return EchoReply(seq=req.seq, body=req.body)

    # Two connections per side, as between two services: the server's and the client's.
    server_bus = await Bus.connect(servers, service="bench", instance_id="bench", rpc_timeout=5)
    client_bus = await Bus.connect(servers, service="bench", instance_id="bench", rpc_timeout=5)
    raw_server = await nats.connect(servers=servers, name="bench-raw-server")
    raw_client = await nats.connect(servers=servers, name="bench-raw-client")
    try:
        await server_bus.serve(spec, echo)

        async def raw_echo(msg: Any) -> None:
            await msg.respond(msg.data)

        await raw_server.subscribe(raw_subject, queue="bench", cb=raw_echo)
        await server_bus.nc.flush()
        await raw_server.flush()

        # The raw request carries the same bytes the helper puts on the wire.
        raw_payload = EchoRequest(seq=0, body=body).model_dump_json().encode()

        async def helper_once(seq: int) -> None:
            reply = await client_bus.request(spec, EchoRequest(seq=seq, body=body))
            if reply.seq != seq:
                raise RuntimeError("helper echo mismatch")

        async def raw_once(seq: int) -> None:
            msg = await raw_client.request(raw_subject, raw_payload, timeout=5)
            if not msg.data:
                raise RuntimeError("raw echo empty")

        n = sizes.rpc_requests
        variants: dict[str, Op] = {"helper": helper_once, "raw": raw_once}
        lat = {v: Series(f"rpc.{v}.latency", "µs", True, n) for v in variants}
        tput = {v: Series(f"rpc.{v}.throughput", "req/s", False, n) for v in variants}
        for i in range(sizes.rpc_warmup):
            await helper_once(i)
            await raw_once(i)
        for r in range(sizes.rounds):
            gc.collect()
            await interleaved_round(variants, n, sizes.chunk, r, lat, tput)
    finally:
        await client_bus.close()
        await server_bus.stop_serving(grace=2)
        await server_bus.close()
        await raw_client.close()
        await raw_server.close()

    note = "sequential request/reply, payload ~90 B; ratio = helper / raw"
    return [
        Entry("rpc", lat["helper"], lat["raw"], note),
        Entry("rpc", tput["helper"], tput["raw"], note),
    ]


# ---- (b) PostgreSQL physical limits --------------------------------------------------------


async def bench_pg_copy(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    import asyncpg

    now = datetime.now(UTC)
    records = [(i, f"row-{i:09d}-payload", now) for i in range(sizes.copy_rows)]
    columns = ["id", "body", "at"]
    conn = await asyncpg.connect(ctx.pg_url)
    try:
        await conn.execute("DROP TABLE IF EXISTS bench_copy, bench_copy_unlogged")
        await conn.execute("CREATE TABLE bench_copy (id bigint, body text, at timestamptz)")
        await conn.execute("CREATE UNLOGGED TABLE bench_copy_unlogged (id bigint, body text, at timestamptz)")
        logged = Series("pg.copy.logged", "rows/s", False, sizes.copy_rows)
        unlogged = Series("pg.copy.unlogged", "rows/s", False, sizes.copy_rows)

        def runner(table: str, series: Series) -> Callable[[], Awaitable[None]]:
            async def run_round() -> None:
                await conn.execute(f"TRUNCATE {table}")
                await conn.execute("CHECKPOINT")  # the previous round's dirty pages are not this one's cost
                start = time.perf_counter()
                await conn.copy_records_to_table(table, records=records, columns=columns)
                series.add_rate(len(records) / (time.perf_counter() - start))
            return run_round

        # warm-up: one small COPY each (plans, catalog caches, the relation's first extension)
        await conn.copy_records_to_table("bench_copy", records=records[:1000], columns=columns)
        await conn.copy_records_to_table("bench_copy_unlogged", records=records[:1000], columns=columns)
        logged_round = runner("bench_copy", logged)
        unlogged_round = runner("bench_copy_unlogged", unlogged)
        for r in range(sizes.rounds):
            for step in alternate(logged_round, unlogged_round, r):
                gc.collect()
                await step()
        await conn.execute("DROP TABLE bench_copy, bench_copy_unlogged")
    finally:
        await conn.close()
    return [Entry("pg_copy", logged, unlogged,
                  "copy_records_to_table (bigint, text, timestamptz) into a regular table; "
                  "ratio = regular / unlogged (the WAL's cost)")]


async def bench_pg_tx(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    import asyncpg

    insert = "INSERT INTO bench_tx (id, body, at) VALUES ($1, $2, now())"
    conn = await asyncpg.connect(ctx.pg_url)
    try:
        await conn.execute("DROP TABLE IF EXISTS bench_tx")
        await conn.execute("CREATE TABLE bench_tx (id bigint, body text, at timestamptz)")
        n = sizes.tx_count

        async def locked_tx(i: int) -> None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(42)")
                await conn.execute(insert, i, "locked")

        async def plain_tx(i: int) -> None:
            async with conn.transaction():
                await conn.execute(insert, i, "plain")

        async def autocommit(i: int) -> None:
            await conn.execute(insert, i, "autocommit")

        variants: dict[str, Op] = {
            "pg.tx.advisory_lock": locked_tx,
            "pg.tx.begin_insert_commit": plain_tx,
            "pg.tx.autocommit_insert": autocommit,
        }
        rates = {name: Series(name, "tx/s", False, n) for name in variants}
        latencies = {name: Series(name + ".latency", "µs", True, n) for name in variants}
        for once in variants.values():
            for i in range(sizes.tx_warmup):
                await once(i)
        for r in range(sizes.rounds):
            await conn.execute("TRUNCATE bench_tx")
            await conn.execute("CHECKPOINT")  # start every round with no dirty buffers to flush
            gc.collect()
            await interleaved_round(variants, n, sizes.chunk, r, latencies, rates)
        await conn.execute("DROP TABLE bench_tx")
    finally:
        await conn.close()

    base = rates["pg.tx.autocommit_insert"]

    def lat(name: str) -> dict[str, Any]:
        s = latencies[name]
        return {"latency_us": {"median": s.median, "p95": s.p95},
                "baseline_latency_us": {"median": latencies["pg.tx.autocommit_insert"].median,
                                        "p95": latencies["pg.tx.autocommit_insert"].p95}}

    return [
        Entry("pg_tx", rates["pg.tx.advisory_lock"], base,
              "one connection, BEGIN; SELECT pg_advisory_xact_lock(42); INSERT; COMMIT; "
              "ratio = this / autocommit INSERT", lat("pg.tx.advisory_lock")),
        Entry("pg_tx", rates["pg.tx.begin_insert_commit"], base,
              "one connection, BEGIN; INSERT; COMMIT (no lock): separates the lock from the "
              "transaction's extra round trips; ratio = this / autocommit INSERT", lat("pg.tx.begin_insert_commit")),
    ]
