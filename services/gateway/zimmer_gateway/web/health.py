"""The Health page (seed 003 "/health"): the overall status, each service's instance, version and
uptime from the pings, the Log Retention and Disk and clones panels (sweeper; never counted in the
overall status), and the health monitors' panels (queues and their backlog breakdown, cron
freshness, workers, the alerts ledger) from the report the alerts service computes live (issue 15)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from zimmer_common import __version__
from zimmer_common.contracts.alerts import LIST_ALERTS, AlertList, AlertQuery
from zimmer_common.contracts.ops import PingReply
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.health_report import system_health
from zimmer_gateway.web.health_recovery import recovery_panels
from zimmer_gateway.web.pages import Ping, render, signed_in


def create_health(service: Service, ping: Ping) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/health")
    async def health(request: Request) -> Response:
        signed_in(request)
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
        return render(request, "health.html", title="Health", overall=overall, rows=rows,
                      retention=report.log_retention, retention_problem=report.log_retention_problem,
                      disk=report.disk, disk_problem=report.disk_problem, report=report, alerts=alerts,
                      alerts_problem=alerts_problem, alerts_before=alerts_before,
                      **await recovery_panels(service, request, [lane.lane for lane in report.queue.lanes]))

    return router


async def _alerts(service: Service, before: str | None) -> tuple[AlertList | None, str | None]:
    """The alerts ledger's newest issues, for the Alerts panel; older ones from `before` (the
    panel's Older link: the list pages by bytes, issue 27 #13)."""
    if service.bus is None:
        return None, "the gateway is not connected to the bus yet"
    try:
        query = AlertQuery(limit=10, before=before or None)
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


def duration(seconds: float) -> str:
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    return " ".join([f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours or days) + [f"{minutes}m", f"{s}s"])
