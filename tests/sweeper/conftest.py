"""The sweeper in-process against real PostgreSQL and NATS, and a SQL helper on its database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from sweeping import T0  # type: ignore[import-not-found]

from zimmer_common.clock import FrozenClock
from zimmer_common.db import asyncpg_dsn
from zimmer_common.service import Service
from zimmer_sweeper.service import build


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
