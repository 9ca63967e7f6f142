"""Helpers the runtime client's tests share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from zimmer_runtime import Command

FLEET = {"Authorization": "Bearer test-fleet-key"}


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 20.0, what: str = "condition") -> Any:
    """Poll `check` until it returns something truthy, at most `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await check()
        if value:
            return value
        assert loop.time() < deadline, f"{what}: not true within {within:g}s (last: {value!r})"
        await asyncio.sleep(0.1)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels or None) or 0.0


async def spawn(gateway: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await gateway.post("/api/v1/sessions", json={"genesis": "api", "title": "runtime test", "start": False,
                                                        **body})
    assert resp.status_code == 201, resp.text
    return resp.json()["session"]


async def next_command(commands: Any, within: float = 15.0) -> Command[Any]:
    async def first() -> Command[Any]:
        async for command in commands:
            return command
        raise AssertionError("the command stream ended")

    return await asyncio.wait_for(first(), within)
