"""`GET /api/v1/health` (issue 15; seed 003 "Queues" … "'N active / M registered' workers"): the
system health report, computed live by the alerts service on each call, served by the gateway so
it answers when the job workers are what stopped (see zimmer_gateway.health_report)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from zimmer_common.contracts import disk as dk
from zimmer_common.contracts import health as h
from zimmer_gateway.auth import authenticated
from zimmer_gateway.health_report import system_health
from zimmer_gateway.routes.common import BusDep, problem_responses

router = APIRouter(dependencies=[Depends(authenticated)])


@router.get("/api/v1/health", tags=["health"], summary="The system health report (queues, cron freshness, workers)",
            response_model=h.HealthReport, responses=problem_responses())
async def health(request: Request) -> h.HealthReport:
    """`overall_status` (ok, warning, critical) and why: the queue verdict (`execution_stalled`,
    `wedged_lane:<lane>`, `backlog_lane:<lane>`, `backlog_cross_lane`), every lane's ready and
    claimed work with ages, cron freshness per scheduled job, workers (N active / M registered) and
    queue recovery mode; beside them the sweeper's `log_retention` and `disk` readings (never counted
    in `overall_status`). `summary` is the same as prose. When the alerts service cannot compute it,
    the answer is still 200: a report whose status is critical and whose sections say why."""
    service = request.app.state.service
    return await system_health(service.bus, service.clock)


@router.get("/api/v1/health/disk", tags=["health"], summary="Disk and clones: every host's roots and sweeps",
            response_model=dk.DiskHealth, responses=problem_responses())
async def disk(bus: BusDep) -> dk.DiskHealth:
    """Every runtime host's roots (free space, whether this deployment may delete under them and
    why), the newest run of each disk sweep there (counts, bytes freed, refusals) and the guard's
    refusals in the last 24 h. `status`: critical when a host's disk could not be brought back to
    its free-space target, warning after a refusal, a failed sweep or a missing root."""
    return await bus.request(dk.DISK_HEALTH, dk.DiskHealthQuery())
