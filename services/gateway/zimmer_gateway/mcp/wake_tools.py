"""The MCP tool an agent sleeps with (seed 004 "A pause is a floor, not a promotion"), in the
`sessions` group: `wake_me_up_later` arms a wall-clock wake on the session its connection speaks
for (the X-Zimmer-Session-Id header), or on a session it names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import Field

from zimmer_common.contracts import spot as c
from zimmer_common.contracts.fields import Prompt, Time
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.mcp.registry import tool
from zimmer_gateway.mcp.spot_tools import _bus
from zimmer_gateway.routes.common import ID_MAX


@tool(group="sessions", read_only=False, destructive=False, idempotent=False)
async def wake_me_up_later(
    service: Service,
    minutes: Annotated[int | None, Field(ge=1, le=60 * 24 * 30, description="Sleep this many minutes")] = None,
    at: Annotated[Time | None, Field(description="Or sleep until this moment (ISO 8601)")] = None,
    prompt: Annotated[Prompt | None, Field(description="What the wake tells you (default: continue)")] = None,
    session_id: Annotated[int | None, Field(ge=1, le=ID_MAX, description=(
        "The session to sleep; default: the one this connection speaks for"))] = None,
    acting_session: int | None = None,
) -> c.SessionView:
    """Sleep until a moment: end your turn, and nothing starts this session before then, whatever
    its precedence or class. Then the wake delivers `prompt` as a turn that still answers to the
    spot gate (a spot session whose window is spent is held, and started by the queue). Give
    minutes or at. A new sleep replaces the last."""
    target = session_id or acting_session
    if target is None:
        raise ZimmerError(ErrorCode.INVALID, "name session_id, or connect with X-Zimmer-Session-Id",
                          {"field": "session_id"})
    if (minutes is None) == (at is None):
        raise ZimmerError(ErrorCode.INVALID, "give minutes or at, not both", {"field": "minutes"})
    until = at or datetime.now(UTC) + timedelta(minutes=minutes or 0)
    return await _bus(service).request(c.PAUSE_UNTIL, c.PauseUntil(
        session_id=target, until=until, prompt=prompt, halt=False, by=f"session {acting_session}" if acting_session
        else "an agent"))
