"""The alerts service under test: in-process, a frozen clock, its sinks pointed at small fake HTTP
servers (a Slack-compatible webhook and a Sentry-compatible store endpoint) that record what they
were sent and answer what the test says."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from alerting import T0  # a sibling module: pytest puts this directory on the path
from zimmer_common.clock import FrozenClock


@dataclass
class FakeSink:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    status: int = 200


@pytest.fixture
async def fake_sink() -> AsyncIterator[Callable[[], Awaitable[FakeSink]]]:
    runners: list[web.AppRunner] = []

    async def make() -> FakeSink:
        sink = FakeSink(url="")

        async def handle(request: web.Request) -> web.Response:
            sink.received.append(await request.json())
            sink.headers.append(dict(request.headers))
            return web.Response(status=sink.status, text="ok" if sink.status < 300 else "no")

        app = web.Application()
        app.router.add_post("/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        sink.url = f"http://127.0.0.1:{port}"
        runners.append(runner)
        return sink

    yield make
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)
