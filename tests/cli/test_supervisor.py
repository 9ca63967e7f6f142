"""The supervisor's restart, backoff, readiness, reaping and stop logic, on real short-lived
child processes (small Python scripts). Nothing is mocked; only the backoff's first step is
shortened so the tests do not sit through half-second waits.

Every wait is a poll loop with a deadline. No assertion is made on how long anything took:
durations are recorded and printed (`pytest -s` shows them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from zimmer_cli import supervisor as sup
from zimmer_cli.supervisor import NATS_TIER, POSTGRES_TIER, SERVICE_TIER, Child, Supervisor

DEADLINE = 20.0


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sup, "BACKOFF_START", 0.05)


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def child(tmp_path: Path, name: str, body: str, **kwargs: Any) -> Child:
    return Child(name, script(tmp_path, name, body), None, tmp_path / "logs" / f"{name}.log", **kwargs)


def drive(supervisor: Supervisor, what: str, done: Callable[[], Any], deadline: float = DEADLINE) -> Any:
    """Poll the supervisor until `done()` is truthy; fail after `deadline` seconds."""
    end = time.monotonic() + deadline
    while True:
        supervisor.poll()
        result = done()
        if result:
            return result
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline:g}s waiting for {what}")
        time.sleep(0.02)


class Lines:
    """The supervisor's JSON log lines (on stderr), read through capsys."""

    def __init__(self, capsys: pytest.CaptureFixture[str]):
        self.capsys = capsys
        self.seen: list[dict[str, Any]] = []

    def __call__(self, msg: str | None = None, **match: Any) -> list[dict[str, Any]]:
        err = self.capsys.readouterr().err
        for line in err.splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("service") == "supervisor":
                self.seen.append(doc)
        return [d for d in self.seen if (msg is None or d["msg"] == msg)
                and all(d.get(k) == v for k, v in match.items())]


    def report(self, text: str) -> None:
        """A measurement for the reader: straight to the terminal, past the capture."""
        with self.capsys.disabled():
            print(f"\n[measured] {text}", flush=True)


@pytest.fixture
def lines(capsys: pytest.CaptureFixture[str]) -> Lines:
    return Lines(capsys)


def not_a_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_an_exit_is_reaped_logged_and_restarted_with_a_doubling_backoff(tmp_path: Path, lines: Lines) -> None:
    quitter = child(tmp_path, "quitter", "import sys; sys.exit(3)")
    supervisor = Supervisor([quitter])
    supervisor.start_all()
    pids = []
    try:
        for n in range(1, 4):
            pids.append(quitter.pid)
            exited = drive(supervisor, f"exit #{n}", lambda n=n: lines("child exited; restarting")[n - 1:])
            assert exited[0]["child"] == "quitter" and exited[0]["exit_code"] == 3 and exited[0]["pid"] == pids[-1]
            assert not_a_zombie(pids[-1]), f"exited child {pids[-1]} was left a zombie"
            drive(supervisor, f"restart #{n}", lambda n=n: len(lines("child restarted")) >= n)
        delays = [d["restart_in_seconds"] for d in lines("child exited; restarting")[:3]]
        assert delays == [0.05, 0.1, 0.2], delays
        assert quitter.restarts >= 3 and len(set(pids)) == 3
        assert quitter.info()["last_exit"]["exit_code"] == 3
    finally:
        supervisor.stop_all(timeout=5)


def test_a_death_by_signal_is_named_and_the_child_comes_back(tmp_path: Path, lines: Lines) -> None:
    changes: list[int] = []
    sleeper = child(tmp_path, "sleeper", "import time; time.sleep(60)")
    supervisor = Supervisor([sleeper], on_change=lambda: changes.append(1))
    supervisor.start_all()
    try:
        old = sleeper.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()
        drive(supervisor, "a new sleeper", lambda: sleeper.pid not in (None, old))
        lines.report(f"sleeper back {time.monotonic() - killed_at:.3f}s after SIGKILL")
        [exited] = lines("child exited; restarting", child="sleeper")
        assert exited["signal"] == "SIGKILL" and exited["pid"] == old and exited["level"] == "WARNING"
        assert lines("child restarted", child="sleeper", pid=sleeper.pid, restarts=1)
        assert not_a_zombie(old)
        assert sleeper.restarts == 1 and sleeper.info()["last_exit"] == {"signal": "SIGKILL", "pid": old}
        assert len(changes) >= 3, "runtime.json is rewritten at start, at the exit and at the restart"
    finally:
        supervisor.stop_all(timeout=5)


FLAKY_SERVER = """
    import os, pathlib, sys, time
    here = pathlib.Path(__file__).parent
    counter = here / "attempts"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if n < 3:
        print(f"FATAL: attempt {n}: pre-existing shared memory block is still in use", flush=True)
        time.sleep(0.1)
        sys.exit(1)
    (here / "ready").write_text(str(os.getpid()))
    time.sleep(60)
"""


def test_a_server_that_fails_its_first_attempts_is_retried_once_a_line_until_ready(tmp_path: Path,
                                                                                 lines: Lines) -> None:
    ready_file = tmp_path / "ready"
    server = child(tmp_path, "flaky", FLAKY_SERVER, kind="server", tier=POSTGRES_TIER, kill_leftovers=True)
    server.ready_check = lambda: ready_file.exists() and ready_file.read_text() == str(server.pid)
    supervisor = Supervisor([server])
    supervisor.start_all()
    try:
        started = time.monotonic()
        assert supervisor.wait_ready([server], DEADLINE, lambda: False), lines()
        lines.report(f"flaky server ready after {time.monotonic() - started:.3f}s and {server.restarts} restarts")
        failed = lines("child exited before it was ready; retrying")
        assert [(f["attempt"], f["exit_code"]) for f in failed] == [(1, 1), (2, 1)]
        assert "attempt 1: pre-existing shared memory" in failed[0]["last_log_lines"]
        assert [f["retry_in_seconds"] for f in failed] == [0.05, 0.1]
        assert len(lines("child restarted", child="flaky")) == 2 and server.restarts == 2
        assert len(lines("child ready", child="flaky")) == 1 and not lines("child exited; restarting")

        # A ready server that dies: one ERROR line, a restart, and "ready again" with the outage's length.
        old = server.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        drive(supervisor, "ready again", lambda: lines("child ready again", child="flaky"))
        [died] = lines("child exited; restarting", child="flaky")
        assert (died["level"], died["kind"], died["signal"], died["pid"]) == ("ERROR", "server", "SIGKILL", old)
        [again] = lines("child ready again", child="flaky")
        assert again["pid"] == server.pid != old and again["down_seconds"] >= 0
        lines.report(f"flaky server down for {again['down_seconds']}s")
        assert not_a_zombie(old)
    finally:
        supervisor.stop_all(timeout=5)


def test_a_child_never_ready_is_killed_at_its_deadline_and_tried_again(tmp_path: Path, lines: Lines) -> None:
    stuck = child(tmp_path, "stuck", "import time; time.sleep(60)", kind="server", ready_timeout=0.3)
    stuck.ready_check = lambda: False
    supervisor = Supervisor([stuck])
    supervisor.start_all()
    try:
        first = stuck.pid
        assert first is not None
        drive(supervisor, "a second attempt", lambda: lines("child restarted", child="stuck"))
        assert lines("child not ready in time; killing it", child="stuck", pid=first)
        [failed] = lines("child exited before it was ready; retrying", child="stuck")
        assert failed["signal"] == "SIGKILL" and failed["pid"] == first
        assert not_a_zombie(first) and stuck.pid != first and not stuck.ready
    finally:
        supervisor.stop_all(timeout=5)


STOPPABLE = """
    import pathlib, signal, sys, time
    here = pathlib.Path(__file__).parent
    name = pathlib.Path(__file__).stem
    def on_signal(sig, _frame):
        with open(here / "stopped", "a") as f:
            f.write(f"{name} {signal.Signals(sig).name}\\n")
        if name != "stubborn":
            sys.exit(0)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    (here / f"{name}.up").touch()
    while True:
        time.sleep(0.05)
"""


def test_stop_goes_tier_by_tier_and_is_bounded(tmp_path: Path, lines: Lines) -> None:
    def make(name: str, **kwargs: Any) -> Child:
        c = child(tmp_path, name, STOPPABLE, **kwargs)
        c.ready_check = lambda: (tmp_path / f"{name}.up").exists()
        return c

    pg = make("pg", kind="server", tier=POSTGRES_TIER, stop_signal=signal.SIGINT, signal_group=False)
    nats = make("nats", kind="server", tier=NATS_TIER)
    backlog = make("backlog", tier=SERVICE_TIER)
    stubborn = make("stubborn", tier=SERVICE_TIER, stop_timeout=0.5)
    gateway = make("gateway", tier=SERVICE_TIER)
    supervisor = Supervisor([pg, nats, backlog, stubborn, gateway])
    supervisor.start_all()
    everyone = [pg, nats, backlog, stubborn, gateway]
    assert supervisor.wait_ready(everyone, DEADLINE, lambda: False), lines()
    procs = {c.name: psutil.Process(c.pid) for c in everyone if c.pid}
    started = time.monotonic()
    supervisor.stop_all()
    lines.report(f"stop_all took {time.monotonic() - started:.3f}s (one child ignored SIGTERM)")
    order = (tmp_path / "stopped").read_text().split("\n")[:-1]
    # Signalled gateway first, but the three services of a tier stop together: their order is theirs.
    assert sorted(order[:3]) == ["backlog SIGTERM", "gateway SIGTERM", "stubborn SIGTERM"], order
    assert order[3:] == ["nats SIGTERM", "pg SIGINT"], order
    assert lines("child did not stop in time; killing", child="stubborn")
    assert [d["child"] for d in lines("stopped")] == ["gateway", "stubborn", "backlog", "nats", "pg"]
    for name, proc in procs.items():
        assert not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, f"{name} still running"
        assert not_a_zombie(proc.pid), f"{name} left a zombie"


ORPHAN_MAKER = """
    import subprocess
    print(subprocess.Popen(["sleep", "0.3"]).pid, flush=True)
"""

REAPER = """
    import json, sys, time
    from pathlib import Path
    import psutil
    from zimmer_cli.embedded import become_subreaper
    from zimmer_cli.supervisor import Child, Supervisor

    here = Path(sys.argv[1])
    assert become_subreaper()
    maker = Child("maker", [sys.executable, str(here / "orphan_maker.py")], None, here / "maker.log")
    supervisor = Supervisor([maker], reap_orphans={reap})
    supervisor.start_all()
    end = time.monotonic() + 15
    orphan, state, parent = None, "unseen", None
    while time.monotonic() < end:
        supervisor.poll()
        text = (here / "maker.log").read_text().strip()
        if orphan is None and text:
            orphan = int(text.splitlines()[0])
        if orphan is not None:
            try:
                proc = psutil.Process(orphan)
                parent, state = proc.ppid(), proc.status()
            except psutil.NoSuchProcess:
                state = "gone"
            if state == "gone" or (state == psutil.STATUS_ZOMBIE and not {reap}):
                break
        time.sleep(0.05)
    supervisor.stop_all(timeout=2)
    print(json.dumps({{"orphan": orphan, "state": state, "parent": parent, "me": __import__("os").getpid()}}))
"""


@pytest.mark.parametrize("reap", [True, False])
def test_a_subreaper_supervisor_reaps_orphaned_grandchildren(tmp_path: Path, reap: bool) -> None:
    (tmp_path / "orphan_maker.py").write_text(textwrap.dedent(ORPHAN_MAKER))
    (tmp_path / "reaper.py").write_text(textwrap.dedent(REAPER.format(reap=reap)))
    out = subprocess.run([sys.executable, str(tmp_path / "reaper.py"), str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["orphan"], result
    if reap:
        assert result["state"] == "gone", f"the orphan was not reaped: {result}"
    else:  # the contrast: re-parented to the subreaper, which does not reap it, so it is a zombie
        assert (result["state"], result["parent"]) == (psutil.STATUS_ZOMBIE, result["me"]), result
