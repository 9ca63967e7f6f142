"""The Health page (seed 003 "/health"): the overall status, each service's instance, version and
uptime from the pings, the Log Retention and Disk and clones panels (sweeper; never counted in the
overall status), and the health monitors' panels (queues and their backlog breakdown, cron
freshness with each cadence in words, workers, the alerts ledger with each issue's message, snippet,
whether it still pages and its Resolve) from the report the alerts service computes live (issue 15,
issue 32 #6). At the top, an index of the panels with each one's verdict (web/health_index.py); the
long panels fold, open when not ok (templates/panel.html `fold`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from zimmer_common import __version__
from zimmer_common.contracts.alerts import (
    LIST_ALERTS,
    PANEL_ISSUES,
    RESOLVE_CONDITION,
    AlertList,
    AlertQuery,
    ResolveCondition,
)
from zimmer_common.contracts.ops import PingReply
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.health_report import system_health
from zimmer_gateway.web import words
from zimmer_gateway.web.charts import health_charts
from zimmer_gateway.web.health_index import panel_index
from zimmer_gateway.web.health_recovery import recovery_panels
from zimmer_gateway.web.pages import FormRefusal, Ping, Refused, back_to, form_refusal, perform, render, signed_in


async def health_page(service: Service, ping: Ping, request: Request, refused: FormRefusal | None = None,
                      status_code: int = 200) -> Response:
    """The Health page; a refused form (an alert's Resolve, queue recovery mode's, the queued
    messages') re-renders it with the form as it was filled in and the refusal beside it."""
    answers = await ping(service)
    rows = [_service_row(name, answer) for name, answer in answers.items()]
    rows.insert(0, {"name": "gateway", "up": True, "ready": service.ready, "version": __version__,
                    "instance_id": service.settings.instance_id, "uptime": duration(service.uptime),
                    "database": None, "problem": None})
    overall = "ok" if all(r["up"] and r["ready"] for r in rows) else "degraded"
    report = await system_health(service.bus, service.clock)  # with the sweeper's readings beside it
    if overall == "ok" or report.overall_status == "critical":
        overall = report.overall_status
    alerts_before = request.query_params.get("alerts_before")
    alerts, alerts_problem = await _alerts(service, alerts_before)
    recovery = await recovery_panels(service, request, [lane.lane for lane in report.queue.lanes])
    charts = await health_charts(service)
    index = panel_index(overall=overall, rows=rows, report=report, recovery=recovery["recovery"],
                        recovery_problem=recovery["recovery_problem"], alerts=alerts, alerts_problem=alerts_problem,
                        lane_charts_problem=charts["lane_charts_problem"])
    return render(request, "health.html", status_code=status_code, title="Health", overall=overall, rows=rows,
                  retention=report.log_retention, retention_problem=report.log_retention_problem,
                  disk=report.disk, disk_problem=report.disk_problem, report=report, alerts=alerts,
                  alerts_problem=alerts_problem, alerts_before=alerts_before, refused=refused,
                  index=index, folds_ok={e.id: e.ok for e in index}, **recovery, **charts)


def create_health(service: Service, ping: Ping) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/health")
    async def health(request: Request) -> Response:
        signed_in(request)
        return await health_page(service, ping, request)

    @router.post("/health/alerts/resolve")
    async def resolve(request: Request) -> Response:
        """An alert's Resolve: its condition is no longer true (as POST
        /api/v1/alerts/conditions/{key}/resolve), so its page group stops repeating."""
        try:
            await perform(request, service, RESOLVE_CONDITION, lambda form: ResolveCondition(
                condition_key=str(form.get("condition_key") or "")))
        except Refused as refused:
            if refused.error.code.value == "forbidden":
                return refused.response
            key = str((refused.form or {}).get("condition_key") or "")
            return await health_page(service, ping, request, status_code=refused.error.http_status,
                                     refused=form_refusal(f"resolve-{key}", refused.form, refused.error))
        return back_to("/health", "resolved")

    return router


async def _alerts(service: Service, before: str | None) -> tuple[AlertList | None, str | None]:
    """The alerts ledger's newest issues, for the Alerts panel; older ones from `before` (the
    panel's Older link: the list pages by bytes, issue 27 #13)."""
    if service.bus is None:
        return None, "the gateway is not connected to the bus yet"
    try:
        query = AlertQuery(limit=PANEL_ISSUES, before=before or None)
    except ValidationError:
        return None, "invalid: alerts_before is not a cursor this page gave; follow Older as it came"
    try:
        return await service.bus.request(LIST_ALERTS, query), None
    except ZimmerError as exc:
        return None, f"{exc.code.value}: {exc.message}"


def _service_row(name: str, answer: PingReply | ZimmerError) -> dict[str, Any]:
    if isinstance(answer, ZimmerError):
        return {"name": name, "up": False, "ready": False, "version": None, "instance_id": None, "uptime": None,
                "database": None, "problem": f"{answer.code.value}: {answer.message}"}
    return {"name": name, "up": True, "ready": answer.ready, "version": answer.version,
            "instance_id": answer.instance_id, "uptime": duration(answer.uptime_seconds),
            "database": answer.database, "problem": None}


duration = words.duration  # an uptime as every page says a span: "3 d 4 h", "2 h 18 min"
