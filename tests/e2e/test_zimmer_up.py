"""`zimmer up` end to end: the real command, real embedded PostgreSQL and NATS, five real services.

The first test goes in the order a user meets the system: it comes up, answers, survives a
killed child, stops cleanly without leaving anything behind, and a second start on the same
data directory reuses what the first one made. The second kills the embedded servers under
light load (SIGKILL to nats-server, then to the postmaster) and watches the supervisor bring
each back and the system answer again on its own; it prints the measured recovery times.
Every wait is a poll loop with a deadline; when a deadline passes the test fails with the tail
of the supervisor's output and of DIR/logs/*.log. No assertion is made on a duration.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
import pytest

from zimmer_cli.registry import START_ORDER

pytestmark = pytest.mark.e2e

READY_DEADLINE = 60.0  # generous: a noisy 2-core machine starts five Python services slowly
RESTART_DEADLINE = 30.0
STOP_DEADLINE = 15.0  # upper bound only
CLI_DEADLINE = 60.0
OUTAGE_DEADLINE = 90.0  # from the SIGKILL of a server until the API answers 2xx again
EVENT_FLOW_DEADLINE = 60.0
TAIL_LINES = 40
ITEMS = "/api/v1/work_backlog_items"

T = TypeVar("T")


def _free_port() -> int:
    from zimmer_cli.embedded import free_port

    return free_port()  # below the ephemeral range: a restart binds it again under load


def _clean_env(sim: bool = False) -> dict[str, str]:
    """The caller's environment minus every ZIMMER_* variable, so the command uses its embedded servers,
    and without the simulated fleet unless asked (tests/web/test_first_run.py is the run with one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZIMMER_")}
    return env if sim else {**env, "ZIMMER_SIM": "off"}


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<unreadable: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


class Run:
    """One `zimmer up` subprocess, its output files and its data directory."""

    def __init__(self, data_dir: Path, out_dir: Path, label: str, *, sim: bool = False):
        self.data_dir = data_dir
        self.sim = sim
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stdout_path = out_dir / f"{label}.stdout"
        self.stderr_path = out_dir / f"{label}.stderr"
        self.proc: subprocess.Popen[bytes] | None = None
        self.known: list[psutil.Process] = []  # everything it started that we have seen, for cleanup

    def start(self) -> None:
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "zimmer_cli", "up", "--data-dir", str(self.data_dir), "--port", str(self.port)],
                env=_clean_env(self.sim), cwd=self.data_dir.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True)

    # ----- diagnostics -------------------------------------------------------------------------------

    def logs(self) -> str:
        parts = [f"--- zimmer up stdout ({self.stdout_path}) ---\n{_tail(self.stdout_path)}",
                 f"--- zimmer up stderr ({self.stderr_path}) ---\n{_tail(self.stderr_path)}"]
        for log in sorted((self.data_dir / "logs").glob("*.log")):
            parts.append(f"--- {log} ---\n{_tail(log)}")
        return "\n".join(parts)

    def fail(self, message: str) -> None:
        code = self.proc.poll() if self.proc else None
        pytest.fail(f"{message} (zimmer up returncode: {code})\n{self.logs()}", pytrace=False)

    def wait_for(self, what: str, check: Callable[[], T | None], deadline: float, interval: float = 0.25,
                 *, while_running: bool = True) -> T:
        """Poll `check` until it returns something truthy; fail with the logs after `deadline` seconds
        (or as soon as `zimmer up` exits, when `while_running`)."""
        end = time.monotonic() + deadline
        last_error: Exception | None = None
        while True:
            try:
                result = check()
                if result:
                    return result
            except Exception as exc:  # noqa: BLE001 - remembered for the failure message
                last_error = exc
            if while_running and self.proc is not None and self.proc.poll() is not None:
                self.fail(f"zimmer up exited while waiting for {what}")
            if time.monotonic() > end:
                self.fail(f"timed out after {deadline:g}s waiting for {what}"
                          + (f"; last error: {last_error!r}" if last_error else ""))
            time.sleep(interval)

    # ----- observations ------------------------------------------------------------------------------

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def supervisor_lines(self, msg: str, **match: Any) -> list[dict[str, Any]]:
        """The supervisor's JSON lines on stderr with this `msg` and these fields."""
        found = []
        for line in self.stderr().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if (isinstance(doc, dict) and doc.get("service") == "supervisor" and doc.get("msg") == msg
                    and all(doc.get(k) == v for k, v in match.items())):
                found.append(doc)
        return found

    def runtime(self) -> dict[str, Any] | None:
        """runtime.json, or None while it is absent or half written (it is rewritten in place)."""
        try:
            return json.loads((self.data_dir / "runtime.json").read_text())
        except (OSError, ValueError):
            return None

    def readyz(self) -> int | None:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=5).status_code
        except httpx.HTTPError:
            return None

    def wait_ready(self) -> dict[str, Any]:
        self.wait_for('"Zimmer is up" on stdout', lambda: f"Zimmer is up: {self.url}" in self.stdout(),
                      READY_DEADLINE)
        self.wait_for("GET /readyz == 200", lambda: self.readyz() == 200, READY_DEADLINE)
        runtime = self.wait_for("runtime.json with every service", self._full_runtime, READY_DEADLINE)
        self.remember(runtime)
        return runtime

    def _full_runtime(self) -> dict[str, Any] | None:
        runtime = self.runtime()
        if runtime and all(runtime["services"].get(n, {}).get("pid") for n in START_ORDER):
            return runtime
        return None

    # ----- processes ---------------------------------------------------------------------------------

    def owned_processes(self, runtime: dict[str, Any]) -> dict[str, psutil.Process]:
        """Every process this `zimmer up` runs: children (and their descendants), nats-server, postmaster
        (and its backends). psutil.Process objects remember their create time, so pid reuse is not a risk."""
        found: dict[str, psutil.Process] = {}
        for name, info in runtime["services"].items():
            try:
                proc = psutil.Process(info["pid"])
                found[f"child {name}"] = proc
                for sub in proc.children(recursive=True):
                    found[f"child {name} descendant {sub.pid}"] = sub
            except psutil.NoSuchProcess:
                self.fail(f"service {name} pid {info['pid']} from runtime.json does not exist")
        data_dir = str(self.data_dir)
        nats = [p for p in psutil.process_iter(["name", "cmdline"])
                if "nats-server" in (p.info["name"] or "")
                and any(data_dir in arg for arg in (p.info["cmdline"] or []))]
        if len(nats) != 1:
            self.fail(f"expected one nats-server for {data_dir}, found {[p.pid for p in nats]}")
        found["nats-server"] = nats[0]
        postmaster_pid = int((self.data_dir / "pg" / "postmaster.pid").read_text().splitlines()[0])
        try:
            postmaster = psutil.Process(postmaster_pid)
        except psutil.NoSuchProcess:
            self.fail(f"postmaster pid {postmaster_pid} from postmaster.pid does not exist")
        if not any(data_dir in arg for arg in postmaster.cmdline()):
            self.fail(f"pid {postmaster_pid} is not this data directory's postgres: {postmaster.cmdline()}")
        found["postmaster"] = postmaster
        servers = runtime.get("servers", {})
        if servers.get("postgres", {}).get("pid") != postmaster_pid:
            self.fail(f"runtime.json names postgres pid {servers.get('postgres', {}).get('pid')}, "
                      f"postmaster.pid names {postmaster_pid}")
        if servers.get("nats-server", {}).get("pid") != nats[0].pid:
            self.fail(f"runtime.json names nats-server pid {servers.get('nats-server', {}).get('pid')}, "
                      f"the running one is {nats[0].pid}")
        for sub in postmaster.children(recursive=True):
            found[f"postgres backend {sub.pid}"] = sub
        return found

    def remember(self, runtime: dict[str, Any]) -> None:
        for info in runtime["services"].values():
            with contextlib.suppress(psutil.NoSuchProcess):
                self.known.append(psutil.Process(info["pid"]))

    def stop(self) -> int:
        """SIGTERM the supervisor and assert it exits within STOP_DEADLINE seconds."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            self.fail(f"zimmer up did not exit within {STOP_DEADLINE:g}s of SIGTERM")
            raise  # unreachable: fail() raises

    def kill_everything(self) -> None:
        """Last resort for a failed test: nothing it started may outlive it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # lets it stop postgres, which is not in its group
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_DEADLINE)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        leftovers = list(self.known)
        data_dir = str(self.data_dir)
        for p in psutil.process_iter(["cmdline"]):
            if any(data_dir in arg for arg in (p.info["cmdline"] or [])):
                leftovers.append(p)  # nats-server and postgres name the data directory
        for p in leftovers:
            try:
                if p.is_running():
                    p.kill()
            except psutil.Error:
                pass


def _gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


IMPORTED_ITEM = {"id": "wb-e2e-1", "key": "manual-e2e-import", "issue_url": None, "title": "imported",
                 "prompt": "Tidy up", "estimated_cost": "large", "precedence": 1500}


def _no_postmaster(data_dir: Path) -> bool:
    from zimmer_cli.embedded import running_postmaster

    return running_postmaster(data_dir / "pg") is None


def _schema_owners() -> list[str]:
    """Services whose factory declares a schema (building one connects to nothing)."""
    from zimmer_cli.main import _load_factory
    from zimmer_common.settings import Environment, Settings

    settings = Settings(env=Environment.TEST, database_url="postgresql://unused@127.0.0.1/unused",
                        nats_url="nats://127.0.0.1:1", api_key="unused", operator_token="unused", metrics_port=-1)
    return [name for name in START_ORDER if _load_factory(name)(settings).schema]


def _zimmer(*args: str, run: Run) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "zimmer_cli", *args], env=_clean_env(), capture_output=True,
                              text=True, timeout=CLI_DEADLINE, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        run.fail(f"`zimmer {' '.join(args)}` did not finish within {CLI_DEADLINE:g}s")
        raise


def test_zimmer_up_runs_supervises_stops_and_restarts_on_the_same_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = Run(data_dir, tmp_path, "up-1")
    second: Run | None = None
    try:
        # 1. It comes up, and every service answers a ping.
        first.start()
        first.wait_ready()
        status = _zimmer("status", "--data-dir", str(data_dir), run=first)
        assert status.returncode == 0, f"zimmer status failed:\n{status.stdout}\n{status.stderr}\n{first.logs()}"
        for name in START_ORDER:
            lines = [line for line in status.stdout.splitlines() if line.split() and line.split()[0] == name]
            assert len(lines) == 1 and "ping ok" in lines[0], f"{name} not ok in status:\n{status.stdout}"
        for name in ("postgres", "nats-server"):
            lines = [line for line in status.stdout.splitlines() if line.split() and line.split()[0] == name]
            assert len(lines) == 1 and "alive  ready" in lines[0], f"{name} not ready in status:\n{status.stdout}"

        # 2. The API key from credentials.json opens the API; no key gets a problem document.
        assert f"credentials in {data_dir / 'credentials.json'}" in first.stdout(), first.stdout()
        creds_bytes = (data_dir / "credentials.json").read_bytes()
        api_key = json.loads(creds_bytes)["api_key"]
        ok = httpx.get(f"{first.url}/api/v1/ping", headers={"Authorization": f"Bearer {api_key}"}, timeout=10)
        assert ok.status_code == 200, ok.text
        denied = httpx.get(f"{first.url}/api/v1/ping", timeout=10)
        assert denied.status_code == 401, denied.text
        assert denied.headers["content-type"].startswith("application/problem+json")

        # 3. A killed child is restarted, recorded, logged, and the system is ready again.
        before = first.runtime()
        assert before is not None
        old_pid = before["services"]["backlog"]["pid"]
        os.kill(old_pid, signal.SIGKILL)

        def restarted() -> dict[str, Any] | None:
            runtime = first.runtime()
            entry = (runtime or {}).get("services", {}).get("backlog", {})
            if entry.get("pid") and entry["pid"] != old_pid and entry.get("restarts", 0) >= 1:
                return runtime
            return None

        after = first.wait_for("runtime.json to show a restarted backlog", restarted, RESTART_DEADLINE)
        first.remember(after)

        def restart_logged() -> bool:
            for line in first.stderr().splitlines():
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict) and doc.get("msg") == "child restarted" and doc.get("child") == "backlog":
                    return True
            return False

        first.wait_for('a "child restarted" JSON line for backlog on stderr', restart_logged, RESTART_DEADLINE)
        first.wait_for("GET /readyz == 200 after the restart", lambda: first.readyz() == 200, READY_DEADLINE)

        # 4. SIGTERM stops everything it started, promptly and cleanly.
        owned = first.owned_processes(after)
        assert first.stop() == 0, f"zimmer up exited non-zero\n{first.logs()}"
        first.wait_for("every process of the first run to be gone",  # reaping by init may lag a moment
                       lambda: all(_gone(p) for p in owned.values()), 5.0, while_running=False)
        assert not (data_dir / "runtime.json").exists(), "runtime.json left behind after a clean stop"

        # 5. A second start on the same directory reuses its data.
        second = Run(data_dir, tmp_path, "up-2")
        second.start()
        second_runtime = second.wait_ready()
        assert (data_dir / "credentials.json").read_bytes() == creds_bytes, "credentials.json was rewritten"
        again = httpx.get(f"{second.url}/api/v1/ping", headers={"Authorization": f"Bearer {api_key}"}, timeout=10)
        assert again.status_code == 200, again.text
        owned = second.owned_processes(second_runtime)
        assert second.stop() == 0, f"second zimmer up exited non-zero\n{second.logs()}"
        second.wait_for("every process of the second run to be gone",
                        lambda: all(_gone(p) for p in owned.values()), 5.0, while_running=False)

        migrated = _zimmer("migrate", "--data-dir", str(data_dir), run=second)
        assert migrated.returncode == 0, f"zimmer migrate failed:\n{migrated.stdout}\n{migrated.stderr}"
        owners = _schema_owners()
        assert owners, "no service owns a schema?"
        for name in owners:
            lines = [line for line in migrated.stdout.splitlines() if line.split() and line.split()[0] == name]
            assert len(lines) == 1 and "up to date" in lines[0], f"{name} not up to date:\n{migrated.stdout}"
        assert "applied" not in migrated.stdout, f"migrations re-applied:\n{migrated.stdout}"
        assert _no_postmaster(data_dir), "zimmer migrate left its temporary postmaster running"

        # 6. So does `zimmer backlog import`: its own temporary postmaster, stopped at the end.
        source = tmp_path / "WORK_BACKLOG.json"
        source.write_text(json.dumps({"items": [IMPORTED_ITEM]}))
        imported = _zimmer("backlog", "import", str(source), "--data-dir", str(data_dir), run=second)
        assert imported.returncode == 0 and "inserted  1" in imported.stdout, \
            f"zimmer backlog import failed:\n{imported.stdout}\n{imported.stderr}"
        assert _no_postmaster(data_dir), "zimmer backlog import left its temporary postmaster running"
    finally:
        first.kill_everything()
        if second is not None:
            second.kill_everything()


# ---- outages of the embedded servers -------------------------------------------------------------


class Appender(threading.Thread):
    """Light load: one append at a time with the fleet key, a few a second, every answer kept as
    (sent, answered, status code or exception name)."""

    def __init__(self, url: str, api_key: str):
        super().__init__(name="appender", daemon=True)
        self.url = url
        self.api_key = api_key
        self.results: list[tuple[float, float, int | str]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=10) as http:
            while not self.halt.is_set():
                n += 1
                body = {"key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}",
                        "estimated_cost": ("small", "medium")[n % 2], "title": "t"}
                sent = time.monotonic()
                try:
                    outcome: int | str = http.post(ITEMS, json=body).status_code
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                self.results.append((sent, time.monotonic(), outcome))
                self.halt.wait(0.2)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=15)

    def ok_count(self) -> int:
        return sum(1 for _, _, o in list(self.results) if isinstance(o, int) and 200 <= o < 300)

    def first_ok_sent_after(self, t0: float) -> float | None:
        """When the first 2xx to a request sent after `t0` came back."""
        for sent, answered, outcome in list(self.results):
            if sent > t0 and isinstance(outcome, int) and 200 <= outcome < 300:
                return answered
        return None

    def outcomes_between(self, start: float, end: float) -> Counter[int | str]:
        return Counter(o for sent, _, o in list(self.results) if start <= sent <= end)


def _reaped(proc: psutil.Process) -> bool:
    """The process is gone and was waited for: no zombie left (psutil remembers its create time)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE and not proc.is_running()
    except psutil.NoSuchProcess:
        return True


def _kill_server_and_watch(run: Run, load: Appender, name: str) -> dict[str, Any]:
    """SIGKILL the embedded server `name`; wait for the supervisor to log the death and the restart,
    for the dead process to be reaped and for a 2xx again; return the measured figures."""
    before = run.runtime()
    assert before is not None
    entry = before["servers"][name]
    old_pid = entry["pid"]
    proc = psutil.Process(old_pid)
    os.kill(old_pid, signal.SIGKILL)
    killed = time.monotonic()

    [died] = run.wait_for(f'a "child exited; restarting" line for {name} pid {old_pid}',
                          lambda: run.supervisor_lines("child exited; restarting", child=name, pid=old_pid),
                          RESTART_DEADLINE)
    assert died["signal"] == "SIGKILL" and died["level"] in ("ERROR", "WARNING"), died
    run.wait_for(f"{name} pid {old_pid} to be reaped (not a zombie)", lambda: _reaped(proc), RESTART_DEADLINE)
    restarted = run.wait_for(f'a "child restarted" line for {name}',
                             lambda: run.supervisor_lines("child restarted", child=name), OUTAGE_DEADLINE)
    [again] = run.wait_for(f'a "child ready again" line for {name}',
                           lambda: run.supervisor_lines("child ready again", child=name), OUTAGE_DEADLINE)
    server_back = time.monotonic()
    answered = run.wait_for(f"a 2xx append after the {name} restart", lambda: load.first_ok_sent_after(killed),
                            OUTAGE_DEADLINE)
    run.wait_for(f"GET /readyz == 200 after the {name} restart", lambda: run.readyz() == 200, OUTAGE_DEADLINE)
    ready = time.monotonic()

    after = run.runtime()
    assert after is not None
    now = after["servers"][name]
    assert now["pid"] not in (None, old_pid) and now["restarts"] >= 1 and now["ready"], now
    for key in ("url", "socket_dir", "pgdata", "store"):  # same port, same data, same socket
        assert now.get(key) == entry.get(key), f"{name} {key} changed across the restart: {entry} -> {now}"
    return {"server": name, "old_pid": old_pid, "new_pid": now["pid"], "attempts": len(restarted),
            "supervisor_down_seconds": again["down_seconds"],
            "server_back_seconds": round(server_back - killed, 3),
            "first_2xx_seconds": round(answered - killed, 3),
            "readyz_200_seconds": round(ready - killed, 3),
            "outcomes_during_outage": dict(load.outcomes_between(killed, answered))}


def _check_events_flow(run: Run, api_key: str, groomer: str, after: str) -> None:
    """A pull starts a session at spot-gate, whose session events reach the backlog through the
    outbox relay, JetStream and backlog's durable consumer: the item then lists as in flight."""
    headers = {"Authorization": f"Bearer {api_key}"}

    def pull() -> str | None:
        r = httpx.post(f"{run.url}{ITEMS}/pull", json={"count": 1, "acting_session_id": groomer}, headers=headers,
                       timeout=15)
        started = r.json().get("started") if r.status_code == 200 else None
        return started[0]["item"]["key"] if started else None

    key = run.wait_for(f"a pull that starts an item after the {after} restart", pull, EVENT_FLOW_DEADLINE)

    def in_flight() -> bool:
        r = httpx.get(f"{run.url}{ITEMS}", params={"status": "in_flight"}, headers=headers, timeout=15)
        return r.status_code == 200 and key in {i["key"] for i in r.json()["items"]}

    run.wait_for(f"pulled item {key} to list as in_flight after the {after} restart: spot-gate's session events "
                 "did not reach the backlog (spot-gate's outbox relay -> JetStream ZIMMER_EVENTS -> backlog's "
                 "durable consumer backlog_session_events); see the spot-gate and backlog logs below",
                 in_flight, EVENT_FLOW_DEADLINE)


def test_zimmer_up_brings_back_killed_servers_under_load(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    run = Run(data_dir, tmp_path, "up")
    load: Appender | None = None
    try:
        run.start()
        runtime = run.wait_ready()
        api_key = json.loads((data_dir / "credentials.json").read_text())["api_key"]
        headers = {"Authorization": f"Bearer {api_key}"}
        groomer = httpx.post(f"{run.url}/api/v1/sessions", json={"genesis": "schedule", "precedence": 5,
                                                                  "start": False}, headers=headers, timeout=15)
        assert groomer.status_code == 201, groomer.text
        groomer_id = groomer.json()["session"]["id"]
        services = {name: runtime["services"][name]["pid"] for name in START_ORDER}
        postmaster = runtime["servers"]["postgres"]["pid"]

        # One-off commands attach to the running postmaster and leave it alone.
        source = tmp_path / "WORK_BACKLOG.json"
        source.write_text(json.dumps({"items": [IMPORTED_ITEM]}))
        imported = _zimmer("backlog", "import", str(source), "--data-dir", str(data_dir), run=run)
        assert imported.returncode == 0 and "inserted  1" in imported.stdout, f"{imported.stdout}\n{imported.stderr}"
        migrated = _zimmer("migrate", "--data-dir", str(data_dir), run=run)
        assert migrated.returncode == 0, f"{migrated.stdout}\n{migrated.stderr}"
        assert (run.runtime() or {})["servers"]["postgres"]["pid"] == postmaster, "a command restarted postgres"
        assert psutil.pid_exists(postmaster) and not run.supervisor_lines("child exited; restarting"), \
            "a one-off command stopped the running postmaster"

        load = Appender(run.url, api_key)
        load.start()
        run.wait_for("the first appends to succeed", lambda: load.ok_count() >= 5, READY_DEADLINE)

        figures = []
        for name in ("nats-server", "postgres"):
            figures.append(_kill_server_and_watch(run, load, name))
            _check_events_flow(run, api_key, groomer_id, after=name)

        final = run.runtime()
        assert final is not None
        now = {name: final["services"][name]["pid"] for name in START_ORDER}
        assert now == services and all(final["services"][n]["restarts"] == 0 for n in START_ORDER), \
            f"a server restart restarted services: {services} -> {now}\n{run.logs()}"
        status = _zimmer("status", "--data-dir", str(data_dir), run=run)
        assert status.returncode == 0, f"zimmer status after the outages:\n{status.stdout}\n{status.stderr}"
        load.stop()
        total = Counter(o for _, _, o in load.results)
        print("\n[measured] appends during the whole test:", dict(total))
        for f in figures:
            print(f"[measured] {f['server']} SIGKILL -> restarted by the supervisor in {f['server_back_seconds']}s "
                  f"(supervisor: down {f['supervisor_down_seconds']}s, {f['attempts']} attempt(s)); first 2xx append "
                  f"{f['first_2xx_seconds']}s; /readyz 200 {f['readyz_200_seconds']}s; requests sent during the "
                  f"outage: {f['outcomes_during_outage']}")

        owned = run.owned_processes(final)
        assert run.stop() == 0, f"zimmer up exited non-zero\n{run.logs()}"
        run.wait_for("every process to be gone", lambda: all(_gone(p) for p in owned.values()), 5.0,
                     while_running=False)
        stops = [d["child"] for d in run.supervisor_lines("stopped") if "child" in d]
        assert stops.index("postgres") > stops.index("nats-server") > max(stops.index(n) for n in START_ORDER), stops
    finally:
        if load is not None:
            load.stop()
        run.kill_everything()
