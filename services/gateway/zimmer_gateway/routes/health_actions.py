"""`/api/v1/health/…` levers (issue 15; seed 003 "Queue recovery mode", "Queued job maintenance"):
entering queue recovery mode, leaving it, and previewing, discarding or rescheduling queued job
messages. Each is one RPC to the alerts service.

Entering (and extending) is operator only: halting the demand-side lanes is the destructive
direction. Leaving is never gated, not even by a credential (the edge lets this one path through
without one): the way out of a halt has to work on the first try, including on a deployment whose
operator token was never set. Discard and reschedule are operator only; the preview needs any
credential. A count mismatch or an over-cap scope is a 409 whose `details.preview` is the preview.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import ConfigDict, Field

from zimmer_common.contracts import health as h
from zimmer_common.contracts.fields import LongText, at_least_one_of
from zimmer_gateway.auth import REALM_SCOPE_KEY, Realm, authenticated, bearer_scheme, operator_only
from zimmer_gateway.routes.common import BusDep, StrictBody, problem_responses
from zimmer_gateway.web.recovery_banner import remember

router = APIRouter(prefix="/api/v1/health", tags=["health"])


class EnterBody(StrictBody):
    reason: LongText = Field(min_length=1, description="Why the demand-side lanes are being halted")
    ttl_minutes: int = Field(60, ge=1, le=100_000, description="Minutes until it lifts by itself, clamped to 5 to "
                                                               "240; entering again while on extends it")


class MutationBody(StrictBody):
    """A lane, a subject, or both (the schema's `anyOf`): there is no "everything"."""

    model_config = ConfigDict(json_schema_extra=at_least_one_of("lane", "subject"))
    lane: h.LaneName | None = Field(None, description="A job lane (auth is refused: 409)")
    subject: h.SubjectFilter | None = Field(None, description="A subject under zimmer.jobs. (NATS wildcards allowed)")
    expected_count: int = Field(ge=0, le=h.MAINTENANCE_CAP, description="The preview's count; a mismatch refuses")
    delay_minutes: int | None = Field(None, ge=1, le=7 * 24 * 60, description="Reschedule: minutes from now")


class RescheduleBody(MutationBody):
    delay_minutes: int = Field(ge=1, le=7 * 24 * 60, description="Minutes from now to deliver them again")


@router.post("/enter_queue_recovery_mode", summary="Halt the demand-side job lanes (operator only)",
             response_model=h.QueueRecoveryStatus, responses=problem_responses(403, 409))
async def enter_queue_recovery_mode(body: EnterBody, bus: BusDep, request: Request,
                                    _realm: Annotated[Realm, Depends(operator_only)]) -> h.QueueRecoveryStatus:
    """Pauses every pollers, triggers, inference, maintenance and default job consumer until the TTL
    (JetStream resumes them by itself then); auth keeps running. Enqueue and schedules keep working;
    only execution stops. Entering while it is on extends it. 409 `refused` when the NATS server
    cannot pause consumers: nothing is halted and nothing recorded."""
    status = await bus.request(h.ENTER_QUEUE_RECOVERY, h.EnterQueueRecoveryMode(
        reason=body.reason, ttl_minutes=body.ttl_minutes, actor=Realm.OPERATOR.value))
    remember(request.app, status)
    return status


@router.post("/exit_queue_recovery_mode", summary="Lift queue recovery mode (never gated; no credential needed)",
             response_model=h.QueueRecoveryStatus, responses=problem_responses(),
             # The bearer is optional here, and the document says so: `{}` among the requirements.
             openapi_extra={"security": [{}]})
async def exit_queue_recovery_mode(
        bus: BusDep, request: Request,
        _optional: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)] = None,
) -> h.QueueRecoveryStatus:
    """Resumes every paused demand-side job consumer, including any paused by hand (named in
    `resumed_by_hand`). Works without a credential, on purpose: the escape hatch must work first try
    (a credential, when sent, names the caller; a missing or wrong one is never a 401 here)."""
    realm = request.scope.get(REALM_SCOPE_KEY)
    status = await bus.request(h.EXIT_QUEUE_RECOVERY, h.ExitQueueRecoveryMode(
        actor=realm.value if isinstance(realm, Realm) else "anonymous"))
    remember(request.app, status)
    return status


@router.get("/queued_jobs", summary="Preview the waiting job messages in a scope", response_model=h.QueuedPreview,
            responses=problem_responses(409))
async def preview_queued_jobs(bus: BusDep, _realm: Annotated[Realm, Depends(authenticated)],
                              lane: Annotated[h.LaneName | None, Query()] = None,
                              subject: Annotated[h.SubjectFilter | None, Query(
                                  description="zimmer.jobs.<…>, exact or with NATS wildcards")] = None,
                              ) -> h.QueuedPreview:
    """Waiting = in ZIMMER_JOBS and not delivered to a worker; by subject and by lane, plus what is
    in scope but claimed (never touched). Name a lane and/or a subject (422 for neither: there is
    no "everything"); auth is refused (409)."""
    return await bus.request(h.PREVIEW_QUEUED, h.QueuedScope(lane=lane or None, subject=subject or None))


@router.post("/discard_queued_jobs", summary="Discard waiting job messages (operator only; not recoverable)",
             response_model=h.QueuedReceipt, responses=problem_responses(403, 409))
async def discard_queued_jobs(body: MutationBody, bus: BusDep,
                              _realm: Annotated[Realm, Depends(operator_only)]) -> h.QueuedReceipt:
    """State the preview's count in `expected_count`; at most 2,000 a call. Pages."""
    return await bus.request(h.DISCARD_QUEUED, _mutation(body))


@router.post("/reschedule_queued_jobs", summary="Deliver waiting job messages later (operator only; recoverable)",
             response_model=h.QueuedReceipt, responses=problem_responses(403, 409))
async def reschedule_queued_jobs(body: RescheduleBody, bus: BusDep,
                                 _realm: Annotated[Realm, Depends(operator_only)]) -> h.QueuedReceipt:
    """Removes them now and republishes each on its subject `delay_minutes` from now (a one-shot
    JetStream message schedule). State the preview's count in `expected_count`. Pages."""
    return await bus.request(h.RESCHEDULE_QUEUED, _mutation(body))


def _mutation(body: MutationBody) -> h.QueuedMutation:
    return h.QueuedMutation(lane=body.lane, subject=body.subject, expected_count=body.expected_count,
                            delay_minutes=body.delay_minutes, actor=Realm.OPERATOR.value)
