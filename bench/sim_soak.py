"""The soak benchmark (issue 28 #4): `zimmer sim --scenario steady` for an hour on a stack of its own,
reporting what the whole system sustains and whether any process grows.

Figures, each beside a baseline measured in the same run:
- turns/min sustained, and the share of asked-for turns that started (the fleet's own offered load
  is the baseline: a gate that keeps up starts what it admits);
- request_turn p99 as a ratio to a raw nats-py request/reply p99 on the same NATS server (an echo
  responder in this process: the physical floor of one round trip);
- each process's RSS after warm-up and at the end, and its growth (target: at most 10 %).

    .venv/bin/python -m bench.sim_soak [--minutes 60] [--seed 1]

Writes bench/results/sim_soak-<UTC stamp>.json. Exit 1 when an invariant was violated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nats

from bench.harness import machine_info, percentile
from zimmer_cli.scenario_cmd import run_scenario
from zimmer_cli.scenario_stack import OwnedStack

RESULTS = Path(__file__).resolve().parent / "results"
ECHO_REQUESTS = 2_000
RSS_GROWTH_TARGET_PCT = 10.0


async def raw_request_p99(url: str, n: int = ECHO_REQUESTS) -> float:
    """p99 seconds of a bare nats-py request to an echo responder on the same server."""
    nc = await nats.connect(url)
    try:
        async def echo(msg: Any) -> None:
            await msg.respond(msg.data)

        await nc.subscribe("bench.soak.echo", cb=echo)
        await nc.flush()
        body, took = b"x" * 256, []
        for _ in range(n):
            t0 = time.perf_counter()
            await nc.request("bench.soak.echo", body, timeout=5)
            took.append(time.perf_counter() - t0)
        return percentile(took, 99)
    finally:
        await nc.close()


async def soak(stack: OwnedStack, minutes: float, seed: int) -> dict[str, Any]:
    floor_before = await raw_request_p99(stack.nats_url)
    result = await run_scenario("steady", short=False, minutes=minutes, seed=seed, stack=stack)
    floor_after = await raw_request_p99(stack.nats_url)
    fleet = result["fleet"]
    floor_ms = 1000 * max(floor_before, floor_after)  # the noisier of the two: the ratio errs low
    asked = fleet["outcomes"].get("admitted", 0) + fleet["outcomes"].get("passed", 0) + \
        fleet["outcomes"].get("held", 0) + fleet["outcomes"].get("queued", 0)
    p99 = fleet["request_turn_p99_ms"]
    return {
        "benchmark": "sim_soak", "at": datetime.now(UTC).isoformat(), "machine": machine_info(),
        "minutes": result["minutes"], "seed": seed, "passed": result["passed"],
        "turns_per_min": round(fleet["turns"] / max(result["minutes"], 1e-9), 1),
        "turns_started_per_turn_asked": round(fleet["turns"] / asked, 3) if asked else None,
        "request_turn_p99_ms": p99, "raw_nats_request_p99_ms": round(floor_ms, 3),
        "request_turn_p99_ratio": round(p99 / floor_ms, 1) if p99 and floor_ms else None,
        "rss": result["rss"],
        "rss_growth_over_target": sorted(p for p, r in result["rss"].items()
                                         if r["growth_pct"] is not None and r["growth_pct"] > RSS_GROWTH_TARGET_PCT),
        "invariants": result["invariants"], "fleet": fleet, "table": result["table"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    stack = OwnedStack(Path(tempfile.mkdtemp(prefix="zimmer-soak-")))
    stack.start()
    try:
        report = asyncio.run(soak(stack, args.minutes, args.seed))
    finally:
        stack.stop()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"sim_soak-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(report["table"])
    print(f"turns/min {report['turns_per_min']}  started/asked {report['turns_started_per_turn_asked']}  "
          f"request_turn p99 {report['request_turn_p99_ms']} ms = {report['request_turn_p99_ratio']}x raw NATS p99 "
          f"({report['raw_nats_request_p99_ms']} ms)")
    for proc, r in report["rss"].items():
        print(f"  {proc:10s} RSS {r['warm_mb']} -> {r['end_mb']} MB ({r['growth_pct']} %)")
    print(f"written to {path}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
