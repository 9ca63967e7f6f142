"""`/api/v1/sessions`: spawn, read, search, re-class and re-rank sessions; turns; the decision log;
the operator's delete."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Query, Response, status
from pydantic import ConfigDict, Field

from zimmer_common.contracts import clones as k
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.fields import IdempotencyKey, Prompt, Time, at_least_one_of
from zimmer_common.contracts.runtime import SessionStatusName, TurnKindName
from zimmer_gateway.auth import Realm, operator_only
from zimmer_gateway.routes.common import (
    ID_MAX,
    BusDep,
    IdempotencyHeader,
    Precedence,
    RowId,
    SessionIdPath,
    StrictBody,
    keyed,
    problem_responses,
    proxied,
)

router = APIRouter(prefix="/api/v1/sessions", tags=["sessions"])


class SpawnSessionBody(c.SpawnSession):
    """A new session. Genesis, class and precedence are inherited from `parent_session_id` (or
    `forked_from_session_id`) unless declared; repeating an `idempotency_key` returns the same session."""

    model_config = ConfigDict(extra="forbid")
    parent_session_id: RowId | None = None
    forked_from_session_id: RowId | None = None
    precedence: Precedence | None = None


class SessionPatch(StrictBody):
    """Give at least one of the two, not null (the schema's `anyOf`): an empty change is refused (422)."""

    model_config = ConfigDict(json_schema_extra={"allOf": [
        at_least_one_of("scheduling_class", "precedence"),
        # place=top_of_spot goes with scheduling_class spot and no precedence
        {"anyOf": [{"properties": {"place": {"type": "null"}}},
                   {"required": ["scheduling_class"],
                    "properties": {"scheduling_class": {"const": "spot"}, "precedence": {"type": "null"}}}]}]})
    scheduling_class: Literal["priority", "spot", "derive"] | None = Field(
        None, description='"derive" clears the stored class so the session follows its genesis default again; '
                          "making a held session priority starts it now")
    precedence: Precedence | None = None
    place: Literal["top_of_spot"] | None = Field(
        None, description='With scheduling_class "spot" and no precedence: land 5 above the top of the spot queue')


class ReorderBody(StrictBody):
    """The neighbours it was dropped between: at least one (the schema's `anyOf`)."""

    model_config = ConfigDict(json_schema_extra=at_least_one_of("above_session_id", "below_session_id"))
    above_session_id: RowId | None = Field(None, description="The row it was dropped under (omit at the top)")
    below_session_id: RowId | None = Field(None, description="The row it was dropped over (omit at the bottom)")


def turn_outcome(data: bytes) -> str | None:
    """A `TurnResult`'s outcome, read off its JSON: its first field, as the service writes it."""
    if data.startswith(b'{"outcome":"'):
        end = data.find(b'"', 12)
        if end > 0:
            return data[12:end].decode()
    return json.loads(data).get("outcome")  # type: ignore[no-any-return]  # json.loads returns Any


class TurnBody(StrictBody):
    kind: TurnKindName
    prompt: Prompt | None = None
    attachments: c.Attachments = Field(default_factory=list)
    idempotency_key: IdempotencyKey | None = None


class StatusBody(StrictBody):
    status: SessionStatusName
    at: Time | None = Field(None, description="When the status changed, ISO 8601 (default: now)")


@router.post("", summary="Spawn a session (idempotent on idempotency_key)", response_model=c.SpawnResult,
             status_code=status.HTTP_201_CREATED,
             responses={200: {"model": c.SpawnResult, "description": "The idempotency key named a session whose first "
                                                                     "answer was not kept (made before answers were)"},
                        **problem_responses(422)})
async def spawn_session(body: SpawnSessionBody, bus: BusDep, response: Response,
                        idempotency_key: IdempotencyHeader = None) -> c.SpawnResult:
    """Creates the session and, unless `start` is false, asks the gate for its first turn:
    `turn.outcome` says whether it was admitted, held or passed without consulting the gate.
    Any model is accepted: one with no price of its own is priced by family, else at the dearest
    known price (/costs says which). With an idempotency key (header or body; the same if both) a
    retry returns the first answer whole, 201 with its turn, and starts nothing twice."""
    key = keyed(body.idempotency_key, idempotency_key)
    result = await bus.request(c.SPAWN, body.model_copy(update={"idempotency_key": key}))
    if not result.created:
        response.status_code = status.HTTP_200_OK
    return result


@router.get("", summary="Search sessions", response_model=c.SessionList, responses=problem_responses(422))
async def list_sessions(
    bus: BusDep,
    status_: Annotated[list[SessionStatusName] | None, Query(alias="status", max_length=10,
                                                             description="Repeatable")] = None,
    priority_class: Annotated[c.ClassName | None, Query(description="The resolved class")] = None,
    genesis: Annotated[list[c.GenesisName] | None, Query(max_length=10, description="Repeatable")] = None,
    parent_session_id: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,
    order: Annotated[Literal["precedence", "created_at", "updated_at"],
                     Query(description="precedence: highest first, oldest first within a tie "
                                       "(the order the spot queue is worked)")] = "created_at",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=ID_MAX)] = 0,
) -> c.SessionList:
    """At most `limit` sessions, fewer when their prompts and metadata reach the byte bound of one
    answer (a list never fails for its size): `next_offset` is where the next page starts, null on
    the last page. Follow it, never `offset + limit`."""
    return await bus.request(c.LIST_SESSIONS, c.SessionQuery(
        status=status_, priority_class=priority_class, genesis=genesis, parent_session_id=parent_session_id,
        order=order, limit=limit, offset=offset))


@router.get("/{session_id}", summary="Read one session", response_model=c.SessionView,
            responses=problem_responses(404, 422))
async def get_session(session_id: SessionIdPath, bus: BusDep) -> c.SessionView:
    return await bus.request(c.GET_SESSION, c.SessionRef(session_id=session_id))


@router.patch("/{session_id}", summary="Change a session's scheduling class and/or precedence",
              response_model=c.SessionView, responses=problem_responses(404, 409))
async def patch_session(session_id: SessionIdPath, body: SessionPatch, bus: BusDep) -> c.SessionView:
    """All or nothing: a refused change leaves the session as it was. 409 `refused` for an
    ended (archived or failed) session, naming its status."""
    return await bus.request(c.UPDATE_SESSION, c.UpdateSession(session_id=session_id, **body.model_dump()))


@router.patch("/{session_id}/reorder_precedence", summary="Drop a session between two neighbours",
              response_model=c.ReorderResult, responses=problem_responses(404, 409))
async def reorder_precedence(session_id: SessionIdPath, body: ReorderBody, bus: BusDep) -> c.ReorderResult:
    """It takes the midpoint of the two neighbours' precedences; where none exists (21 and 20)
    they are nudged one apart each (22 and 19) and it takes the middle of the gap, with no
    cascade. At an end (one neighbour): 5 beyond it. `nudged` lists the neighbours that moved.
    409 `refused` when a session that would move has ended (reload the list)."""
    return await bus.request(c.REORDER, c.ReorderSession(session_id=session_id, **body.model_dump()))


@router.post("/{session_id}/turns", summary="Ask for a turn; every turn is gated", response_model=c.TurnResult,
             responses={202: {"model": c.TurnResult,
                              "description": "Held (the gate keeps the prompt) or queued behind a held turn"},
                        **problem_responses(404, 409, 422)})
async def request_turn(session_id: SessionIdPath, body: TurnBody, bus: BusDep,
                       idempotency_key: IdempotencyHeader = None) -> Response:
    """200 when the turn was admitted or passed (not consulted); 202 when it was held or queued:
    the prompt will still be delivered when the gate admits it. 409 `refused` for a session that
    has ended. Not safe to retry without an idempotency key (a retry asks for a second turn);
    with one, a retry returns the first answer and starts nothing twice."""
    # The body is validated once, here, as the contract's fields: the request is built from them
    # as they are (not dumped and validated again), and spot-gate's answer goes back as it wrote
    # it (`response_model` documents it; FastAPI does not validate and serialise it again).
    ask = c.RequestTurn.model_construct(session_id=session_id, kind=body.kind, prompt=body.prompt,
                                        attachments=body.attachments,
                                        idempotency_key=keyed(body.idempotency_key, idempotency_key))
    data = await bus.request_raw(c.REQUEST_TURN, ask.model_dump_json().encode())
    waits = turn_outcome(data) in ("held", "queued")
    return proxied(data, status.HTTP_202_ACCEPTED if waits else status.HTTP_200_OK)


@router.post("/{session_id}/status", summary="Report a session's status (for scripts)",
             response_model=c.SessionView, responses=problem_responses(404, 409))
async def report_status(session_id: SessionIdPath, body: StatusBody, bus: BusDep) -> c.SessionView:
    """Moves the session along its lifecycle (docs/spot-gate.md "The lifecycle"): 409 `refused`,
    naming the current status, for a move the table does not allow (an ended session takes no
    status; a session the spot gate holds is not started by a report). Reporting the status it
    already has changes nothing. At a turn boundary (running → needs_input) the next queued turn
    is delivered, gated."""
    return await bus.request(c.REPORT_STATUS, c.StatusChange(session_id=session_id, **body.model_dump()))


@router.get("/{session_id}/gate_decisions", summary="The gate's decisions for a session, newest first",
            response_model=c.GateDecisionList, responses=problem_responses(404, 422))
async def gate_decisions(
    session_id: SessionIdPath, bus: BusDep, limit: Annotated[int, Query(ge=1, le=500)] = 50,
    since: Annotated[Time | None, Query(description="Only decisions at or after this instant (ISO 8601)")] = None,
    until: Annotated[Time | None, Query(description="Only decisions at or before this instant (ISO 8601)")] = None,
    at: Annotated[Time | None, Query(description='The one decision in force at this instant ("why was it held at '
                                                 '14:02?"); not with since/until')] = None,
) -> c.GateDecisionList:
    """Why was this session held at 14:02? `at=…T14:02:00Z` answers with the decision in force
    then (the newest at or before it). Each row says what it records (`event`: a turn's admission,
    a ceiling pause or resume, a start-now or restart refused, a wake stand-down, a park) with the
    decision's reason, ceiling, sentence and per-window numbers."""
    return await bus.request(c.GATE_DECISIONS, c.GateDecisionQuery(session_id=session_id, limit=limit, since=since,
                                                                   until=until, at=at))


@router.get("/{session_id}/enqueued_messages", summary="A session's enqueued messages, newest first",
            response_model=c.EnqueuedList, responses=problem_responses(404, 422))
async def enqueued_messages(
    session_id: SessionIdPath, bus: BusDep, limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before_id: Annotated[int | None, Query(ge=1, le=ID_MAX, description="Only messages older than this one: "
                                                                        "the `next_before_id` of the page before")] = None,
) -> c.EnqueuedList:
    """Prompts that arrived while a turn was in flight or held, delivered in order at the
    session's next turn boundary; `delivered_at` is null while one still waits. At most `limit`,
    fewer when their prompts reach the byte bound of one answer: `next_before_id` is where the
    next page starts (give it as `before_id`), null on the last page."""
    return await bus.request(c.ENQUEUED, c.EnqueuedQuery(session_id=session_id, limit=limit, before_id=before_id))


class ParkBody(StrictBody):
    resume_with: Prompt | None = Field(None, description='Delivered when the sweep resumes it, in place of the '
                                                        "recovery nudge")
    halt: bool = Field(False, description="Stop a running turn now; the default lets it finish")


@router.post("/{session_id}/pause_into_spot_queue", summary="Park a session in the spot queue",
             response_model=c.SessionView, responses=problem_responses(404, 409))
async def pause_into_spot_queue(session_id: SessionIdPath, bus: BusDep,
                                body: Annotated[ParkBody | None, Body()] = None) -> c.SessionView:
    """The session sleeps in waiting until the ceiling sweep reaches it, in precedence order,
    against the reserve + 5 points (seed 004 "Joining the queue on purpose"). A priority session
    becomes spot; its precedence is unchanged. 409 `refused` for an ended session."""
    body = body or ParkBody()
    return await bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(
        session_id=session_id, resume_with=body.resume_with, halt=body.halt, by="the API"))


@router.post("/{session_id}/start_now", summary="Start a queued session now (still gated for spot work)",
             response_model=c.StartNowResult, responses=problem_responses(404, 409))
async def start_now(session_id: SessionIdPath, bus: BusDep) -> c.StartNowResult:
    """Held: its re-check is pulled forward (one turn, prompt intact). Paused: the pause's own
    resume. Neither: the continue nudge. A spot session still answers to the gate: when it would be
    held, nothing changes and `did` is `held` with the gate's sentence. 409 `refused` for an ended
    session, or when the spot queue cannot be read."""
    return await bus.request(c.START_NOW, c.StartNow(session_id=session_id))


@router.post("/{session_id}/archive", summary="Archive a session (the Trash)", response_model=c.SessionView,
             responses=problem_responses(404))
async def archive(session_id: SessionIdPath, bus: BusDep) -> c.SessionView:
    """The session ends: it takes no more turns, a running turn is stopped, a hold or pause is
    dropped. `session_archived` announces it. Archiving an archived session changes nothing."""
    return await bus.request(c.ARCHIVE, c.SessionRef(session_id=session_id))


@router.post("/{session_id}/unarchive", summary="Bring an archived session back", response_model=c.SessionView,
             responses=problem_responses(404, 409))
async def unarchive(session_id: SessionIdPath, bus: BusDep) -> c.SessionView:
    """Back as it was before the trash (a stopped turn: needs_input); `session_unarchived`
    announces it. 409 `refused` for a session that is not archived."""
    return await bus.request(c.UNARCHIVE, c.SessionRef(session_id=session_id))


@router.delete("/{session_id}", summary="Delete a session (operator only; not recoverable)",
               response_model=k.SessionDeletion, responses=problem_responses(403, 404))
async def delete_session(session_id: SessionIdPath, bus: BusDep,
                         _realm: Annotated[Realm, Depends(operator_only)]) -> k.SessionDeletion:
    """The row goes at once, with its enqueued messages, gate decisions, wakes and warnings;
    children and forks keep running without the link. A running turn is stopped (halt), and
    `session_deleted` tells the sweeper to take the directories keyed by its id (and its logs).
    Not the Trash: nothing brings it back. 404 for an id with no session, including a second
    delete of the same one."""
    return await bus.request(k.DELETE_SESSION, c.SessionRef(session_id=session_id))


class PauseUntilBody(StrictBody):
    until: Time = Field(description="Not before this moment (ISO 8601, in the future)")
    prompt: Prompt | None = Field(None, description="Delivered by the wake (default: a short continue)")


class RestartBody(StrictBody):
    prompt: Prompt | None = Field(None, description="Default: the continue nudge")


@router.post("/{session_id}/pause_until", summary="Pause a session until a moment", response_model=c.SessionView,
             responses=problem_responses(404, 409))
async def pause_until(session_id: SessionIdPath, body: PauseUntilBody, bus: BusDep) -> c.SessionView:
    """Pause Until: the running turn is stopped, the session sleeps in waiting, and nothing starts it
    before `until` whatever its precedence or class; then its wake is a turn that answers to the
    gate (a floor, not a promotion). A new pause replaces the last. 422 for a moment in the past."""
    return await bus.request(c.PAUSE_UNTIL, c.PauseUntil(session_id=session_id, until=body.until, prompt=body.prompt,
                                                         by="the API"))


@router.post("/{session_id}/restart", summary="Restart a waiting session (refused while paused until a time)",
             response_model=c.TurnResult, responses=problem_responses(404, 409))
async def restart(session_id: SessionIdPath, bus: BusDep, body: Annotated[RestartBody | None, Body()] = None
                  ) -> c.TurnResult:
    """A restart turn through the gate. 409 `refused`, naming the pause, for a session paused until
    a time it has not reached: take the next candidate."""
    return await bus.request(c.RESTART, c.RestartSession(session_id=session_id,
                                                         prompt=body.prompt if body else None))
