"""The session timeline over MCP (issue 14), in the `sessions` group: `get_session_logs` reads a
session's log lines a page at a time, as `GET /api/v1/sessions/{id}/logs` does."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from zimmer_common.contracts import logs as lg
from zimmer_common.contracts import spot as c
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.mcp.registry import tool
from zimmer_gateway.mcp.spot_tools import _bus
from zimmer_gateway.routes.common import ID_MAX


@tool(group="sessions", read_only=True, destructive=False, idempotent=True)
async def get_session_logs(
    service: Service,
    session_id: Annotated[int | None, Field(ge=1, le=ID_MAX, description=(
        "The session; default: the one this connection speaks for"))] = None,
    levels: Annotated[list[lg.LogLevel] | None, Field(
        max_length=4, description="Only these levels; default every level but verbose (raw CLI output)")] = None,
    cursor: Annotated[str | None, Field(max_length=200, description="next_cursor of the previous page")] = None,
    order: Literal["asc", "desc"] = "asc",
    limit: Annotated[int, Field(ge=1, le=1000, description="At most this many lines")] = 100,
    acting_session: int | None = None,
) -> lg.LogPage:
    """A session's timeline: its log lines in the order they were written (desc: newest first),
    a page at a time; pass next_cursor back for the next page. Verbose lines are kept 7 days,
    the rest 90."""
    target = session_id or acting_session
    if target is None:
        raise ZimmerError(ErrorCode.INVALID, "name session_id, or connect with X-Zimmer-Session-Id",
                          {"field": "session_id"})
    bus = _bus(service)
    await bus.request(c.GET_SESSION, c.SessionRef(session_id=target))  # not_found for an unknown session
    return await bus.request(lg.GET_SESSION_LOGS, lg.LogQuery(session_id=target, levels=levels, cursor=cursor,
                                                             order=order, limit=limit))
