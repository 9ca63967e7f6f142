"""Profile a service under a benchmark's load with py-spy (not part of the suite).

    .venv/bin/python -m bench.profile admissions [SESSIONS]   # spot-gate, 64 request_turns in flight
    .venv/bin/python -m bench.profile appends [APPENDS]       # gateway + backlog, 32 REST appends in flight

Starts embedded PostgreSQL and NATS and the services as their own processes (`zimmer serve`),
drives the load while `py-spy record` samples each service, prints the top of each profile (own
time and total time per function) and writes the raw stacks to bench/profiles/.

- admissions: seeds SESSIONS sessions (default 6,000) and drives 64 concurrent `request_turn`s.
- appends: APPENDS (default 6,000) `POST /api/v1/work_backlog_items` from 32 aiohttp callers,
  as `backlog_appends` does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.harness import BenchContext, Servers, ServiceProcess
from bench.spot_gate import ACCOUNTS, IN_FLIGHT, _fresh_db, _seed_sql
from zimmer_common.bus import Bus

OUT = Path(__file__).resolve().parent / "profiles"
CHUNK = 240  # appends between clearings of the queue: none re-spaces its band (see bench.backlog.COSTS)


def spy(pid: int, raw: Path) -> subprocess.Popen[bytes]:
    OUT.mkdir(exist_ok=True)
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--rate", "250",
                             "--format", "raw", "--output", str(raw), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(spies: list[subprocess.Popen[bytes]]) -> None:
    for s in spies:
        s.send_signal(2)
    for s in spies:
        s.wait(30)


async def drive_admissions(ctx: BenchContext, servers: Servers, sessions: int) -> tuple[str, list[Path]]:
    from bench.spot_gate import _runtime_messages
    from zimmer_common.contracts.spot import REQUEST_TURN, RequestTurn

    db = await _fresh_db(ctx.pg_url)
    ids = await _seed_sql(db, sessions, ACCOUNTS)
    service = ServiceProcess("spot-gate", ctx, db)
    client = await Bus.connect([ctx.nats_url], service="bench", instance_id="p", rpc_timeout=60)
    raw = OUT / "spot_admissions.raw"
    try:
        await service.ready(client)
        spies = [spy(service.proc.pid, raw)]
        await asyncio.sleep(1)
        queue = list(ids)
        before = await _runtime_messages(client)

        async def worker() -> None:
            while queue:
                await client.request(REQUEST_TURN, RequestTurn(session_id=queue.pop(), kind="first_start"))

        cpu_before = cpu_by_process([service], servers)
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        while await _runtime_messages(client) - before < sessions:  # end to end: every start_turn on the stream
            await asyncio.sleep(0.005)
        rate = sessions / (time.perf_counter() - started)
        cpu = {name: (t - cpu_before.get(name, 0.0)) / sessions * 1e3
               for name, t in cpu_by_process([service], servers).items()}
        stop(spies)
    finally:
        await client.close()
        service.stop()
    split = ", ".join(f"{name} {ms:.2f}" for name, ms in sorted(cpu.items(), key=lambda kv: -kv[1]))
    return (f"{rate:.0f} admissions/s end to end over {sessions} sessions, {IN_FLIGHT} in flight (py-spy sampling "
            f"slows the service)\nCPU ms per admission: {split}"), [raw]


async def drive_appends(ctx: BenchContext, servers: Servers, appends: int) -> tuple[str, list[Path]]:
    from bench.backlog import APPEND_PATH, COSTS, THROUGHPUT_APPENDERS, _clear_queue
    from bench.http_clients import http_session
    from zimmer_cli.embedded import free_port

    db = await _fresh_db(ctx.pg_url)
    port = free_port()
    metrics_port = free_port()
    services = [ServiceProcess("backlog", ctx, db, ZIMMER_METRICS_PORT=str(metrics_port),
                               ZIMMER_METRICS_HOST="127.0.0.1"),
                ServiceProcess("gateway", ctx, db, ZIMMER_HTTP_PORT=str(port), ZIMMER_HTTP_HOST="127.0.0.1",
                               ZIMMER_API_KEY="bench-key", ZIMMER_OPERATOR_TOKEN="bench-operator")]
    client = await Bus.connect([ctx.nats_url], service="bench", instance_id="p", rpc_timeout=60)
    http = http_session(THROUGHPUT_APPENDERS, f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer bench-key"})
    raws = [OUT / f"appends_{s.name}.raw" for s in services]
    try:
        for service in services:
            await service.ready(client)
        spies = [spy(s.proc.pid, raw) for s, raw in zip(services, raws, strict=True)]
        await asyncio.sleep(1)

        async def worker(numbers: Iterator[int]) -> None:
            for n in numbers:
                body = {"key": f"p#{n}", "issue_url": f"https://github.com/acme/p/issues/{n}",
                        "estimated_cost": COSTS[n % len(COSTS)]}
                async with http.post(APPEND_PATH, json=body) as resp:
                    if resp.status != 201:
                        raise RuntimeError(f"append answered {resp.status}: {(await resp.read())[:300]!r}")

        elapsed = 0.0
        cpu_before = cpu_by_process(services, servers)
        for first in range(1, appends + 1, CHUNK):  # the queue is cleared between chunks: bands never fill
            await _clear_queue(db)
            numbers = iter(range(first, min(first + CHUNK, appends + 1)))
            started = time.perf_counter()
            await asyncio.gather(*(worker(numbers) for _ in range(THROUGHPUT_APPENDERS)))
            elapsed += time.perf_counter() - started
        rate = appends / elapsed
        cpu = {name: (t - cpu_before.get(name, 0.0)) / appends * 1e3 for name, t in cpu_by_process(services, servers).items()}
        batches = await mean_batch(f"http://127.0.0.1:{metrics_port}/metrics")
        stop(spies)
    finally:
        await http.close()
        await client.close()
        for service in services:
            service.stop()
    split = ", ".join(f"{name} {ms:.2f}" for name, ms in sorted(cpu.items(), key=lambda kv: -kv[1]))
    return (f"{rate:.0f} REST appends/s over {appends} appends, {THROUGHPUT_APPENDERS} in flight "
            f"(py-spy sampling slows the services)\nCPU ms per append (whole run, queue clearing included): {split}"
            f"\nappends per batch transaction: {batches}"), raws


async def mean_batch(url: str) -> str:
    """Mean and count of the backlog's append batches, from its own zimmer_batch_size histogram."""
    import httpx

    async with httpx.AsyncClient() as http:
        text = (await http.get(url)).text
    values = {}
    for line in text.splitlines():
        if line.startswith("zimmer_batch_size_") and 'batcher="appends"' in line:
            values[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
    count, total = values.get("zimmer_batch_size_count", 0.0), values.get("zimmer_batch_size_sum", 0.0)
    return f"{total / count:.1f} on average over {count:.0f} batches" if count else "no batch observed"


def cpu_by_process(services: list[ServiceProcess], servers: Servers) -> dict[str, float]:
    """CPU seconds so far of each service, this (client) process, and this run's own nats-server
    and PostgreSQL (the postmaster and its backends, live and exited). Only ours: on a shared box
    other people's test servers have the same process names."""
    import psutil

    named = {s.name: psutil.Process(s.proc.pid) for s in services} | {"client (bench)": psutil.Process()}
    if servers.nats is not None:
        named["nats-server"] = psutil.Process(servers.nats.process.pid)
    totals = {name: sum(p.cpu_times()[:2]) for name, p in named.items()}
    if servers.pg_dir is not None:
        postmaster = psutil.Process(int((servers.pg_dir / "postmaster.pid").read_text().split()[0]))
        own = postmaster.cpu_times()
        totals["postgresql"] = own.user + own.system + own.children_user + own.children_system  # + exited backends
        for backend in postmaster.children():
            with contextlib.suppress(psutil.Error):
                totals["postgresql"] += sum(backend.cpu_times()[:2])
    return totals


def top(raw: Path, n: int = 25) -> str:
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        samples += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            total[frame] += int(count)
    lines = [f"{samples} samples", "own time:"]
    lines += [f"  {c * 100 / samples:5.1f}%  {f}" for f, c in own.most_common(n)]
    lines += ["total time (inclusive):"]
    lines += [f"  {c * 100 / samples:5.1f}%  {f}" for f, c in total.most_common(n)]
    return "\n".join(lines)


SUBJECTS = {"admissions": drive_admissions, "appends": drive_appends}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in SUBJECTS:
        sys.exit(f"usage: python -m bench.profile {{{'|'.join(SUBJECTS)}}} [N]")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
    servers = Servers()
    ctx = BenchContext()
    try:
        ctx.pg_url = servers.start_pg()
        ctx.nats_url = servers.start_nats()
        summary, raws = asyncio.run(SUBJECTS[sys.argv[1]](ctx, servers, n))
    finally:
        servers.stop()
    print(summary)
    for raw in raws:
        print(f"\n== {raw.name}\n{top(raw)}")


if __name__ == "__main__":
    main()
