"""The stacks a scenario runs against (`zimmer sim --scenario`): one it starts itself (`zimmer up
--no-sim` on a fresh data directory, whose processes it may kill and stop), or a running one it is
pointed at (only the questions any operator may ask: run a job now, is it ready)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from zimmer_cli.embedded import die_with_parent, free_port, reserve_port
from zimmer_cli.jobs_cmd import run_job
from zimmer_common.tls import client_tls

READY_SECONDS = 180.0
SIM_HOST = "sim-host"  # the sweeper's host name in an owned stack, and the fleet's clones' host
GITHUB_TOKEN = "sim-github-token"


class ExternalStack:
    owned = False

    def __init__(self, nats_url: str, url: str | None, clones_dir: Path | None = None):
        self.nats_url, self.url, self.clones_dir = nats_url, url, clones_dir

    async def run_job(self, key: str) -> None:
        await run_job(self.nats_url, key)

    async def signal(self, name: str, sig: int) -> None:
        raise RuntimeError("a stack the scenario did not start is never killed: run it without --url")

    async def wait_ready(self, timeout: float) -> bool:
        if self.url is None:
            return True
        return await asyncio.to_thread(_ready_within, self.url, timeout)

    def free_bytes(self) -> int:
        return free_bytes(self.clones_dir or Path("."))


class OwnedStack(ExternalStack):
    """`zimmer up --no-sim` in a subprocess on `root`; the fleet serves GitHub on `github_port`."""

    owned = True

    def __init__(self, root: Path, env: dict[str, str] | None = None):
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.data = root, root / "data"
        self.port = free_port()
        # The fleet's fake GitHub binds its port minutes later (the stack starts while the scenario
        # before runs): held until then, and shared with the fake (SO_REUSEPORT) when it binds.
        self._github_hold: socket.socket | None = reserve_port()
        self.github_port = int(self._github_hold.getsockname()[1])
        self.github_port_shared = True
        self.extra_env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        super().__init__("", f"http://127.0.0.1:{self.port}", self.data / "runtime" / "clones")

    @property
    def transcripts_dir(self) -> Path:
        return self.data / "runtime" / "transcripts"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZIMMER_")}
        env.update(ZIMMER_SIM="off", ZIMMER_HOST=SIM_HOST, ZIMMER_GITHUB_TOKEN=GITHUB_TOKEN,
                   ZIMMER_GITHUB_API_URL=f"http://127.0.0.1:{self.github_port}", **self.extra_env)
        with open(self.root / "zimmer-up.log", "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "zimmer_cli", "up", "--no-sim", "--data-dir", str(self.data),
                 "--port", str(self.port)], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
                # A killed driver leaves no stack running. Not from a helper thread: the death signal
                # follows the thread that forked, and a prefetching thread ends long before the run.
                preexec_fn=die_with_parent if threading.current_thread() is threading.main_thread() else None)
        if not _ready_within(self.url, READY_SECONDS, self.proc):
            self.stop()
            raise RuntimeError(f"the scenario's stack was not ready within {READY_SECONDS:g}s; "
                               f"see {self.root / 'zimmer-up.log'} and {self.data / 'logs'}")
        self.nats_url = self._runtime()["nats_url"]

    def _runtime(self) -> dict:  # type: ignore[type-arg]  # the runtime's JSON status, any shape
        return json.loads((self.data / "runtime.json").read_text())

    async def signal(self, name: str, sig: int) -> None:
        runtime = self._runtime()
        entry = runtime.get("servers", {}).get(name) or runtime.get("services", {}).get(name)
        if not entry or not entry.get("pid"):
            raise RuntimeError(f"no running process named {name!r} in the scenario's stack")
        os.kill(int(entry["pid"]), sig)

    async def wait_ready(self, timeout: float) -> bool:
        await asyncio.sleep(1.0)  # a kill is noticed by the supervisor, not at once by /readyz
        return await asyncio.to_thread(_ready_within, self.url, timeout, self.proc)

    def rss(self) -> dict[str, int]:
        """Resident bytes of each server and service now. PostgreSQL is its postmaster and every
        backend, summed as PSS: each of them maps the same shared buffers, which RSS would count
        once per backend."""
        import psutil

        runtime, found = self._runtime(), {}
        for name, entry in {**runtime.get("servers", {}), **runtime.get("services", {})}.items():
            try:
                proc = psutil.Process(int(entry["pid"]))
                if name == "postgres":
                    found[name] = sum(p.memory_full_info().pss for p in [proc, *proc.children(recursive=True)])
                else:
                    found[name] = proc.memory_info().rss
            except (psutil.Error, KeyError, TypeError, ValueError):
                continue
        return found

    def stop(self) -> None:
        if self._github_hold is not None:
            self._github_hold.close()
            self._github_hold = None
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def free_bytes(path: Path) -> int:
    """Free bytes an unprivileged writer may still use on the volume holding `path`."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _ready_within(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/readyz", timeout=3, verify=client_tls()).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False
