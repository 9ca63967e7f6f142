"""The runtime client's tests: the whole stack in-process, on a NATS server the test may kill
with SIGKILL and start again on the same port and store (the client must lose no report)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats_control import KillableNats, killable_server
from prometheus_client import CollectorRegistry
from runtime_stack import FLEET

from zimmer_runtime import RuntimeClient


@pytest.fixture
async def killable_nats(tmp_path: Path) -> AsyncIterator[KillableNats]:
    async with killable_server(tmp_path) as nats:
        yield nats


@pytest.fixture
def nats_url(killable_nats: KillableNats) -> str:
    """The stack (through settings_factory) runs on the killable server."""
    return killable_nats.url


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def runtime(nats_url: str, registry: CollectorRegistry) -> AsyncIterator[RuntimeClient]:
    client = await RuntimeClient.connect(nats_url, name="test-runtime", registry=registry, command_ack_wait=2.0)
    try:
        yield client
    finally:
        await client.close(grace=2.0)


@pytest.fixture
async def gateway(stack: Any) -> AsyncIterator[httpx.AsyncClient]:
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as http:
        yield http
