"""What the backlog's tests share: the backlog schema, migrated, behind an engine."""

from __future__ import annotations

import pytest

from zimmer_common.db import create_engine, migrate


@pytest.fixture
async def engine(database_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    await migrate(database_url, "backlog", "zimmer_backlog.migrations")
    eng = create_engine(database_url)
    try:
        yield eng
    finally:
        await eng.dispose()
