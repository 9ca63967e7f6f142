"""Profile spot-gate under the admissions benchmark's load with py-spy (not part of the suite).

    .venv/bin/pip install py-spy
    .venv/bin/python -m bench.profile_admissions [SESSIONS]

Starts embedded PostgreSQL and NATS, one `zimmer serve spot-gate` process, seeds SESSIONS
sessions (default 6,000), and drives 64 concurrent `request_turn`s through them while
`py-spy record` samples the service; prints the top of the profile (own time and total time per
function) and writes the raw stacks to bench/profiles/.
"""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import BenchContext, Servers, ServiceProcess
from bench.spot_gate import ACCOUNTS, IN_FLIGHT, _fresh_db, _seed_sql

OUT = Path(__file__).resolve().parent / "profiles"


async def drive(ctx: BenchContext, sessions: int) -> tuple[float, Path]:
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.spot import REQUEST_TURN, RequestTurn

    db = await _fresh_db(ctx.pg_url)
    ids = await _seed_sql(db, sessions, ACCOUNTS)
    service = ServiceProcess("spot-gate", ctx, db)
    client = await Bus.connect([ctx.nats_url], service="bench", instance_id="p", rpc_timeout=60)
    OUT.mkdir(exist_ok=True)
    raw = OUT / "spot_admissions.raw"
    try:
        await service.ready(client)
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(service.proc.pid),
                                "--rate", "250", "--format", "raw", "--output", str(raw), "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await asyncio.sleep(1)
        queue = list(ids)

        async def worker() -> None:
            while queue:
                await client.request(REQUEST_TURN, RequestTurn(session_id=queue.pop(), kind="first_start"))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        rate = sessions / (time.perf_counter() - started)
        spy.send_signal(2)
        spy.wait(30)
    finally:
        await client.close()
        service.stop()
    return rate, raw


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


def main() -> None:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
    servers = Servers()
    ctx = BenchContext()
    try:
        ctx.pg_url = servers.start_pg()
        ctx.nats_url = servers.start_nats()
        rate, raw = asyncio.run(drive(ctx, sessions))
    finally:
        servers.stop()
    print(f"{rate:.0f} admissions/s over {sessions} sessions, {IN_FLIGHT} in flight")
    print(top(raw))


if __name__ == "__main__":
    main()
