"""`/api/v1/triggers`: the triggers registry; firing stamps the trigger's class and precedence once."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Response, status
from pydantic import ConfigDict, Field

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.fields import IdempotencyKey, JsonObject, Name, Prompt, Title, at_least_one_of
from zimmer_gateway.routes.common import (
    ID_MAX,
    BusDep,
    IdempotencyHeader,
    Precedence,
    StrictBody,
    TriggerIdPath,
    keyed,
    problem_responses,
)

router = APIRouter(prefix="/api/v1/triggers", tags=["triggers"])


class CreateTriggerBody(p.CreateTrigger):
    model_config = ConfigDict(extra="forbid")

    precedence: Precedence | None = None


class TriggerPatch(StrictBody):
    """Give at least one change (the schema's `anyOf`: a field not null, or `clear_precedence`
    true): an empty one is refused (422)."""

    model_config = ConfigDict(json_schema_extra=at_least_one_of(
        "name", "scheduling_class", "precedence", "prompt", "enabled",
        also=({"required": ["clear_precedence"], "properties": {"clear_precedence": {"const": True}}},)))
    name: Name | None = None
    scheduling_class: Literal["priority", "spot", "derive"] | None = Field(
        None, description='"derive" clears the class; sessions already spawned keep theirs')
    precedence: Precedence | None = None
    clear_precedence: bool = False
    prompt: Prompt | None = None
    enabled: bool | None = None


class FireBody(StrictBody):
    prompt: Prompt | None = Field(None, description="Default: the trigger's prompt")
    title: Title | None = Field(None, description="Default: the trigger's name")
    idempotency_key: IdempotencyKey | None = None
    metadata: JsonObject = Field(default_factory=dict)


SPAWNED = {200: {"model": c.SpawnResult, "description": "The idempotency key named a session whose first answer "
                                                        "was not kept (made before answers were)"},
           **problem_responses(404, 409)}


@router.post("", summary="Create a trigger", response_model=p.TriggerView, status_code=status.HTTP_201_CREATED,
             responses=problem_responses(409))
async def create_trigger(body: CreateTriggerBody, bus: BusDep, idempotency_key: IdempotencyHeader = None
                         ) -> p.TriggerView:
    """A retry without an idempotency key creates a second trigger; with one it returns the first."""
    return await bus.request(p.CREATE_TRIGGER, body.model_copy(
        update={"idempotency_key": keyed(body.idempotency_key, idempotency_key)}))


@router.get("", summary="Search triggers", response_model=p.TriggerList, responses=problem_responses())
async def search_triggers(bus: BusDep, kind: p.TriggerKindName | None = None,
                          name_contains: Annotated[str | None, Query(max_length=200)] = None,
                          limit: Annotated[int, Query(ge=1, le=500)] = 100,
                          offset: Annotated[int, Query(ge=0, le=ID_MAX)] = 0) -> p.TriggerList:
    """Oldest first: at most `limit`, fewer when their prompts reach the byte bound of one answer:
    `next_offset` is where the next page starts, null on the last page (follow it, never
    `offset + limit`)."""
    return await bus.request(p.SEARCH_TRIGGERS, p.TriggerQuery(kind=kind, name_contains=name_contains, limit=limit,
                                                               offset=offset))


@router.patch("/{trigger_id}", summary="Change a trigger (its class applies to sessions it fires from now on)",
              response_model=p.TriggerView, responses=problem_responses(404))
async def patch_trigger(trigger_id: TriggerIdPath, body: TriggerPatch, bus: BusDep) -> p.TriggerView:
    return await bus.request(p.UPDATE_TRIGGER, p.UpdateTrigger(trigger_id=trigger_id, **body.model_dump()))


async def _spawn(spec: Any, trigger_id: int, body: FireBody | None, bus: BusDep, response: Response,
                 header_key: str | None) -> c.SpawnResult:
    fire = body or FireBody()
    fields = fire.model_dump()
    fields["idempotency_key"] = keyed(fire.idempotency_key, header_key)
    result: c.SpawnResult = await bus.request(spec, p.FireTrigger(trigger_id=trigger_id, **fields))
    if not result.created:
        response.status_code = status.HTTP_200_OK
    return result


@router.post("/{trigger_id}/invoke", summary="Invoke a trigger by hand (genesis api)", response_model=c.SpawnResult,
             status_code=status.HTTP_201_CREATED, responses=SPAWNED)
async def invoke_trigger(trigger_id: TriggerIdPath, bus: BusDep, response: Response,
                         body: Annotated[FireBody | None, Body()] = None,
                         idempotency_key: IdempotencyHeader = None) -> c.SpawnResult:
    """409 `refused` for a disabled trigger. With an idempotency key a retry returns the first
    answer whole (the same session, its first turn) and starts nothing twice."""
    return await _spawn(p.INVOKE_TRIGGER, trigger_id, body, bus, response, idempotency_key)


@router.post("/{trigger_id}/fire", summary="Fire a trigger (genesis = its kind; class and precedence stamped once)",
             response_model=c.SpawnResult, status_code=status.HTTP_201_CREATED, responses=SPAWNED)
async def fire_trigger(trigger_id: TriggerIdPath, bus: BusDep, response: Response,
                       body: Annotated[FireBody | None, Body()] = None,
                       idempotency_key: IdempotencyHeader = None) -> c.SpawnResult:
    """409 `refused` for a disabled trigger. With an idempotency key a retry returns the first
    answer whole (the same session, its first turn) and starts nothing twice."""
    return await _spawn(p.FIRE_TRIGGER, trigger_id, body, bus, response, idempotency_key)
