"""What every REST route module shares: the bus dependency, id and precedence bounds, problems.

The gateway owns no data: each route is one RPC over NATS to the owning service. A refused RPC
arrives as a `ZimmerError` and the app's handler renders it as an RFC 9457 problem (with the
service's `details`, e.g. `details.field` of an `invalid`). Bounds that the database would
otherwise refuse with an internal error (bigint ids, integer precedence) are checked here, so a
bad value is a 422 naming the field instead.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from zimmer_common.bus import Bus
from zimmer_common.errors import ErrorCode, ZimmerError

ID_MAX: Final = 2**63 - 1  # bigint identity columns
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1

RowId = Annotated[int, Field(ge=1, le=ID_MAX)]
Precedence = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX,
                                  description="Rank in the spot queue: higher runs first; ties go to the oldest")]
SessionIdPath = Annotated[int, Path(ge=1, le=ID_MAX, description="The session's id")]
TriggerIdPath = Annotated[int, Path(ge=1, le=ID_MAX, description="The trigger's id")]


class StrictBody(BaseModel):
    """A request body that refuses unknown fields, so a misspelt field is a 422 naming it."""

    model_config = ConfigDict(extra="forbid")


async def bus_of(request: Request) -> Bus:  # async: a plain def would run in a worker thread
    bus = request.app.state.service.bus
    if bus is None:
        raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
    return bus


BusDep = Annotated[Bus, Depends(bus_of)]


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem documents a route may answer with."""
    text = {401: "No valid credential", 404: "No such id", 409: "Refused in the current state",
            422: "Bad input; the problem names the field", 503: "The owning service did not answer"}
    return {s: {"description": text[s], "content": {"application/problem+json": {}}}
            for s in (401, *statuses, 503)}
