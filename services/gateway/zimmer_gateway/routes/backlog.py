"""`/api/v1/work_backlog_items`: the work backlog over REST (seed 000, issue 4 "Operations").

Read, append and pull take the fleet key (or the operator token). Pin, unpin, remove by
judgement and start now are discretionary: they need the operator token, and the fleet key gets
a 403 (DESIGN §6). `acting_session_id` is provenance (`writing_session_id`,
`started_by_session_id`), never authorization. Each route is one RPC to the backlog service;
appends that arrive at once share one (`zimmer_gateway.appends`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import ConfigDict, Field

from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.fields import WORDS, LongText
from zimmer_gateway.appends import Appends
from zimmer_gateway.auth import Realm, authenticated, operator_only
from zimmer_gateway.routes.common import (
    ID_MAX,
    IDEMPOTENCY_HEADER,
    BusDep,
    IdempotencyHeader,
    Precedence,
    RowId,
    StrictBody,
    Undefined,
    json_body,
    keyed,
    problem_responses,
    validated,
)

router = APIRouter(prefix="/api/v1/work_backlog_items", tags=["work backlog"])

ItemIdPath = Annotated[int, Path(ge=1, le=ID_MAX, description="The item's id")]
OPERATOR = "operator"  # who the operator-only routes record as `by` / `added_by`
OPERATOR_RESPONSES = problem_responses(403, 404, 409)


# The backlog's issue rules (`zimmer_backlog.domain.issues`), as far as JSON Schema states them:
# with an issue, its GitHub URL; without one (the operator's only: the fleet key appends as "rest",
# which is refused), a `manual-<slug>` key and a prompt to start the session from. That the key
# names the issue of `issue_url` (`{repo}#{n}`) is between two fields: the description says it.
APPEND_RULES = {"anyOf": [
    {"required": ["issue_url"], "properties": {"issue_url": {"type": "string", "pattern": c.ISSUE_URL_SCHEMA_PATTERN}}},
    {"properties": {"issue_url": {"type": "null"}, "added_via": {"not": {"const": "rest"}},
                    "key": {"pattern": c.MANUAL_KEY_SCHEMA_PATTERN},
                    "payload": {"required": ["prompt"],
                                "properties": {"prompt": {"type": "string", "pattern": WORDS}}}},
     "required": ["payload"]}]}


class AppendBody(c.AppendItem):
    """One cleared issue for the queue. It lands 10 below the lowest unpinned peer of its
    `estimated_cost` band. `added_via` is "rest" for the fleet key whatever the body says; with
    the operator token it defaults to "operator", and only then may `issue_url` be omitted (the
    key is then manual-<slug>, and payload.prompt is what the session starts from). With
    `issue_url`, the key names that issue: `{repo}#{n}` or `{owner}/{repo}#{n}`, in any case."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=APPEND_RULES)
    added_via: Literal["rest", "operator"] | None = Field(  # type: ignore[assignment]  # the REST body narrows the contract's field
        None, description='Forced to "rest" for the fleet key; "operator" (the default) or "rest" for the operator')
    acting_session_id: RowId | None = Field(None, description="The appending session: provenance, never authorization")

    def as_append(self, realm: Realm, idempotency_key: str | None) -> c.AppendItem:
        """The append this body asks for, as the credential decides it: the fleet key appends as
        "rest" whatever the body says; the operator as "operator" unless the body says "rest", and
        is its `added_by` unless the body names one. The issue rules are the backlog's to decide
        (it refuses with `invalid` naming the field: the same 422)."""
        if realm is Realm.OPERATOR:
            via, by = self.added_via or "operator", self.added_by or OPERATOR
        else:
            via, by = "rest", self.added_by
        # Every field is validated already, as the contract's: only what was decided here is new.
        return self.model_copy(update={"added_via": via, "added_by": by, "idempotency_key": idempotency_key})


class RemovalBody(c.Removal):
    model_config = ConfigDict(extra="forbid")


class PullBody(c.PullItems):
    """Give `count` (0-10) or `keys`. A pull by keys is safe to retry (the same sessions come back,
    none doubled); a pull by count is not (a retry pulls the next items)."""

    model_config = ConfigDict(extra="forbid")
    removals: list[RemovalBody] = Field(  # type: ignore[assignment]  # the REST body narrows the contract's field
        default_factory=list, max_length=50,
        description="Queued items to take off first, each with a reason from the fixed vocabulary "
                    "issue_closed, issue_has_open_pr, session_already_working, trust_failed")
    acting_session_id: RowId | None = Field(
        None, description="The pulling session: the parent of what it starts; provenance, never authorization")


class HoldBody(StrictBody):
    reason: Annotated[LongText, Field(min_length=1, json_schema_extra={"pattern": WORDS}, description=(
        "The decision owed, who owes it, and where it is laid out (not only whitespace)"))]
    acting_session_id: RowId | None = Field(None, description="The triaging session: provenance, never authorization")


class PinBody(StrictBody):
    precedence: Precedence | None = Field(None, description="Hand-place it here; omitted: pin it where it sits")


class RemoveBody(StrictBody):
    reason: Annotated[LongText, Field(min_length=1, description="Why, in words: a human's judgement")]


@router.get("", summary="The work backlog, with counts", response_model=c.ItemList,
            responses=problem_responses(422))
async def list_items(
    bus: BusDep, _realm: Annotated[Realm, Depends(authenticated)],
    status_: Annotated[c.StatusFilter, Query(
        alias="status", description="queued (default), started, removed, all; or by the produced session: "
                                    "in_flight (running or waiting), spot_held (waiting at the spot gate before "
                                    "its first turn), parked (needs_input), claimed (in_flight or parked); or by the "
                                    "liveness sweep's stored verdict: stranded (left the queue, unresolved), "
                                    "awaiting_decision (stranded, held for a person's decision)")] = "queued",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=ID_MAX)] = 0,
) -> c.ItemList:
    """Highest precedence first (the order a pull takes them); stranded and awaiting_decision oldest
    first. `counts`: queued; in_flight, spot_held, parked, claimed (of the sessions this backlog
    produced); stranded, awaiting_decision and held (by the liveness sweep's stored verdict). A page
    ends before `limit` rows when its rows reach the byte bound of one answer (a list never fails
    for its size): `next_offset` is where the next page starts, null on the last page."""
    return await bus.request(c.GET_ITEMS, c.ItemQuery(status=status_, limit=limit, offset=offset))


async def appends_of(request: Request) -> Appends:
    return request.app.state.appends  # type: ignore[no-any-return]  # app.state is untyped


async def append_item(body: AppendBody, appends: Annotated[Appends, Depends(appends_of)],
                      realm: Annotated[Realm, Depends(authenticated)],
                      idempotency_key: IdempotencyHeader = None) -> Response:
    """409 `conflict` when the key already has a queued row (the problem's `details.item_id` names
    it), 409 `band_full` when the cost's band cannot make room (nothing moved). An item without
    `issue_url` is a 422 unless the operator appends it. A retry without an idempotency key is
    harmless (409 `conflict` naming the item it made); with one, it gets the first answer back."""
    result = await appends.append_json(body.as_append(realm, keyed(body.idempotency_key, idempotency_key)))
    # The backlog's answer as it wrote it (its payload put back), not validated and serialised
    # again (the append is the hot path; `response_model` still documents it).
    return Response(result, status_code=status.HTTP_201_CREATED, media_type="application/json")


class AppendRoute(APIRoute):
    """The append's route reads `append_item`'s arguments itself (issue 9: FastAPI's per-request
    dependency solving cost more CPU than the rest of the gateway's work on an append). It reads
    exactly what the signature declares, with the route's own fields, so the OpenAPI entry, the
    validation and every 4xx are FastAPI's: the credential the edge checked, the Idempotency-Key
    header, and the body, parsed once and validated once as `AppendBody`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        body_field = self.body_field
        key_field = next(p for p in self.dependant.header_params if p.alias == IDEMPOTENCY_HEADER)
        assert body_field is not None

        async def handle(request: Request) -> Response:
            realm = await authenticated(request, None)
            key, errors = validated(key_field, request.headers.get(IDEMPOTENCY_HEADER, Undefined),
                                    ("header", IDEMPOTENCY_HEADER))
            body, body_errors = validated(body_field, await json_body(request), ("body",))
            if errors or body_errors:
                raise RequestValidationError(errors + body_errors)
            return await append_item(body, await appends_of(request), realm, key)

        return handle


router.add_api_route("", append_item, methods=["POST"], summary="Append an item", route_class_override=AppendRoute,
                     status_code=status.HTTP_201_CREATED, response_model=c.AppendResult,
                     responses=problem_responses(409))
APPEND_ROUTE = next(route for route in router.routes if isinstance(route, AppendRoute))  # served directly (app.py)


@router.post("/pull", summary="Pull the top items (or named keys) into spot sessions", response_model=c.PullResult,
             responses=problem_responses(409))
async def pull_items(body: PullBody, bus: BusDep, _realm: Annotated[Realm, Depends(authenticated)],
                     idempotency_key: IdempotencyHeader = None) -> c.PullResult:
    """Give exactly one of `count` (0-10) or `keys` (422 otherwise). Each item starts as a spot
    session, a child of `acting_session_id`, with precedence the puller's + (count − n + 1) for
    the n-th. A pull by keys is safe to retry; a pull by count is safe to retry only with an
    idempotency key (without one a retry pulls the next items; with one it returns the first
    answer, or finishes a first attempt that did not answer; 409 while that attempt may still be
    running). `failed` lists starts that did not happen (`retry_safe`: pull those keys again).
    `removals` never take a pinned item (a human placed it) and `not_removed` says which were not
    taken and why; a row an earlier pull started comes back with `earlier: true` and its session's
    own precedence. `sentence` says which zero a pull of zero is (give `wip_ceiling` for "N in
    flight against a ceiling of M")."""
    fields = body.model_dump()
    fields["idempotency_key"] = keyed(body.idempotency_key, idempotency_key)
    return await bus.request(c.PULL, c.PullItems.model_validate(fields))


@router.patch("/{item_id}/pin", summary="Pin an item, optionally hand-placing it (operator only)",
              response_model=c.ItemView, responses=OPERATOR_RESPONSES)
async def pin_item(item_id: ItemIdPath, bus: BusDep, _realm: Annotated[Realm, Depends(operator_only)],
                   body: Annotated[PinBody | None, Body()] = None) -> c.ItemView:
    """A pinned item is never moved by any writer and is nobody's peer; it may sit anywhere."""
    precedence = body.precedence if body else None
    return await bus.request(c.PIN, c.PinItem(item_id=item_id, precedence=precedence, by=OPERATOR))


@router.patch("/{item_id}/unpin", summary="Unpin an item (operator only)", response_model=c.ItemView,
              responses=OPERATOR_RESPONSES)
async def unpin_item(item_id: ItemIdPath, bus: BusDep,
                     _realm: Annotated[Realm, Depends(operator_only)]) -> c.ItemView:
    """Unpinned, an item outside its cost's band moves back into it."""
    return await bus.request(c.UNPIN, c.ItemRef(item_id=item_id, by=OPERATOR))


@router.post("/{item_id}/remove", summary="Remove a queued item by judgement (operator only)",
             response_model=c.ItemView, responses=OPERATOR_RESPONSES)
async def remove_item(item_id: ItemIdPath, body: RemoveBody, bus: BusDep,
                      _realm: Annotated[Realm, Depends(operator_only)]) -> c.ItemView:
    """The row stays, with status removed, the reason and who."""
    return await bus.request(c.REMOVE, c.RemoveItem(item_id=item_id, reason=body.reason, by=OPERATOR))


@router.post("/{item_id}/start_now", summary="Start a queued item now as a priority session (operator only)",
             response_model=c.StartNowResult, responses=OPERATOR_RESPONSES)
async def start_now(item_id: ItemIdPath, bus: BusDep,
                    _realm: Annotated[Realm, Depends(operator_only)]) -> c.StartNowResult:
    return await bus.request(c.START_NOW, c.ItemRef(item_id=item_id, by=OPERATOR))


@router.post("/{item_id}/hold", summary="Hold a stranded row for a human decision", response_model=c.ItemView,
             responses=problem_responses(404, 409))
async def hold_item(item_id: ItemIdPath, body: HoldBody, bus: BusDep,
                    realm: Annotated[Realm, Depends(authenticated)]) -> c.ItemView:
    """Records that what remains is a person's call: the reason (the decision owed, who owes it,
    where it is laid out), who and when. Not a removal; the status stays. The row moves from
    stranded to awaiting_decision for 14 days, then the hold lapses and the lapse pages once.
    409 `refused` with `details.refusal`: not_stranded (queued, in flight, parked or resolved),
    not_read (the sweep has not read it, or read unknown), superseded, already_held (no extension),
    lapse_not_paged (no renewal before the lapse has paged)."""
    by = OPERATOR if realm is Realm.OPERATOR else (
        f"session {body.acting_session_id}" if body.acting_session_id else "fleet")
    return await bus.request(c.HOLD, c.HoldItem(item_id=item_id, reason=body.reason, by=by,
                                                acting_session_id=body.acting_session_id))
