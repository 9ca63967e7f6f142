"""Session logs and their retention (issue 14; seed 003 "Log retention"): a session's timeline,
a page at a time, and the readings behind the Health page's Log Retention panel. Each is one RPC
to the sweeper; the timeline first asks spot-gate that the session exists, so an unknown id is a
404 rather than an empty page."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from zimmer_common.contracts import logs as lg
from zimmer_common.contracts import spot as c
from zimmer_gateway.auth import authenticated
from zimmer_gateway.routes.common import BusDep, SessionIdPath, problem_responses

router = APIRouter(dependencies=[Depends(authenticated)])


@router.get("/api/v1/sessions/{session_id}/logs", tags=["sessions"], summary="A session's timeline (its log lines)",
            response_model=lg.LogPage, responses=problem_responses(404))
async def session_logs(
    session_id: SessionIdPath, bus: BusDep,
    level: Annotated[list[lg.LogLevel] | None, Query(
        max_length=4, description="Repeatable; default every level but verbose (raw CLI output)")] = None,
    cursor: Annotated[str | None, Query(max_length=200, description="next_cursor of the previous page")] = None,
    order: Literal["asc", "desc"] = "asc",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> lg.LogPage:
    """Lines in the order the sweeper wrote them (`order=desc`: newest first). Verbose lines are
    kept 7 days, the rest 90 (the timeline of an archived session stays readable for a quarter);
    a deleted session's lines are gone with it."""
    await bus.request(c.GET_SESSION, c.SessionRef(session_id=session_id))  # 404 for an unknown session
    return await bus.request(lg.GET_SESSION_LOGS, lg.LogQuery(session_id=session_id, levels=level, cursor=cursor,
                                                             order=order, limit=limit))


@router.get("/api/v1/health/log_retention", tags=["health"], summary="Is log retention running? (no shell needed)",
            response_model=lg.LogRetentionHealth, responses=problem_responses())
async def log_retention(bus: BusDep) -> lg.LogRetentionHealth:
    """Estimated rows and sizes from the catalog, the oldest row's age per class from partition
    bounds (to the day), the last retention tick, and the ingest's lag. `status` is `warning` once
    the oldest row is more than a week past its window; it is never counted in the overall status."""
    return await bus.request(lg.LOG_RETENTION_HEALTH, lg.RetentionHealthQuery())
