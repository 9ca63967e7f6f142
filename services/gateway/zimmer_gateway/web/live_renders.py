"""One render for a burst of live re-fetches of the same page (issue 32 #1, docs/pages.md).

One event wakes every open page of its families at once, and each re-fetches itself: with 50 pages
open that was 40 renders of the same few addresses in the same instant, each with its RPCs. This
ASGI layer answers a live page's re-fetch (`live.js` sends `X-Zimmer-Live: 1`) of an address whose
render is in flight or made, since the last event the feed heard (the broadcaster's generation)
and less than `FRESH_SECONDS` ago, with that render, the reader's own CSRF token put in place of
the first reader's (the only thing in a page that differs between
operators; "As of" is the render's own moment). Only a signed-in operator's GET is served so, only a
200 HTML answer is shared, and a shared answer carries no cookie. Every other request passes by.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from zimmer_common.settings import Settings
from zimmer_gateway.live import Broadcaster
from zimmer_gateway.web import session as web_session

FRESH_SECONDS: Final = 0.25
HEADER: Final = b"x-zimmer-live"


@dataclass
class Render:
    at: float
    csrf: str
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class LiveRenders:
    def __init__(self, app: ASGIApp, settings: Settings, broadcaster: Broadcaster) -> None:
        self.app, self.settings = app, settings
        self.generation: Callable[[], int] = lambda: broadcaster.generation
        self.shared = broadcaster.shared_renders
        self.renders: dict[str, Render] = {}
        self.pending: dict[str, asyncio.Future[Render | None]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not any(k == HEADER for k, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return
        reader = web_session.read_session(Request(scope), self.settings)
        if reader is None:
            await self.app(scope, receive, send)
            return
        # A render made before the last event is never shared after it.
        generation = str(self.generation())
        key = f'{generation} {scope["path"]}?{scope.get("query_string", b"").decode("latin-1")}'
        now = time.monotonic()
        for stale in [k for k, r in self.renders.items()
                      if now - r.at >= FRESH_SECONDS or k.split(" ", 1)[0] != generation]:
            del self.renders[stale]
        render = self.renders.get(key)
        if render is None and key in self.pending:
            render = await asyncio.shield(self.pending[key])
        if render is not None:
            self.shared.inc()
            await replay(render, reader.csrf, send)
            return
        waiting: asyncio.Future[Render | None] = asyncio.get_running_loop().create_future()
        self.pending[key] = waiting
        made: Render | None = None
        try:
            made = await self._render(scope, receive, send, reader.csrf)
        finally:
            del self.pending[key]
            if made is not None:
                self.renders[key] = made
            waiting.set_result(made)

    async def _render(self, scope: Scope, receive: Receive, send: Send, csrf: str) -> Render | None:
        """Run the page, passing its answer on as it goes; keep it when it is a whole 200 HTML page."""
        start: dict[str, Any] = {}
        body: list[bytes] = []

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, keep)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"set-cookie", b"content-length")]
        html = any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in headers)
        if start.get("status") != 200 or not html:
            return None
        return Render(time.monotonic(), csrf, 200, headers, b"".join(body))


async def replay(render: Render, csrf: str, send: Send) -> None:
    body = render.body.replace(render.csrf.encode(), csrf.encode()) if render.csrf != csrf else render.body
    await send({"type": "http.response.start", "status": render.status,
                "headers": [*render.headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
