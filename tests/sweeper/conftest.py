"""The sweeper in-process against real PostgreSQL and NATS, spot-gate beside it (the ingest asks it
which sessions exist), and a SQL helper on their database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from sweeping import T0, seed_sessions  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.clock import FrozenClock
from zimmer_common.db import asyncpg_dsn
from zimmer_common.service import Service
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.service import build


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
async def spot(settings_factory, clock, database_url) -> AsyncIterator[Service]:  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """spot-gate, running, owning sessions 1 to `sweeping.KNOWN_SESSIONS` (archived ones: they
    exist, so their log lines are taken, and nothing schedules them)."""
    service = build_spot(settings_factory(), clock=clock)
    await service.start()
    await seed_sessions(database_url)
    try:
        yield service
    finally:
        await service.stop()


@pytest.fixture
async def sweeper(settings_factory, clock, spot) -> AsyncIterator[Service]:  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
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
