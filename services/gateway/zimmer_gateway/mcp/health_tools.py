"""`action_health` (issue 15; seed 003 "Queue recovery mode", "Queued job maintenance"), in the
`health` group: agent sessions are the first responders to a page and have no browser, so the
levers behind /health's panels are here too, with the same guards (the alerts service enforces
them): queue recovery mode's enter (which also extends) and exit, and the queued job messages'
preview, discard and reschedule with their count confirmation. A count mismatch is refused with
the preview in the error's details, so the recovery is one retry with its count."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from zimmer_common.contracts import health as h
from zimmer_common.contracts.envelope import Payload
from zimmer_common.contracts.fields import LongText, ShortText
from zimmer_common.service import Service
from zimmer_gateway.auth import Realm
from zimmer_gateway.mcp.registry import tool
from zimmer_gateway.mcp.spot_tools import _bus, _check

HealthAction = Literal["enter_queue_recovery_mode", "exit_queue_recovery_mode", "preview_queued_jobs",
                       "discard_queued_jobs", "reschedule_queued_jobs"]


class HealthActionResult(Payload):
    action: str
    summary: str
    queue_recovery_mode: h.QueueRecoveryStatus | None = None
    preview: h.QueuedPreview | None = None
    receipt: h.QueuedReceipt | None = None


def _actor(realm: Realm | None, acting_session: int | None) -> str:
    who = realm.value if realm is not None else "anonymous"
    return f"{who} (session {acting_session})" if acting_session is not None else who


@tool(group="health", read_only=False, destructive=True, idempotent=False)
async def action_health(
    service: Service,
    action: HealthAction,
    reason: Annotated[LongText | None, Field(description="enter_queue_recovery_mode: why (required)")] = None,
    ttl_minutes: Annotated[int | None, Field(ge=1, le=100_000, description=(
        "enter_queue_recovery_mode: minutes until it lifts by itself (default 60; clamped to 5 to 240)"))] = None,
    lane: Annotated[ShortText | None, Field(description="Queued jobs: a lane (never auth)")] = None,
    subject: Annotated[ShortText | None, Field(description=(
        "Queued jobs: a subject under zimmer.jobs. (NATS wildcards * and > allowed)"))] = None,
    expected_count: Annotated[int | None, Field(ge=0, le=h.MAINTENANCE_CAP, description=(
        "discard/reschedule: the preview's count; a mismatch refuses and returns the preview"))] = None,
    delay_minutes: Annotated[int | None, Field(ge=1, le=7 * 24 * 60, description=(
        "reschedule_queued_jobs: deliver them again this many minutes from now"))] = None,
    realm: Realm | None = None,
    acting_session: int | None = None,
) -> HealthActionResult:
    """Queue recovery mode and queued job maintenance. enter_queue_recovery_mode halts the
    demand-side job lanes (pollers, triggers, inference, maintenance, default) until the TTL; auth
    keeps running, enqueue keeps working, entering again extends it. exit_queue_recovery_mode
    resumes them (always allowed). preview_queued_jobs counts the waiting (undelivered) job
    messages in a scope (lane and/or subject; one is required); discard_queued_jobs removes them
    (NOT recoverable); reschedule_queued_jobs delivers them again later (recoverable: prefer it).
    Both need expected_count = the preview's count, at most 2,000 a call. Every change pages."""
    bus = _bus(service)
    given = {"reason": reason, "ttl_minutes": ttl_minutes, "lane": lane, "subject": subject,
             "expected_count": expected_count, "delay_minutes": delay_minutes}
    actor = _actor(realm, acting_session)[:200]
    if action == "enter_queue_recovery_mode":
        _check(action, given, needs=("reason",), allows=("ttl_minutes",))
        status = await bus.request(h.ENTER_QUEUE_RECOVERY, h.EnterQueueRecoveryMode(
            reason=reason, ttl_minutes=ttl_minutes or 60, actor=actor))
        return HealthActionResult(action=action, queue_recovery_mode=status, summary=(
            f"Queue recovery mode is on until {status.expires_at.isoformat() if status.expires_at else '?'}; "
            f"paused: {', '.join(status.paused_consumers) or 'none yet'}. auth keeps running."))
    if action == "exit_queue_recovery_mode":
        _check(action, given)
        status = await bus.request(h.EXIT_QUEUE_RECOVERY, h.ExitQueueRecoveryMode(actor=actor))
        return HealthActionResult(action=action, queue_recovery_mode=status, summary=(
            f"Queue recovery mode is off; resumed: {', '.join(status.resumed_consumers) or 'nothing was paused'}"
            + (f" (paused by hand: {', '.join(status.resumed_by_hand)})" if status.resumed_by_hand else "") + "."))
    if action == "preview_queued_jobs":
        _check(action, given, allows=("lane", "subject"))
        preview = await bus.request(h.PREVIEW_QUEUED, h.QueuedScope(lane=lane, subject=subject))
        cap = f" — over the cap of {h.MAINTENANCE_CAP}: narrow the scope" if preview.over_cap else ""
        return HealthActionResult(action=action, preview=preview, summary=(
            f"{preview.count} waiting message(s) in scope{cap}; pass expected_count={preview.count} to act on them."))
    needs = ("expected_count", "delay_minutes") if action == "reschedule_queued_jobs" else ("expected_count",)
    _check(action, given, needs=needs, allows=("lane", "subject"))
    spec = h.RESCHEDULE_QUEUED if action == "reschedule_queued_jobs" else h.DISCARD_QUEUED
    receipt = await bus.request(spec, h.QueuedMutation(lane=lane, subject=subject, expected_count=expected_count,
                                                       delay_minutes=delay_minutes, actor=actor))
    verb = "rescheduled (recoverable)" if receipt.recoverable else "discarded (not recoverable)"
    return HealthActionResult(action=action, receipt=receipt, summary=(
        f"{receipt.count} message(s) {verb}; skipped (claimed or gone): {sum(c.count for c in receipt.skipped)}."))
