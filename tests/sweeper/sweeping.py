"""Helpers the sweeper tests share: the frozen start time, waiting for a condition, sessions for
log lines to belong to, publishing log lines as the runtime does, and the sweeper as its own
process (for kill -9). (A module of
its own, not conftest: every test directory has a conftest, and `from conftest import` would
find whichever was imported first.)"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.logs import INGEST_LOGS, LOG_LINE, LOG_LINES, LogLineIn, LogLineItem, LogLinesIn
from zimmer_common.db import asyncpg_dsn

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KNOWN_SESSIONS = 1_000  # sessions 1 to this exist (`seed_sessions`); a log line for any other is refused


async def seed_sessions(database_url: str, count: int = KNOWN_SESSIONS) -> None:
    """Sessions 1 to `count` in spot-gate's table (its migrations have run), archived: they exist,
    and nothing in spot-gate schedules them. Test data, written as rows: a thousand spawns
    through the RPC would only make the tests slower."""
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await conn.execute(
            "INSERT INTO spot_gate.sessions (id, genesis, status) OVERRIDING SYSTEM VALUE "
            "SELECT g, 'api', 'archived' FROM generate_series(1, $1::bigint) g ON CONFLICT (id) DO NOTHING", count)
        await conn.execute("SELECT setval(pg_get_serial_sequence('spot_gate.sessions', 'id'), $1::bigint)", count)
    finally:
        await conn.close()


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def publish_lines(bus: Bus | None, lines: list[tuple[str, int, str, str]]) -> None:
    """(message id, session id, level, message) each, published as the runtime does."""
    assert bus is not None
    await bus.publish_many([
        (INGEST_LOGS, _envelope(mid, LogLineIn(session_id=sid, level=level, message=text, at=T0)), mid)  # type: ignore[arg-type]  # the level is one of the literals
        for mid, sid, level, text in lines])


def _envelope(mid: str, line: LogLineIn) -> bytes:
    return EventEnvelope(id=mid, type=LOG_LINE, version=1, source="runtime", occurred_at=T0,
                         data=line.model_dump(mode="json")).model_dump_json().encode()


async def publish_batches(bus: Bus | None, lines: list[tuple[str, int, str, str]], per_message: int = 500,
                          batch_id: str = "batch") -> None:
    """The same lines as `log_lines` messages of `per_message` lines each, as a runtime that
    buffers its sessions' output sends them."""
    assert bus is not None
    messages = []
    for n, start in enumerate(range(0, len(lines), per_message)):
        chunk = [LogLineItem(message_id=mid, session_id=sid, level=level, message=text, at=T0)  # type: ignore[arg-type]  # the level is one of the literals
                 for mid, sid, level, text in lines[start:start + per_message]]
        mid = f"{batch_id}-{n}"
        body = EventEnvelope(id=mid, type=LOG_LINES, version=1, source="runtime", occurred_at=T0,
                             data=LogLinesIn(lines=chunk).model_dump(mode="json")).model_dump_json().encode()
        messages.append((INGEST_LOGS, body, mid))
    await bus.publish_many(messages)


@contextmanager
def sweeper_process(database_url: str, nats_url: str, log_path: Path | str,
                    **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """`zimmer serve sweeper` as its own process (so a test can kill -9 it), its stderr appended
    to `log_path`, `env` on top of the test settings; killed at exit if it still runs."""
    full = {**os.environ, "ZIMMER_ENV": "test", "ZIMMER_DATABASE_URL": database_url, "ZIMMER_NATS_URL": nats_url,
            "ZIMMER_METRICS_PORT": "-1", "ZIMMER_LOG_LEVEL": "INFO", **env}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zimmer_cli", "serve", "sweeper"], env=full,
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)
