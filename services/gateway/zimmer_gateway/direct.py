"""Routes served straight from the edge, past FastAPI's router (issue 9).

For each request the router tries the routes in turn until one matches (the append's is the
37th), then wraps the request in exception and exit-stack layers; on the append, the gateway's
busiest route, that cost more CPU than the route's own work. A direct route keeps
everything else: it is declared to FastAPI as usual (its OpenAPI entry, its validation), it runs
the handler FastAPI would run (`APIRoute.get_route_handler`), and an exception it raises becomes
the problem document the app's own handler for it makes, as the router's layers would have done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Handler = Callable[[Request], Awaitable[Response]]


class DirectRoutes:
    def __init__(self, app: ASGIApp, fastapi: FastAPI, routes: Sequence[APIRoute]):
        self.app = app
        self.fastapi = fastapi
        self.handlers: dict[tuple[str, str], Handler] = {
            (method, route.path): route.get_route_handler() for route in routes for method in route.methods}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.handlers.get((scope.get("method", ""), scope["path"])) if scope["type"] == "http" else None
        if handler is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive, send)
        try:
            response = await handler(request)
        except Exception as exc:  # noqa: BLE001 - every exception becomes the app's answer for it
            response = await self._answer_for(request, exc)
        await response(scope, receive, send)

    async def _answer_for(self, request: Request, exc: Exception) -> Response:
        """The app's handler for `exc`, looked up by its class as Starlette does; the handler for
        `Exception` (a logged 500) when none is closer."""
        handlers: dict[Any, Any] = self.fastapi.exception_handlers
        for cls in type(exc).__mro__:
            if cls in handlers:
                return await handlers[cls](request, exc)  # type: ignore[no-any-return]  # the handlers' table is typed loosely
        raise exc
