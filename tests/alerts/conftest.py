"""The alerts service under test: in-process, a frozen clock, its sinks pointed at small fake HTTP
servers (a Slack-compatible webhook and a Sentry-compatible envelope endpoint) that record what they
were sent and answer what the test says."""

from __future__ import annotations

import asyncio
import json
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
    received: list[Any] = field(default_factory=list)  # JSON bodies; an envelope's event payload
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    status: int = 200
    hold: asyncio.Event | None = None  # set: every request waits for it before it is answered (a sink that hangs)


@pytest.fixture
async def fake_sink() -> AsyncIterator[Callable[[], Awaitable[FakeSink]]]:
    runners: list[web.AppRunner] = []

    async def make() -> FakeSink:
        sink = FakeSink(url="")

        async def handle(request: web.Request) -> web.Response:
            if request.content_type == "application/x-sentry-envelope":
                sink.received.append(_envelope_event(await request.read()))
            else:
                sink.received.append(await request.json())
            sink.headers.append(dict(request.headers))
            sink.paths.append(request.path)
            if sink.hold is not None:
                await sink.hold.wait()
            return web.Response(status=sink.status, text="ok" if sink.status < 300 else "no")

        app = web.Application()
        app.router.add_post("/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # the site is started: its server is set
        sink.url = f"http://127.0.0.1:{port}"
        runners.append(runner)
        return sink

    yield make
    for runner in runners:
        await runner.cleanup()


def _envelope_event(body: bytes) -> dict[str, Any]:
    """The event item of a Sentry envelope (envelope header, item header, payload, one per line),
    checked the way Sentry reads it: the item's length is the payload's."""
    header, item, payload = body.rstrip(b"\n").split(b"\n", 2)
    event = json.loads(payload)
    meta = json.loads(item)
    assert meta["type"] == "event" and meta.get("length", len(payload)) == len(payload)
    assert json.loads(header)["event_id"] == event["event_id"]
    return dict(event)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)
