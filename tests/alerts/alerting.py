"""What the alerts tests share besides fixtures: the frozen clock's start and a bounded wait."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, tries: int = 200) -> None:
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
