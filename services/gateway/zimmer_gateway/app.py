"""The FastAPI application: probes, the v1 API, metrics (the HTTP requests' own: http_metrics.py),
problem+json errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import PlainTextResponse
from starlette.staticfiles import StaticFiles

from zimmer_common import __version__
from zimmer_common.contracts.health import SYSTEM_HEALTH, HealthQuery, WorkerStatistics
from zimmer_common.contracts.ops import PingReply, PingRequest, ping_rpc
from zimmer_common.contracts.subjects import CONTEXTS
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.appends import Appends
from zimmer_gateway.auth import Realm, authenticated, operator_only
from zimmer_gateway.direct import DirectRoutes
from zimmer_gateway.edge import Edge
from zimmer_gateway.http_metrics import HttpMetrics, request_metrics
from zimmer_gateway.mcp.server import McpSurface
from zimmer_gateway.openapi_doc import with_stated_rules
from zimmer_gateway.problems import install_problem_handlers, problem
from zimmer_gateway.routes.alerts import router as alerts_router
from zimmer_gateway.routes.backlog import APPEND_ROUTE
from zimmer_gateway.routes.backlog import router as backlog_router
from zimmer_gateway.routes.charts import router as charts_router
from zimmer_gateway.routes.common import PROBLEM_TEXT, problem_responses, single_valued_query
from zimmer_gateway.routes.health import router as health_router
from zimmer_gateway.routes.health_actions import router as health_actions_router
from zimmer_gateway.routes.logs import router as logs_router
from zimmer_gateway.routes.spot import router as spot_router
from zimmer_gateway.routes.transcripts import router as transcripts_router
from zimmer_gateway.web.addresses import install_page_errors
from zimmer_gateway.web.costs import create_costs
from zimmer_gateway.web.health import create_health
from zimmer_gateway.web.health_recovery import install_queue_recovery_pages
from zimmer_gateway.web.issues import create_issues
from zimmer_gateway.web.pages import STATIC, NotSignedIn, create_signin, to_signin
from zimmer_gateway.web.quick_bubble import create_quick_bubble
from zimmer_gateway.web.quotas import create_quotas
from zimmer_gateway.web.ranked import create_ranked
from zimmer_gateway.web.sessions import create_sessions
from zimmer_gateway.web.triggers import create_triggers

PEERS: tuple[str, ...] = ("backlog", "spot-gate", "sweeper", "alerts")
READY_TIMEOUT_SECONDS = 2.0


async def ping_peers(service: Service, timeout: float = READY_TIMEOUT_SECONDS) -> dict[str, PingReply | ZimmerError]:
    """Ping every domain service at once; each answer or the error that stood in for it."""
    assert service.bus is not None
    bus = service.bus

    async def one(name: str) -> PingReply | ZimmerError:
        try:
            return await bus.request(ping_rpc(CONTEXTS[name]), PingRequest(), timeout=timeout)
        except ZimmerError as exc:
            return exc

    answers = await asyncio.gather(*(one(n) for n in PEERS))
    return dict(zip(PEERS, answers, strict=True))


def create_app(service: Service) -> FastAPI:
    mcp = McpSurface(service, extra_hosts=[h.strip() for h in service.settings.mcp_allowed_hosts.split(',')])

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # A mounted app's own lifespan never runs: whatever mounted apps need running
        # (the MCP servers' session managers) is entered here and closed on shutdown.
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.running())
            yield

    # The gateway's metrics are Prometheus'; with FastAPI's OpenTelemetry hooks on, every request
    # would first look for a configured OpenTelemetry provider.
    app = FastAPI(title="Zimmer control plane", version=__version__, lifespan=lifespan,
                  telemetry={"tracing": False, "metrics": False, "logs": False},
                  description="REST API of the Zimmer control plane. Authenticate with `Authorization: Bearer <key>`.")
    app.state.settings = service.settings
    app.state.service = service
    app.state.appends = Appends(lambda: service.bus)
    install_problem_handlers(app)
    app.add_middleware(DirectRoutes, fastapi=app, routes=[APPEND_ROUTE])  # the busiest route, past the router
    app.add_middleware(Edge, settings=service.settings)  # before any body is read
    # Outermost: requests and latency per route template (what Edge refuses too); the direct
    # routes are counted without resolving their template through the routes (http_metrics.py).
    app.add_middleware(HttpMetrics, registry=service.metrics.registry, direct=[APPEND_ROUTE])
    request_metrics(service.metrics.registry)  # on /metrics from the start (the layer is built on the first request)

    @app.get("/healthz", tags=["probes"], summary="The gateway process is alive")
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz", tags=["probes"], summary="NATS, every service and their PostgreSQL answer",
             responses={503: {"description": "Something is down; the problem names it in `missing`",
                              "content": {"application/problem+json": {}}}})
    async def readyz(request: Request) -> Any:
        """Ready when the gateway is connected to NATS and every service answers a ping over it
        within 2 s with its own database answering `SELECT 1`. `missing` names what is not:
        `message bus`, a service, or `database (<service>)`."""
        if service.bus is None or not service.ready:
            return _not_ready(request, "the gateway itself is still starting", ["gateway"])
        if not service.bus.nc.is_connected:
            return _not_ready(request, "not ready: message bus unavailable", ["message bus"])
        answers = await ping_peers(service)
        missing = sorted(_missing(n, a) for n, a in answers.items() if isinstance(a, ZimmerError) or not a.ready)
        described = {n: _describe(a) for n, a in answers.items()}
        if missing:
            return _not_ready(request, f"not ready: {', '.join(missing)}", missing, services=described)
        return {"ready": True, "message_bus": "up", "services": described}

    @app.get("/metrics", tags=["probes"], summary="Prometheus metrics of the gateway", response_class=PlainTextResponse,
             responses={200: {"description": "Prometheus text exposition format",
                              "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
    async def metrics() -> Response:
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/api/v1/ping", tags=["system"], summary="Check the credential and the gateway",
             responses=problem_responses())
    async def api_ping(realm: Realm = Depends(authenticated)) -> dict[str, Any]:
        return {"service": "gateway", "version": __version__, "instance_id": service.settings.instance_id,
                "uptime_seconds": round(service.uptime, 3), "realm": realm.value}

    @app.get("/api/v1/services", tags=["system"], summary="Ping every service, and every instance's state (operator only)",
             responses=problem_responses(403))
    async def services(_realm: Realm = Depends(operator_only),
                       timeout: float = Query(READY_TIMEOUT_SECONDS, gt=0, le=10,
                                              description="Seconds to wait for each service")) -> dict[str, Any]:
        """`services`: each service's answer to a ping (whichever replica answers it). `instances`:
        every instance that sent a heartbeat in the last hour and was not retired by a graceful
        stop, `up` or `down` (two of its heartbeat intervals missed), and `instances_up` per service
        ("2 of 2"), as the alerts service reads them; null with `instances_problem` when it cannot."""
        answers, workers = await asyncio.gather(ping_peers(service, timeout), _workers(service))
        body: dict[str, Any] = {"services": {n: _describe(a) for n, a in answers.items()}}
        if isinstance(workers, str):
            return {**body, "instances": None, "instances_up": None, "instances_problem": workers}
        return {**body, "instances": [i.model_dump(mode="json") for i in workers.instances],
                "instances_up": {k: v.model_dump() for k, v in workers.by_service.items()}}

    install_openapi(app)
    ONE_VALUE_EACH = [Depends(single_valued_query)]  # a scalar query parameter given twice is a 422
    # sessions, turns, triggers, spot policy, costs, quota readings
    app.include_router(spot_router, dependencies=ONE_VALUE_EACH)
    # work backlog items: read, append, pull; operator-only pin/remove/start now
    app.include_router(backlog_router, dependencies=ONE_VALUE_EACH)
    app.include_router(alerts_router, dependencies=ONE_VALUE_EACH)  # the alerts ledger
    app.include_router(logs_router, dependencies=ONE_VALUE_EACH)  # session timelines and log retention readings (sweeper)
    # archived transcript zips, from the object store (sweeper's)
    app.include_router(transcripts_router, dependencies=ONE_VALUE_EACH)
    # queue recovery mode and queued-message maintenance (alerts)
    app.include_router(health_actions_router, dependencies=ONE_VALUE_EACH)
    app.include_router(health_router, dependencies=ONE_VALUE_EACH)  # the system health report (alerts)
    app.include_router(charts_router, dependencies=ONE_VALUE_EACH)  # the charts' history (spot-gate, alerts)

    # The operator pages: sign-in, Issues, Health (a page without a session goes to sign-in).
    app.add_exception_handler(NotSignedIn, lambda _request, exc: to_signin(exc.path))
    for pages in (create_signin(service), create_issues(service), create_quotas(service), create_costs(service),
                  create_sessions(service), create_ranked(service), create_quick_bubble(), create_triggers(service),
                  create_health(service, ping_peers)):
        app.include_router(pages)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    install_page_errors(app)  # a browser's bad address (/sessions/abc) answers a page, not problem JSON
    install_queue_recovery_pages(app, service, ping_peers)  # recovery mode's banner on every page; its Health panels' forms

    # MCP over streamable HTTP (DESIGN §6). The route answers `/mcp` itself (a mount alone
    # would redirect it to `/mcp/`), the mount answers `/mcp/`.
    app.add_route("/mcp", mcp, include_in_schema=False)
    app.mount("/mcp", mcp)
    return app


def install_openapi(app: FastAPI) -> None:
    """The generated document, plus what every route can answer that FastAPI cannot see: a body
    that is not JSON is a 400 wherever a body is read (problem documents as everywhere)."""
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            for path, methods in spec.get("paths", {}).items():
                for op in methods.values():
                    if "requestBody" in op and path.startswith("/api/"):
                        op["responses"].setdefault("400", {
                            "description": PROBLEM_TEXT[400], "content": {"application/problem+json": {}}})
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to replace the schema
    # ... and what FastAPI's document leaves out (integer bounds as integers, ids up to 2^63 - 1, no NUL).
    with_stated_rules(app)


async def _workers(service: Any) -> WorkerStatistics | str:
    """The alerts service's reading of the instances, or why there is none."""
    try:
        return (await service.bus.request(SYSTEM_HEALTH, HealthQuery())).workers
    except ZimmerError as exc:
        return exc.message


def _not_ready(request: Request, detail: str, missing: list[str], **extra: Any) -> Any:
    """A 503 like every other outage answer (DESIGN §5): `code`, `retry_safe`, and the
    `dependency` that is down: the message bus, the database, or the first service missing."""
    dependency = next((m for m in missing if m == "message bus"), None) or next(
        ("database" for m in missing if m.startswith("database (")), missing[0])
    return problem(503, detail, instance=request.url.path, code="unavailable", retry_safe=True,
                   dependency=dependency, missing=missing, headers={"Retry-After": "1"}, **extra)


def _missing(name: str, answer: PingReply | ZimmerError) -> str:
    if isinstance(answer, PingReply) and answer.database is False:
        return f"database ({name})"
    return name


def _describe(answer: PingReply | ZimmerError) -> dict[str, Any]:
    if isinstance(answer, ZimmerError):
        return {"up": False, "error": answer.code.value, "detail": answer.message}
    return {"up": answer.ready, **answer.model_dump(mode="json")}
