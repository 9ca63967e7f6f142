"""`zimmer up --cluster` end to end: three real NATS nodes routed on loopback, two replicas of each
service, two gateways, a sweeper per simulated host, one embedded PostgreSQL.

It comes up and `zimmer status` lists every node and replica; what one gateway writes the other
reads; then the JetStream meta leader's node and one spot-gate replica are SIGKILLed, and the
API keeps answering (spawn and append within RECOVERY_DEADLINE) while the supervisor brings both
back. Every wait is a poll loop with a deadline that fails with the logs (tests/e2e/test_zimmer_up.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from test_zimmer_up import CLI_DEADLINE, ITEMS, RESTART_DEADLINE, Run, _clean_env, _gone

pytestmark = pytest.mark.e2e

CLUSTER_READY_DEADLINE = 150.0  # eleven Python processes and three NATS nodes on a 2-core machine
RECOVERY_DEADLINE = 30.0
NODES = ("nats-1", "nats-2", "nats-3")
PROCESSES = ("backlog-1", "backlog-2", "spot-gate-1", "spot-gate-2", "sweeper-host-a", "sweeper-host-b",
             "alerts-1", "alerts-2", "gateway-1", "gateway-2")


class ClusterRun(Run):
    """`zimmer up --cluster --no-sim`: gateways on `port` and `port + 1`."""

    def __init__(self, data_dir: Path, out_dir: Path, label: str):
        super().__init__(data_dir, out_dir, label)
        while _port_taken(self.port + 1):
            super().__init__(data_dir, out_dir, label)
        self.urls = [self.url, f"http://127.0.0.1:{self.port + 1}"]

    def start(self) -> None:
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "zimmer_cli", "up", "--cluster", "--no-sim", "--data-dir", str(self.data_dir),
                 "--port", str(self.port)],
                env=_clean_env(sim=False), cwd=self.data_dir.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True)

    def ready_at(self, url: str) -> bool:
        try:
            return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_cluster_ready(self) -> dict[str, Any]:
        self.wait_for('"Zimmer is up" naming both gateways on stdout',
                      lambda: f"Zimmer is up: {self.urls[0]} and {self.urls[1]}" in self.stdout(), CLUSTER_READY_DEADLINE)
        for url in self.urls:
            self.wait_for(f"GET {url}/readyz == 200", lambda url=url: self.ready_at(url), CLUSTER_READY_DEADLINE)

        def complete() -> dict[str, Any] | None:
            runtime = self.runtime()
            if (runtime and runtime.get("cluster") and all(runtime["services"].get(n, {}).get("pid") for n in PROCESSES)
                    and all(runtime["servers"].get(n, {}).get("ready") for n in NODES)):
                return runtime
            return None

        runtime = self.wait_for("runtime.json with every node and replica", complete, CLUSTER_READY_DEADLINE)
        self.remember(runtime)
        return runtime


def _port_taken(port: int) -> bool:
    from zimmer_cli.embedded import port_open

    return port_open("127.0.0.1", port)


def _meta_leader(runtime: dict[str, Any]) -> str:
    """The node the JetStream meta leader runs on, as one node's monitoring endpoint says."""
    monitor = runtime["servers"]["nats-1"]["monitor_url"]
    leader = httpx.get(f"{monitor}/jsz", timeout=5).json()["meta_cluster"]["leader"]
    assert leader in NODES, leader
    return str(leader)


def test_zimmer_up_cluster_survives_a_killed_nats_node_and_replica(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    run = ClusterRun(data_dir, tmp_path, "cluster")
    try:
        started = time.monotonic()
        run.start()
        runtime = run.wait_cluster_ready()
        print(f"cluster ready in {time.monotonic() - started:.1f}s")
        stdout = run.stdout()
        for node in NODES:
            assert f"  {node}: client {runtime['servers'][node]['client_port']}, routes " in stdout, stdout
        assert runtime["nats_url"].count(",") == 2 and runtime["gateway_urls"] == run.urls

        # 1. `zimmer status` lists each node and each replica, and every service answers.
        status = subprocess.run([sys.executable, "-m", "zimmer_cli", "status", "--data-dir", str(data_dir)],
                                env=_clean_env(), capture_output=True, text=True, timeout=CLI_DEADLINE)
        assert status.returncode == 0, f"zimmer status failed:\n{status.stdout}\n{status.stderr}\n{run.logs()}"
        first_words = [line.split()[0] for line in status.stdout.splitlines() if line.split()]
        for name in (*NODES, *PROCESSES, "postgres"):
            assert first_words.count(name) == 1, f"{name} not listed once:\n{status.stdout}"
        assert status.stdout.count("ping ok") == 5, status.stdout
        sweepers = [line for line in status.stdout.splitlines() if line.startswith("sweeper-host-")]
        assert "host host-a" in sweepers[0] and "host host-b" in sweepers[1], status.stdout

        # 2. What one gateway writes, the other reads.
        api_key = json.loads((data_dir / "credentials.json").read_text())["api_key"]
        headers = {"Authorization": f"Bearer {api_key}"}
        item = {"key": "zimmer#1", "issue_url": "https://github.com/acme/zimmer/issues/1", "estimated_cost": "small",
                "title": "written through the first gateway"}
        appended = httpx.post(f"{run.urls[0]}{ITEMS}", json=item, headers=headers, timeout=15)
        assert appended.status_code == 201, appended.text
        listed = httpx.get(f"{run.urls[1]}{ITEMS}", headers=headers, timeout=15)
        assert listed.status_code == 200 and "zimmer#1" in [i["key"] for i in listed.json()["items"]], listed.text

        # 3. SIGKILL the meta leader's NATS node and one spot-gate replica.
        node = _meta_leader(runtime)
        victims = {node: runtime["servers"][node]["pid"], "spot-gate-1": runtime["services"]["spot-gate-1"]["pid"]}
        killed_at = time.monotonic()
        for pid in victims.values():
            os.kill(pid, signal.SIGKILL)

        # 4. The API still spawns and appends, through either gateway.
        attempts: list[str] = []

        def spawn_and_append() -> bool:
            n = len(attempts) + 2
            url = run.urls[n % 2]
            spawned = httpx.post(f"{url}/api/v1/sessions", json={"genesis": "schedule", "precedence": 5,
                                                                  "start": False}, headers=headers, timeout=10)
            added = httpx.post(f"{url}{ITEMS}", json={**item, "key": f"zimmer#{n}", "title": "after the kill",
                                                      "issue_url": f"https://github.com/acme/zimmer/issues/{n}"},
                               headers=headers, timeout=10)
            attempts.append(f"{url}: spawn {spawned.status_code}, append {added.status_code}")
            return spawned.status_code == 201 and added.status_code == 201

        run.wait_for("a spawn and an append to succeed after the kills", spawn_and_append, RECOVERY_DEADLINE,
                     interval=0.5)
        print(f"served again {time.monotonic() - killed_at:.1f}s after the kills: {attempts}")

        # 5. The supervisor restarted both: new pids, restarts counted, the node ready again.
        def restarted() -> dict[str, Any] | None:
            now = run.runtime() or {}
            server = now.get("servers", {}).get(node, {})
            replica = now.get("services", {}).get("spot-gate-1", {})
            if (server.get("ready") and server.get("pid") != victims[node] and server.get("restarts", 0) >= 1
                    and replica.get("pid") and replica["pid"] != victims["spot-gate-1"]
                    and replica.get("restarts", 0) >= 1):
                return now
            return None

        after = run.wait_for(f"runtime.json to show {node} and spot-gate-1 restarted", restarted, RESTART_DEADLINE)
        run.remember(after)
        for url in run.urls:
            run.wait_for(f"GET {url}/readyz == 200 after the restarts", lambda url=url: run.ready_at(url),
                         RECOVERY_DEADLINE)

        # 6. SIGTERM stops every node and replica.
        owned = [psutil.Process(info["pid"]) for info in (*after["services"].values(), *after["servers"].values())]
        assert run.stop() == 0, f"zimmer up exited non-zero\n{run.logs()}"
        run.wait_for("every process of the cluster to be gone", lambda: all(_gone(p) for p in owned), 10.0,
                     while_running=False)
        assert not (data_dir / "runtime.json").exists()
    finally:
        run.kill_everything()
