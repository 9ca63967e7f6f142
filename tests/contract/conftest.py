"""A live gateway for tests that call it synchronously (schemathesis): the five services run in
a background thread with their own event loop, on a fresh database and their own nats-server."""

from __future__ import annotations

import asyncio
import importlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from zimmer_cli.embedded import start_nats
from zimmer_cli.registry import SERVICES, START_ORDER
from zimmer_common.db import with_database
from zimmer_common.settings import Environment, Settings

START_SECONDS = 120.0


@pytest.fixture(scope="module")
def live_gateway(pg_base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(pg_base_url, f'CREATE DATABASE "{name}"'))
    nats = start_nats(Path(tmp_path_factory.mktemp("live-nats")))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="live-gateway", daemon=True)
    thread.start()
    services: dict[str, Any] = {}
    settings = dict(env=Environment.TEST, database_url=with_database(pg_base_url, name), nats_url=nats.url,
                    api_key="test-fleet-key", operator_token="test-operator-token", metrics_port=-1, http_port=0,
                    http_host="127.0.0.1", rpc_timeout_seconds=5.0, shutdown_grace_seconds=5.0)

    async def start() -> str:
        for service in START_ORDER:
            module, attr = SERVICES[service].split(":")
            built = getattr(importlib.import_module(module), attr)(
                Settings(**settings, instance_id=f"live-{service}"))  # type: ignore[arg-type]  # pydantic-settings validates the values
            services[service] = built
            await built.start()
        return f"http://127.0.0.1:{services['gateway'].http_port}"

    async def stop() -> None:
        for service in reversed(START_ORDER):
            if service in services:
                await services[service].stop()

    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(START_SECONDS)
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(START_SECONDS)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        nats.stop()
        asyncio.run(_admin(pg_base_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
