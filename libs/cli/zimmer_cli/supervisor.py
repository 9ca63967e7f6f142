"""Supervised child processes for `zimmer up`: the embedded servers and the five services.

Every child is a direct child process that the supervisor polls, so a dead one is reaped at
once (never left a zombie), logged with its exit code or signal, and started again with
exponential backoff; the restart is logged too. A child may have a readiness check (the
servers do: NATS listens, PostgreSQL accepts a connection): until it passes, the child is
"starting", an exit is a failed attempt (one line each, then a longer wait), and when it
passes after an outage the supervisor logs how long the child was down. A child that stays
ready for a minute has its backoff reset.

Each child runs in its own session, so a terminal's Ctrl-C reaches only the supervisor, which
then stops them tier by tier: services (gateway first), then NATS, then PostgreSQL, each tier
bounded. Children get a signal if the supervisor itself dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from zimmer_cli.embedded import die_with_parent, log_tail

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 60.0
REAP_EVERY = 1.0

# Stop order, highest tier first: the services (which still need both servers to stop
# cleanly), then NATS, then PostgreSQL.
POSTGRES_TIER = 0
NATS_TIER = 1
SERVICE_TIER = 2


def say(level: str, msg: str, **fields: Any) -> None:
    """The supervisor's own structured log line (same shape as the services')."""
    doc = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "level": level, "service": "supervisor",
           "msg": msg, **fields}
    print(json.dumps(doc, default=str), file=sys.stderr, flush=True)


def exit_fields(code: int) -> dict[str, Any]:
    """`exit_code` for an exit, `signal` (by name) for a death by signal."""
    if code < 0:
        try:
            return {"signal": signal.Signals(-code).name}
        except ValueError:
            return {"signal": -code}
    return {"exit_code": code}


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] | None
    log_path: Path
    kind: str = "service"  # "service" or "server": in log lines and runtime.json
    tier: int = SERVICE_TIER  # stop order: the highest tier first
    ready_check: Callable[[], bool] | None = None  # None: ready as soon as it runs
    before_start: Callable[[], None] | None = None  # run before every start (an error fails the attempt)
    ready_timeout: float = 60.0  # a started child not ready by then is killed (a failed attempt)
    stop_signal: signal.Signals = signal.SIGTERM
    stop_timeout: float = 10.0
    signal_group: bool = True  # the stop signal goes to its whole process group
    kill_leftovers: bool = False  # after an exit, SIGKILL what is left of its process group
    popen_kwargs: dict[str, Any] = field(default_factory=lambda: {"start_new_session": True,
                                                                  "preexec_fn": die_with_parent})
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0  # how many times it was started again (each attempt counts)
    failures: int = 0  # consecutive exits without a healthy run: drives the backoff
    ready: bool = False
    started_at: float = 0.0
    ready_at: float | None = None
    down_since: float | None = None  # when an outage began (the exit of a ready child)
    restart_at: float | None = None
    last_exit: dict[str, Any] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept for the child's life
        self.restart_at = None
        if self.before_start is not None:
            self.before_start()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, **self.popen_kwargs)
        self.started_at = time.monotonic()
        self.ready = self.ready_check is None
        self.ready_at = self.started_at if self.ready else None

    def backoff(self) -> float:
        return min(BACKOFF_MAX, BACKOFF_START * 2 ** max(0, self.failures - 1))

    def info(self) -> dict[str, Any]:
        """What runtime.json records about it (`ready` only where there is a readiness check)."""
        return {"pid": self.pid, "restarts": self.restarts,
                **({"ready": self.ready} if self.ready_check is not None else {}), "log": str(self.log_path),
                **({"last_exit": self.last_exit} if self.last_exit else {})}

    def close_log(self) -> None:
        if self._log:
            self._log.close()
            self._log = None


class Supervisor:
    def __init__(self, children: list[Child] | None = None, on_change: Callable[[], None] | None = None,
                 *, reap_orphans: bool = False):
        self.children: list[Child] = list(children or [])
        self.on_change = on_change or (lambda: None)
        self.reap_orphans = reap_orphans  # set when this process is a subreaper (become_subreaper)
        self._next_reap = 0.0

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    def start(self, children: Iterable[Child]) -> None:
        """Add `children` (if new) and start them, in order."""
        for child in children:
            if child not in self.children:
                self.children.append(child)
            child.start()
            say("INFO", "started", child=child.name, kind=child.kind, pid=child.pid)
        self.on_change()

    def start_all(self) -> None:
        self.start(list(self.children))

    def poll(self) -> None:
        """Notice exits, readiness and due restarts. Call it often (every 0.1-0.25 s)."""
        changed = False
        for child in self.children:
            now = time.monotonic()
            if child.proc is not None:
                code = child.proc.poll()  # reaps it
                if code is not None:
                    self._exited(child, code, now)
                    changed = True
                elif not child.ready:
                    changed |= self._check_ready(child, now)
            if child.proc is None and child.restart_at is not None and now >= child.restart_at:
                self._restart(child)
                changed = True
        if self.reap_orphans:
            self._reap_orphans()
        if changed:
            self.on_change()

    def all_ready(self, children: Iterable[Child] | None = None) -> bool:
        return all(c.proc is not None and c.ready for c in (self.children if children is None else children))

    def wait_ready(self, children: list[Child], timeout: float, stop_requested: Callable[[], bool],
                   interval: float = 0.1) -> bool:
        """Poll (restarting what dies) until every one of `children` is ready; False on timeout or stop."""
        deadline = time.monotonic() + timeout
        while not stop_requested():
            self.poll()
            if self.all_ready(children):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(interval)
        return False

    # ---- transitions -----------------------------------------------------------------

    def _exited(self, child: Child, code: int, now: float) -> None:
        pid = child.pid
        was_ready = child.ready
        child.proc, child.ready = None, False
        child.last_exit = {**exit_fields(code), "pid": pid}
        leftovers = child.kill_leftovers and pid is not None and _killpg(pid, signal.SIGKILL)
        if was_ready and child.ready_at is not None and now - child.ready_at > HEALTHY_AFTER:
            child.failures = 0
        child.failures += 1
        delay = child.backoff()
        child.restart_at = now + delay
        extra: dict[str, Any] = {"leftovers_killed": True} if leftovers else {}
        if was_ready:
            child.down_since = now
            say("ERROR" if child.kind == "server" else "WARNING", "child exited; restarting", child=child.name,
                kind=child.kind, pid=pid, **exit_fields(code), restart_in_seconds=delay, restarts=child.restarts,
                log=str(child.log_path), **extra)
        else:  # it never became ready: a failed attempt, one line each, the waits growing
            say("WARNING", "child exited before it was ready; retrying", child=child.name, kind=child.kind, pid=pid,
                **exit_fields(code), attempt=child.failures, retry_in_seconds=delay, log=str(child.log_path),
                last_log_lines=log_tail(child.log_path, 2), **extra)

    def _restart(self, child: Child) -> None:
        child.restarts += 1
        try:
            child.start()
        except Exception as exc:  # noqa: BLE001 - cannot even spawn it (binary gone, fd limit, its
            # preparation failed): wait longer, try again
            child.proc = None
            child.failures += 1
            child.restart_at = time.monotonic() + child.backoff()
            say("ERROR", "could not start child; retrying", child=child.name, kind=child.kind, error=repr(exc),
                retry_in_seconds=child.backoff())
            return
        say("WARNING", "child restarted", child=child.name, kind=child.kind, pid=child.pid, restarts=child.restarts)

    def _check_ready(self, child: Child, now: float) -> bool:
        assert child.ready_check is not None and child.proc is not None
        if child.ready_check():
            child.ready, child.ready_at = True, time.monotonic()
            if child.down_since is not None:
                say("WARNING", "child ready again", child=child.name, kind=child.kind, pid=child.pid,
                    down_seconds=round(child.ready_at - child.down_since, 3), restarts=child.restarts)
                child.down_since = None
            else:
                say("INFO", "child ready", child=child.name, kind=child.kind, pid=child.pid,
                    start_seconds=round(child.ready_at - child.started_at, 3))
            return True
        if now - child.started_at > child.ready_timeout:
            say("ERROR", "child not ready in time; killing it", child=child.name, kind=child.kind, pid=child.pid,
                ready_timeout_seconds=child.ready_timeout, log=str(child.log_path))
            _killpg(child.proc.pid, signal.SIGKILL)
            child.proc.wait(5)  # the next poll sees the exit as a failed attempt
        return False

    def _reap_orphans(self) -> None:
        """As a subreaper we inherit orphaned descendants (a killed postmaster's backends): reap
        the dead ones, never one of our own children (Popen must see their exit status)."""
        now = time.monotonic()
        if now < self._next_reap:
            return
        self._next_reap = now + REAP_EVERY
        import psutil

        ours = {c.proc.pid for c in self.children if c.proc is not None}
        try:
            kids = psutil.Process().children()
        except psutil.Error:
            return
        for kid in kids:
            if kid.pid in ours:
                continue
            with contextlib.suppress(psutil.Error, ChildProcessError):
                if kid.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(kid.pid, os.WNOHANG)

    # ---- stop ------------------------------------------------------------------------

    def stop_all(self, timeout: float | None = None) -> None:
        """Stop tier by tier, highest first (services, gateway first; then NATS; then PostgreSQL):
        the stop signal to every child of the tier, a bounded wait, SIGKILL for the rest."""
        for tier in sorted({c.tier for c in self.children}, reverse=True):
            live = [c for c in reversed(self.children) if c.tier == tier and c.proc and c.proc.poll() is None]
            for child in live:
                assert child.proc is not None
                if child.signal_group:
                    _killpg(child.proc.pid, child.stop_signal)
                else:
                    with contextlib.suppress(ProcessLookupError):
                        child.proc.send_signal(child.stop_signal)
            signalled = time.monotonic()
            for child in live:
                assert child.proc is not None
                deadline = signalled + (timeout if timeout is not None else child.stop_timeout)
                try:
                    child.proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    say("WARNING", "child did not stop in time; killing", child=child.name, kind=child.kind,
                        pid=child.pid)
                    _killpg(child.proc.pid, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        child.proc.wait(2)
                code = child.proc.returncode
                say("INFO", "stopped", child=child.name, kind=child.kind,
                    **(exit_fields(code) if code is not None else {"exit_code": None}))
        for child in self.children:
            child.close_log()
        if self.reap_orphans:
            self._next_reap = 0.0
            self._reap_orphans()
        say("INFO", "all children stopped")


def _killpg(pid: int, sig: signal.Signals) -> bool:
    """Signal the process group led by `pid`; False when nothing is left in it."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
