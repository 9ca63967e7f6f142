"""`GET /live?page=…`: an operator page's server-sent event stream (issue 32 #1, docs/pages.md
"Live pages").

Operator cookie only. The stream carries no data, only what to do: `changed` (something this page
shows may have changed: re-fetch yourself), `paused` (the gateway's live feed is down: say "Live
updates paused") and `live` (it is back: re-fetch, clear the banner). A comment every
`HEARTBEAT_SECONDS` keeps proxies from closing an idle stream. The page's script (`static/live.js`)
re-fetches the page and swaps what changed, never a focused or edited field; without script the
page is an ordinary page.

A session's page names its session (`session`) and the sessions its hierarchy panel shows
(`shown`, comma-separated ids): its stream then carries `changed` only for an event about one of
those, or about a session whose parent is its own (a new child), not for every session's event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Final, Literal

from fastapi import APIRouter, Query, Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from zimmer_gateway.live import Broadcaster
from zimmer_gateway.web import session as web_session

HEARTBEAT_SECONDS: Final = 15.0
SLICE_SECONDS: Final = 1.0  # how soon a stream notices the gateway is stopping
RETRY_MS: Final = 2000  # the browser's reconnect delay after the stream drops
Page = Literal["issues", "ranked", "sessions", "session", "quotas", "health"]
SHOWN: Final = r"^([0-9]+(,[0-9]+)*)?$"
SHOWN_MAX_CHARS: Final = 2000  # the hierarchy panel draws at most 20 ancestors and 50 children


def live_family(path: str) -> str | None:
    """The live page family of a page's path, or None for a page that does not refresh itself."""
    parts = [p for p in path.split("/") if p]
    if len(parts) == 1 and parts[0] in ("issues", "ranked", "sessions", "quotas", "health"):
        return parts[0]
    if len(parts) == 2 and parts[0] == "sessions" and parts[1].isdigit():
        return "session"
    return None


def create_live(broadcaster: Broadcaster, closing: Callable[[], bool]) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/live")
    async def live(request: Request, page: Page, session: Annotated[int | None, Query(ge=1)] = None,
                   shown: Annotated[str, Query(max_length=SHOWN_MAX_CHARS, pattern=SHOWN)] = "") -> Response:
        if web_session.read_session(request, request.app.state.settings) is None:
            return PlainTextResponse("Sign in first.", status_code=401)
        scope = frozenset(int(n) for n in shown.split(",") if n)
        client = broadcaster.subscribe(page, own=session if page == "session" else None, shown=scope)

        async def stream() -> AsyncIterator[str]:
            try:
                yield f"retry: {RETRY_MS}\nevent: {'live' if broadcaster.up else 'paused'}\ndata: \n\n"
                quiet = 0.0
                while not closing() and not client.dropped.is_set():
                    try:
                        notice = await asyncio.wait_for(client.queue.get(), timeout=SLICE_SECONDS)
                    except TimeoutError:
                        quiet += SLICE_SECONDS
                        if quiet >= HEARTBEAT_SECONDS:
                            quiet = 0.0
                            yield ": heartbeat\n\n"
                        continue
                    if notice == "changed":
                        client.change_pending = False  # the next event queues a new notice
                    quiet = 0.0
                    yield f"event: {notice}\ndata: \n\n"
            finally:
                broadcaster.unsubscribe(client)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    return router

