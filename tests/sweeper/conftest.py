"""The sweeper in-process against real PostgreSQL and NATS, and helpers to publish log lines as
the runtime does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from zimmer_common.clock import FrozenClock
from zimmer_common.contracts.logs import INGEST_LOGS, LOG_LINE, LogLineIn
from zimmer_common.db import asyncpg_dsn
from zimmer_common.service import Service
from zimmer_sweeper.service import build

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def publish_lines(service: Service, lines: list[tuple[str, int, str, str]]) -> None:
    """(message id, session id, level, message) each, published as the runtime does."""
    assert service.bus is not None
    await service.bus.publish_many([
        (INGEST_LOGS, _envelope(mid, LogLineIn(session_id=sid, level=level, message=text, at=T0)), mid)  # type: ignore[arg-type]
        for mid, sid, level, text in lines])


def _envelope(mid: str, line: LogLineIn) -> bytes:
    from zimmer_common.contracts.envelope import EventEnvelope
    return EventEnvelope(id=mid, type=LOG_LINE, version=1, source="runtime", occurred_at=T0,
                         data=line.model_dump(mode="json")).model_dump_json().encode()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
async def sweeper(settings_factory, clock) -> AsyncIterator[Service]:  # type: ignore[no-untyped-def]
    service = build(settings_factory(), clock=clock)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


@pytest.fixture
async def sql(database_url: str) -> AsyncIterator[Callable[..., Awaitable[list[Any]]]]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))

    async def run(query: str, *args: Any) -> list[Any]:
        return list(await conn.fetch(query, *args))

    try:
        yield run
    finally:
        await conn.close()
