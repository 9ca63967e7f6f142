"""Supervised child processes for `zimmer up`.

Each service runs as its own process (its own session, so a terminal's Ctrl-C reaches only
the supervisor, which then stops children in order). A child that exits unexpectedly is
restarted with exponential backoff, and the restart is logged; a child that stayed up for a
minute has its backoff reset. Children get SIGTERM if the supervisor itself dies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from zimmer_cli.embedded import die_with_parent

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
HEALTHY_AFTER = 60.0


def say(level: str, msg: str, **fields: Any) -> None:
    """The supervisor's own structured log line (same shape as the services')."""
    doc = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "level": level, "service": "supervisor",
           "msg": msg, **fields}
    print(json.dumps(doc, default=str), file=sys.stderr, flush=True)


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0
    restart_at: float | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept for the child's life
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=die_with_parent)
        self.started_at = time.monotonic()
        self.restart_at = None

    def backoff(self) -> float:
        return min(BACKOFF_MAX, BACKOFF_START * 2 ** max(0, self.restarts - 1))

    def close_log(self) -> None:
        if self._log:
            self._log.close()
            self._log = None


class Supervisor:
    def __init__(self, children: list[Child], on_change: Any = None):
        self.children = children
        self.on_change = on_change or (lambda: None)

    def start_all(self) -> None:
        for child in self.children:
            child.start()
            say("INFO", "started", child=child.name, pid=child.pid)
        self.on_change()

    def poll(self) -> None:
        """Notice exits and restart them when their backoff has passed. Call it often."""
        now = time.monotonic()
        changed = False
        for child in self.children:
            if child.proc is None:
                continue
            code = child.proc.poll()
            if code is not None and child.restart_at is None:
                if now - child.started_at > HEALTHY_AFTER:
                    child.restarts = 0
                child.restarts += 1
                delay = child.backoff()
                child.restart_at = now + delay
                say("WARNING", "child exited; restarting", child=child.name, pid=child.pid, exit_code=code,
                    restart_in_seconds=delay, restarts=child.restarts, log=str(child.log_path))
            if child.restart_at is not None and now >= child.restart_at:
                child.start()
                changed = True
                say("WARNING", "child restarted", child=child.name, pid=child.pid, restarts=child.restarts)
        if changed:
            self.on_change()

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every child (gateway first), wait up to `timeout`, then SIGKILL the rest."""
        live = [c for c in reversed(self.children) if c.proc and c.proc.poll() is None]
        for child in live:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in live:
            assert child.proc is not None
            try:
                child.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say("WARNING", "child did not stop in time; killing", child=child.name, pid=child.pid)
                _signal_group(child, signal.SIGKILL)
                child.proc.wait(2)
        for child in self.children:
            child.close_log()
        say("INFO", "all children stopped")


def _signal_group(child: Child, sig: signal.Signals) -> None:
    try:
        os.killpg(child.proc.pid, sig)  # type: ignore[union-attr]
    except ProcessLookupError:
        pass
