"""The gateway's HTTP metrics (issue 31 #3): requests and their latency, per route template,
method and status class, on the service's own registry (the one `/metrics` serves).

    zimmer_http_requests_total{handler, method, status}
    zimmer_http_request_duration_seconds{handler, method, status}   (a histogram)

`handler` is the route's template (`/api/v1/sessions/{session_id}`, never the raw path), a
mount's path (`/mcp`, `/static`) for what a mount serves, and `none` for a path no route
matches (and for what the edge refuses before any route is known, except on a direct route);
`status` is the class (`2xx`, `4xx`, `5xx`). So the label values are bounded by the app's routes,
whatever paths clients send.

`prometheus-fastapi-instrumentator`'s middleware times every request and classes its status, with
the gateway's own two metrics as its instrumentation. Two costs are kept off the requests:

- The route is named after the app ran, from what the router recorded in the scope
  (`AfterRouting`), instead of the instrumentator walking the routes before it (on this app that
  added about 0.26 ms to a /healthz request that takes 0.14 ms without metrics, and 0.8 ms to a
  path that matches nothing; naming it afterwards adds 0.08 ms to /healthz, in-process on 2 busy
  cores).
- The direct routes (`direct.py`: the append, the busiest route, served past the router) are
  known by method and path: `HttpMetrics` counts them itself, under the same names and the route's
  template, without the instrumentator's per-request objects.

`HttpMetrics` is the outermost of the gateway's layers, so what `Edge` refuses (401, 413, a query
value that cannot be stored) is counted as well, and a request's time includes reading its body.

A registry holds each metric once: the metrics are made once per registry (an app built twice on
one service, as some tests do, shares them), and every service has its own registry.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from timeit import default_timer
from typing import Any

from fastapi.routing import APIRoute
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_fastapi_instrumentator.metrics import Info
from prometheus_fastapi_instrumentator.middleware import PrometheusInstrumentatorMiddleware
from prometheus_fastapi_instrumentator.routing import get_route_name
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = "zimmer_http_requests_total"
SECONDS = "zimmer_http_request_duration_seconds"
LABELS = ("handler", "method", "status")
UNMATCHED = "none"  # the instrumentator's label for a path no route matches
PENDING = "(named after routing)"
# Like zimmer_rpc_seconds' buckets (a request is mostly one RPC), and two more for slow pages.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class RequestMetrics:
    """The two metrics on one registry, and the instrumentation the instrumentator calls."""

    def __init__(self, registry: CollectorRegistry):
        self.requests = Counter(REQUESTS, "HTTP requests answered by the gateway, by route template, method and "
                                "status class", LABELS, registry=registry)
        self.seconds = Histogram(SECONDS, "Time from the request's arrival to its last byte answered, by route "
                                 "template, method and status class", LABELS, registry=registry, buckets=BUCKETS)
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def observe(self, handler: str, method: str, status: str, seconds: float) -> None:
        # Looked up once per label set, not on every request (as ServiceMetrics.rpc_served does).
        key = (handler, method, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.requests.labels(*key), self.seconds.labels(*key))
        children[0].inc()
        children[1].observe(seconds)

    def instrumentation(self, info: Info) -> None:
        template = route_template(info.request.scope)
        if template in STREAMS:  # open as long as a page is: its clients are zimmer_gateway_live_clients
            return
        self.observe(template, info.method, info.modified_status, info.modified_duration)


STREAMS = frozenset({"/live"})  # the live pages' event streams (web/live.py): never timed as requests
_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, RequestMetrics] = weakref.WeakKeyDictionary()


def request_metrics(registry: CollectorRegistry) -> RequestMetrics:
    """The registry's request metrics, made on first use."""
    found = _BY_REGISTRY.get(registry)
    if found is None:
        found = _BY_REGISTRY[registry] = RequestMetrics(registry)
    return found


class AfterRouting(PrometheusInstrumentatorMiddleware):
    """The instrumentator, naming the route after the app ran rather than before: the router
    records the route it matched in the scope (`scope["route"]`; a mount's path in `root_path`),
    so nothing walks the routes a second time (see the module's doc)."""

    def _get_handler(self, request: Request) -> tuple[str, bool]:
        return PENDING, True  # the instrumentation names it (route_template)


class HttpMetrics:
    """The outermost ASGI layer: counts and times every HTTP request (see the module's doc)."""

    def __init__(self, app: ASGIApp, registry: CollectorRegistry, direct: Iterable[APIRoute] = ()):
        self.app = app
        self.metrics = request_metrics(registry)
        self.direct = {(method, route.path): route.path for route in direct for method in route.methods}
        self.instrumented = AfterRouting(app, should_group_status_codes=True, registry=registry,
                                         instrumentations=[self.metrics.instrumentation])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        template = self.direct.get((scope.get("method", ""), scope["path"])) if scope["type"] == "http" else None
        if template is None:
            await self.instrumented(scope, receive, send)
            return
        start = default_timer()
        status = 500  # what the client gets when the app raises before answering

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self.metrics.observe(template, scope["method"], f"{str(status)[0]}xx", max(default_timer() - start, 0.0))


def route_template(scope: Scope) -> str:
    """The template of the route that answered, from what routing left in the scope: an API
    route's path; a mount's path; a plain route (`/mcp`) found as the instrumentator finds it;
    `none` when no route was matched (a 404, a redirect to the path with(out) its slash, or a
    refusal by the edge, before routing)."""
    route = scope.get("route")
    if route is not None and getattr(route, "path", None):
        return str(route.path)
    if scope.get("endpoint") is None:
        return UNMATCHED
    app_root = scope.get("app_root_path", scope.get("root_path", ""))
    if scope.get("root_path", "") != app_root:  # a mount: routing appended its path to the root path
        return str(scope["root_path"])[len(app_root):]
    name = get_route_name(Request({**scope, "root_path": app_root}), should_include_root_path=False)
    return name or UNMATCHED
