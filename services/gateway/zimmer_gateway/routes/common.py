"""What every REST route module shares: the bus dependency, id and precedence bounds, problems.

The gateway owns no data: each route is one RPC over NATS to the owning service. A refused RPC
arrives as a `ZimmerError` and the app's handler renders it as an RFC 9457 problem (with the
service's `details`, e.g. `details.field` of an `invalid`). Bounds that the database would
otherwise refuse with an internal error (bigint ids, integer precedence) are checked here, so a
bad value is a 422 naming the field instead.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, Final, Union, get_args, get_origin

from fastapi import Depends, Header, HTTPException, Path, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import Field
from pydantic_core import PydanticUndefined as Undefined

from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import Request as ContractRequest
from zimmer_common.contracts.fields import ID_MAX, INT32_MAX, INT32_MIN, NAME_MAX, RowId

__all__ = ["ID_MAX", "IDEMPOTENCY_HEADER", "BusDep", "IdempotencyHeader", "Precedence", "RowId", "SessionIdPath",
           "StrictBody", "TriggerIdPath", "Undefined", "json_body", "keyed", "problem_responses", "validated"]
from zimmer_common.errors import ErrorCode, ZimmerError

Precedence = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX,
                                  description="Rank in the spot queue: higher runs first; ties go to the oldest")]
SessionIdPath = Annotated[int, Path(ge=1, le=ID_MAX, description="The session's id")]
TriggerIdPath = Annotated[int, Path(ge=1, le=ID_MAX, description="The trigger's id")]


class StrictBody(ContractRequest):
    """A request body of the gateway's own: a contract `Request` (strict types, unknown fields
    refused naming them, storable strings only)."""


IDEMPOTENCY_HEADER: Final = "Idempotency-Key"
IdempotencyHeader = Annotated[str | None, Header(
    alias=IDEMPOTENCY_HEADER, min_length=1, max_length=NAME_MAX, pattern=r"^[\x21-\x7e]+$",
    description="Repeat this request with the same key (after a 503 or a lost answer) and get the first answer "
                "back, with nothing done twice. Printable ASCII, at most 200 characters; remembered for 24 hours, "
                "per credential (and per X-Zimmer-Session-Id).")]


def proxied(data: bytes, status_code: int = 200) -> Response:
    """A service's answer (its JSON, as `Bus.request_raw` returns it) as the route's answer: the
    route's `response_model` documents it in the OpenAPI schema, and FastAPI, handed a `Response`,
    neither validates nor serialises it again."""
    return Response(data, status_code=status_code, media_type="application/json")


def keyed(body_key: str | None, header_key: str | None) -> str | None:
    """The request's idempotency key, from the header or the body (the same one if both)."""
    if body_key and header_key and body_key != header_key:
        raise ZimmerError(ErrorCode.INVALID, "the Idempotency-Key header and the body's idempotency_key differ",
                          {"field": "idempotency_key"})
    return header_key or body_key


async def bus_of(request: Request) -> Bus:  # async: a plain def would run in a worker thread
    bus = request.app.state.service.bus
    if bus is None:
        raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
    return bus


BusDep = Annotated[Bus, Depends(bus_of)]


# A route that reads its own arguments (`zimmer_gateway.routes.backlog.AppendRoute`) reads them as
# FastAPI does, with the route's own fields (FastAPI's `ModelField`s), so its answers are the ones
# FastAPI would give. `Undefined` is FastAPI's "not given".

async def json_body(request: Request) -> Any:
    """The body for a JSON body parameter, as FastAPI reads it: none (`Undefined`) when empty,
    decoded when the content type is JSON (a JSON error is a 422 naming the offset, a body that
    is not text a 400), else the bytes as they are (which no model takes)."""
    raw = await request.body()
    if not raw:
        return Undefined
    maintype, _, subtype = request.headers.get("content-type", "").partition(";")[0].strip().lower().partition("/")
    if maintype != "application" or not (subtype == "json" or subtype.endswith("+json")):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": exc.msg}}]) from exc
    except ValueError as exc:  # not UTF-8 (or -16, -32)
        raise HTTPException(400, "There was an error parsing the body") from exc


def validated(field: Any, value: Any, loc: tuple[str, ...]) -> tuple[Any, list[dict[str, Any]]]:
    """`value` (`Undefined`: not given) validated by a route's parameter `field`, as FastAPI
    validates it: (value, errors)."""
    if value is Undefined:
        if field.field_info.is_required():
            return None, [{"type": "missing", "loc": loc, "msg": "Field required", "input": None}]
        return field.get_default(), []
    return field.validate(value, loc=loc)


PROBLEM_TEXT: Final = {
    400: "The body is not JSON (or not UTF-8)",
    401: "No valid credential (checked before the body is read)",
    403: "The fleet key cannot reach an operator-only route",
    404: "No such id",
    409: "Refused in the current state (the problem's `code` says why: conflict, refused, band_full)",
    413: "The body is larger than ZIMMER_MAX_BODY_BYTES, or the request cannot fit a bus message",
    422: "Bad input; the problem names the field",
    503: "Nothing was done: a dependency is down (`dependency` names it: database, message bus, a service), "
         "a deadline passed, or the service is busy. Safe to retry (Retry-After).",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem documents a route may answer with: the ones every API
    route can give (401, 413, 422, 503) and the route's own."""
    return {s: {"description": PROBLEM_TEXT[s], "content": {"application/problem+json": {}}}
            for s in sorted({401, 413, 422, 503, *statuses})}


def _takes_many(annotation: Any) -> bool:
    """Whether a query parameter's type takes several values (`list[str] | None` and the like)."""
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset, Sequence):
        return True
    return origin in (Union, UnionType, Annotated) and any(_takes_many(a) for a in get_args(annotation))


def _query_fields(dependant: Dependant) -> list[Any]:
    return [*dependant.query_params, *(f for d in dependant.dependencies for f in _query_fields(d))]


def _single_valued(route: APIRoute) -> frozenset[str]:
    """The route's query parameters that take one value, worked out once and kept on the route."""
    names: frozenset[str] | None = getattr(route, "zimmer_single_valued", None)
    if names is None:
        names = frozenset(field.alias for field in _query_fields(route.dependant)
                          if not _takes_many(field.field_info.annotation))
        route.zimmer_single_valued = names  # type: ignore[attr-defined]  # a marker attribute on the route
    return names


async def single_valued_query(request: Request) -> None:
    """A parameter that takes one value, given twice (`?name_contains=a&name_contains=b`), is a
    422 naming it: taking one of them silently would answer a question nobody asked."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    given = Counter(key for key, _ in request.query_params.multi_items())
    repeated = sorted(key for key, n in given.items() if n > 1 and key in _single_valued(route))
    if repeated:
        raise RequestValidationError([{"type": "repeated", "loc": ("query", repeated[0]), "input": None,
                                       "msg": f"{repeated[0]} was given {given[repeated[0]]} times; it takes one value"}])
