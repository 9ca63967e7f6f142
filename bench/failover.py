"""The failover suite's long form (issue 29): `zimmer up --cluster` under steady load for about ten
minutes, three kill rounds, and the figures the short form (tests/e2e/test_failover.py) only bounds.

Load: three writers, appends and spawns alternating the two gateways, each with an Idempotency-Key
and retried with it after every 503 until a 2xx. A round SIGKILLs the node leading ZIMMER_EVENTS
(in round one also the JetStream meta leader's, when another node holds it), then one replica of a
service (backlog, spot-gate, gateway in turn), and in the last round PostgreSQL; the supervisor
restarts each.

Figures, each beside a baseline measured in the same run:
- writes acknowledged against writes present (items and sessions, each exactly once);
- election: from a stream leader's kill until ZIMMER_EVENTS acknowledges a publish again, and the
  killed node's restart and catch-up (every replica of every stream current again);
- write latency p99 (first attempt to 2xx, retries included) in steady state and during failover
  (from a kill until 20 s after it), each as a ratio to a bare nats-py request/reply p99 on the
  same cluster (the physical floor of one round trip), and failover p99 / steady p99;
- peak RSS (VmHWM) of each process at the end, and of this process.

    .venv/bin/python -m bench.failover [--minutes 10] [--rounds 3]

Writes bench/results/failover-<UTC stamp>.json. Exit 1 when an acknowledged write is missing or
doubled, or a round could not measure what it kills.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.failover_load import ITEMS, SESSIONS, Writes, every_row
from bench.failover_probe import connect, stream_leader, time_to_catch_up, time_to_write, time_until_answers
from bench.harness import machine_info, peak_rss_mb, percentile, vm_hwm_mb
from bench.sim_soak import raw_request_p99
from zimmer_cli.embedded import free_port, port_open

RESULTS = Path(__file__).resolve().parent / "results"
READY_DEADLINE = 180.0
FAILOVER_WINDOW = 20.0  # seconds after a kill whose writes count as "during failover"
REPLICAS = ("backlog-1", "spot-gate-2", "gateway-2")  # one per round, in turn


class Cluster:
    """One `zimmer up --cluster --no-sim` of its own, in a temporary directory."""

    def __init__(self, root: Path):
        self.data_dir = root / "data"
        self.port = free_port()
        while port_open("127.0.0.1", self.port + 1):
            self.port = free_port()
        self.urls = [f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.port + 1}"]
        self.out = open(root / "zimmer-up.out", "wb")  # noqa: SIM115 - closed in stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZIMMER_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "zimmer_cli", "up", "--cluster", "--no-sim", "--data-dir", str(self.data_dir),
             "--port", str(self.port)], env={**env, "ZIMMER_SIM": "off"}, stdin=subprocess.DEVNULL,
            stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)

    def runtime(self) -> dict[str, Any]:
        try:
            return json.loads((self.data_dir / "runtime.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait_ready(self) -> dict[str, Any]:
        end = time.monotonic() + READY_DEADLINE
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zimmer up exited with {self.proc.returncode}:\n{self.tail()}")
            rt = self.runtime()
            if (rt.get("cluster") and all(s.get("ready") for n, s in rt["servers"].items() if n.startswith("nats"))
                    and all(_ready(url) for url in self.urls)):
                return rt
            time.sleep(0.5)
        raise RuntimeError(f"the cluster was not ready within {READY_DEADLINE:g}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        """The end of zimmer up's output (the temporary directory is gone once the run ends)."""
        self.out.flush()
        return "\n".join(Path(self.out.name).read_text(errors="replace").splitlines()[-lines:])

    def kill(self, name: str) -> float:
        rt = self.runtime()
        pid = (rt["services"].get(name) or rt["servers"].get(name) or {}).get("pid")
        if not pid:
            raise RuntimeError(f"no pid for {name} in runtime.json")
        os.kill(pid, signal.SIGKILL)
        return time.monotonic()

    def peak_rss(self) -> dict[str, float | None]:
        rt = self.runtime()
        named = {**{n: s.get("pid") for n, s in rt.get("servers", {}).items()},
                 **{n: s.get("pid") for n, s in rt.get("services", {}).items()}}
        return {name: vm_hwm_mb(pid) for name, pid in sorted(named.items()) if pid}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.out.close()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


def _meta_leader(rt: dict[str, Any]) -> str | None:
    for name, node in rt["servers"].items():
        if name.startswith("nats"):
            try:
                return str(httpx.get(f"{node['monitor_url']}/jsz", timeout=2).json()["meta_cluster"]["leader"])
            except (httpx.HTTPError, KeyError, ValueError):
                continue
    return None


async def _round(cluster: Cluster, number: int, last: bool, pause: float) -> dict[str, Any]:
    rt = cluster.runtime()
    nodes = [n for n in rt["servers"] if n.startswith("nats")]
    nc = await connect([rt["servers"][n]["url"] for n in nodes])
    try:
        leader = await stream_leader(nc)
        if leader not in nodes:
            raise RuntimeError(f"round {number}: ZIMMER_EVENTS names no leader among {nodes} ({leader!r})")
        meta = _meta_leader(rt)
        round_: dict[str, Any] = {"round": number, "events_leader": leader, "meta_leader": meta, "kills": []}
        killed_at = cluster.kill(leader)
        round_["kills"].append({"what": f"{leader} (ZIMMER_EVENTS leader{', meta leader' if meta == leader else ''})",
                                "at": killed_at})
        round_["election_s"], round_["restart_s"] = await asyncio.gather(
            time_to_write(nc, killed_at), time_until_answers(rt["servers"][leader]["monitor_url"], killed_at))
        round_["catch_up_s"] = (await time_to_catch_up(nc, killed_at + round_["restart_s"])
                                if round_["restart_s"] is not None else None)
        await asyncio.sleep(pause)
        victims = [REPLICAS[(number - 1) % len(REPLICAS)]] + (["postgres"] if last else [])
        for victim in victims:
            round_["kills"].append({"what": victim, "at": cluster.kill(victim)})
            await asyncio.sleep(pause)
        return round_
    finally:
        await nc.close()


def _p99(latencies: list[float]) -> float | None:
    return round(1000 * percentile(latencies, 99), 2) if latencies else None


async def run(minutes: float, rounds: int, root: Path) -> dict[str, Any]:
    cluster = Cluster(root)
    try:
        rt = cluster.wait_ready()
        creds = json.loads((cluster.data_dir / "credentials.json").read_text())
        nats_urls = [s["url"] for n, s in rt["servers"].items() if n.startswith("nats")]
        floor_before = await raw_request_p99(nats_urls[0])
        writes = Writes(cluster.urls, creds["api_key"])
        writes.start()
        started = time.monotonic()
        budget = minutes * 60
        warmup = min(60.0, budget / (rounds + 2))
        await asyncio.sleep(warmup)
        per_round = (budget - 2 * warmup) / rounds
        results = []
        for n in range(1, rounds + 1):
            t0 = time.monotonic()
            results.append(await _round(cluster, n, n == rounds, pause=min(20.0, per_round / 6)))
            await asyncio.sleep(max(0.0, per_round - (time.monotonic() - t0)))
        await asyncio.sleep(max(0.0, budget - (time.monotonic() - started)))
        writes.finish()
        for url in cluster.urls:
            while not _ready(url):
                await asyncio.sleep(0.5)
        floor_after = await raw_request_p99(nats_urls[0])
        floor_ms = 1000 * max(floor_before, floor_after)
        present = _present(cluster, creds["operator_token"], writes)
        kills = [k["at"] for r in results for k in r["kills"]]
        during = [w.latency for w in writes.done if any(0 <= w.started - k <= FAILOVER_WINDOW for k in kills)]
        steady = [w.latency for w in writes.done if all(not 0 <= w.started - k <= FAILOVER_WINDOW for k in kills)]
        steady_p99, failover_p99 = _p99(steady), _p99(during)
        for r in results:
            for k in r["kills"]:
                k["at_s"] = round(k.pop("at") - started, 1)
        return {
            "benchmark": "failover", "at": datetime.now(UTC).isoformat(), "machine": machine_info(),
            "minutes": round((time.monotonic() - started) / 60, 1), "rounds": results,
            "answers": dict(writes.statuses), "unfinished": writes.unfinished, "refused": writes.refused,
            **present, "retried": sum(1 for w in writes.done if w.attempts > 1),
            "raw_nats_request_p99_ms": round(floor_ms, 3),
            "steady_write_p99_ms": steady_p99, "failover_write_p99_ms": failover_p99,
            "steady_p99_over_raw_nats": round(steady_p99 / floor_ms, 1) if steady_p99 else None,
            "failover_p99_over_raw_nats": round(failover_p99 / floor_ms, 1) if failover_p99 else None,
            "failover_p99_over_steady": round(failover_p99 / steady_p99, 1) if steady_p99 and failover_p99 else None,
            "peak_rss_mb": cluster.peak_rss(), "bench_peak_rss_mb": round(peak_rss_mb(), 1),
        }
    finally:
        cluster.stop()


def _present(cluster: Cluster, token: str, writes: Writes) -> dict[str, Any]:
    """Acknowledged writes against what the services hold: each exactly once."""
    headers = {"Authorization": f"Bearer {token}"}
    keys = Counter(i["key"] for i in every_row(cluster.urls[0] + ITEMS, "items", headers, 1000))
    titles = Counter(s["title"] for s in every_row(cluster.urls[1] + SESSIONS, "sessions", headers, 500,
                                                   genesis="schedule"))
    appended = [w for w in writes.done if w.path == ITEMS]
    spawned = [w for w in writes.done if w.path == SESSIONS]
    return {"appends_acknowledged": len(appended), "appends_present_once": sum(keys[w.body["key"]] == 1 for w in appended),
            "spawns_acknowledged": len(spawned), "spawns_present_once": sum(titles[w.key] == 1 for w in spawned)}


def _table(report: dict[str, Any]) -> str:
    lines = [f"failover: {report['minutes']} min, {len(report['rounds'])} rounds; answers {report['answers']}",
             f"  appends {report['appends_present_once']}/{report['appends_acknowledged']} present once, spawns "
             f"{report['spawns_present_once']}/{report['spawns_acknowledged']}; {report['retried']} after a retry; "
             f"unfinished {len(report['unfinished'])}",
             "  round  killed                                  election s  restart s  catch-up s"]
    for r in report["rounds"]:
        lines.append(f"  {r['round']:>5}  {r['kills'][0]['what']:<40} {r['election_s']!s:>10}  {r['restart_s']!s:>9}  "
                     f"{r['catch_up_s']!s:>10}   then {', '.join(k['what'] for k in r['kills'][1:])}")
    lines += [f"  write p99: steady {report['steady_write_p99_ms']} ms ({report['steady_p99_over_raw_nats']}x raw NATS "
              f"{report['raw_nats_request_p99_ms']} ms), failover {report['failover_write_p99_ms']} ms "
              f"({report['failover_p99_over_raw_nats']}x raw, {report['failover_p99_over_steady']}x steady)",
              f"  peak RSS MB: {report['peak_rss_mb']}; this process {report['bench_peak_rss_mb']}"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the figures, write no JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zimmer-failover-") as root:
        report = asyncio.run(run(args.minutes, args.rounds, Path(root)))
    print(_table(report))
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"failover-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
        path.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {path}")
    whole = (report["appends_present_once"] == report["appends_acknowledged"]
             and report["spawns_present_once"] == report["spawns_acknowledged"])
    measured = all(r["election_s"] is not None and r["catch_up_s"] is not None for r in report["rounds"])
    return 0 if whole and measured and not report["unfinished"] else 1


if __name__ == "__main__":
    sys.exit(main())
