"""The Health page's "Queue recovery mode" and "Queued messages" panels (issue 15; seed 003
"/health (enter, extend, resume)", "the Queued Job Maintenance panel"), their forms, and the
amber banner's wiring.

Every form here is a form like the others: signed in, CSRF-checked (issue 26 #12: a cross-site
post with no session must not lift the mode). The escape hatch that is never gated is REST's
`POST /api/v1/health/exit_queue_recovery_mode` (no credential, no cooldown), and the mode always
ends by its TTL. Discard and reschedule carry the count the page rendered beside the button as
`expected_count`: a page opened ten minutes ago names a number that no longer matches, and the
click is refused (with the service's words) rather than acting on a set the operator never saw.
"""

from __future__ import annotations

from typing import Any, get_args

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from zimmer_common.contracts import health as h
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.web.pages import Ping, Refused, back_to, bus_of, form_refusal, perform, whole_number
from zimmer_gateway.web.recovery_banner import install_recovery_banner, remember

PANEL = "/health#queue-recovery"


def _text(form: Any, name: str) -> str | None:
    return str(form.get(name) or "").strip() or None


JOB_LANES = frozenset(get_args(h.LaneName))


def queued_lane_choices(present: list[str]) -> tuple[list[str], list[str]]:
    """(the lanes the queued-messages form offers, those it leaves out): of the lanes this
    deployment has (its lane readings), the job lanes but the protected; the rest (the events,
    ingest and commands consumers, whose messages are the system's record, and auth) are named,
    never offered."""
    offered = [lane for lane in present if lane in JOB_LANES and lane not in h.PROTECTED_LANES]
    return offered, [lane for lane in present if lane not in offered]


async def recovery_panels(service: Service, request: Request, present_lanes: list[str]) -> dict[str, Any]:
    """The two panels' data for the Health page: the mode's status (read now, not the banner's
    cache) and, when the page was asked with a lane or subject, the preview of that scope.
    `present_lanes`: the lanes of this deployment, as the health report read them."""
    offered, left_out = queued_lane_choices(present_lanes)
    found: dict[str, Any] = {"recovery": None, "recovery_problem": None, "queued": None, "queued_problem": None,
                             "queued_lane": request.query_params.get("lane") or "",
                             "queued_subject": request.query_params.get("subject") or "",
                             "lanes": offered, "lanes_left_out": left_out}
    try:
        found["recovery"] = await bus_of(service).request(h.QUEUE_RECOVERY_STATUS, h.HealthQuery())
    except ZimmerError as exc:
        found["recovery_problem"] = f"{exc.code.value}: {exc.message}"
    if found["queued_lane"] or found["queued_subject"]:
        try:
            found["queued"] = await bus_of(service).request(h.PREVIEW_QUEUED, h.QueuedScope(
                lane=found["queued_lane"] or None, subject=found["queued_subject"] or None))
        except ZimmerError as exc:
            found["queued_problem"] = f"{exc.code.value}: {exc.message}"
    return found


def create_health_recovery(service: Service, ping: Ping) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def refused_page(request: Request, form_id: str, refused: Refused) -> Response:
        """The Health page again, the refused form as it was filled in with the refusal beside it
        (issue 32 #6); a form that is not this site's gets the refusal page."""
        if refused.error.code.value == "forbidden":
            return refused.response
        from zimmer_gateway.web.health import health_page  # the page module imports this one's panels

        return await health_page(service, ping, request, status_code=refused.error.http_status,
                                 refused=form_refusal(form_id, refused.form, refused.error))

    @router.post("/health/queue_recovery/enter")
    async def enter(request: Request) -> Response:
        def build(form: Any) -> h.EnterQueueRecoveryMode:
            return h.EnterQueueRecoveryMode(reason=str(form.get("reason") or "").strip(),
                                            ttl_minutes=whole_number(form, "ttl_minutes") or 60, actor="operator")
        try:
            status = await perform(request, service, h.ENTER_QUEUE_RECOVERY, build)
        except Refused as refused:
            return await refused_page(request, "recovery-enter", refused)
        remember(request.app, status)
        return back_to("/health", "recovery_on")

    @router.post("/health/queue_recovery/exit")
    async def exit_(request: Request) -> Response:
        try:
            status = await perform(request, service, h.EXIT_QUEUE_RECOVERY,
                                   lambda form: h.ExitQueueRecoveryMode(actor="operator"))
        except Refused as refused:
            return await refused_page(request, "recovery-exit", refused)
        remember(request.app, status)
        return back_to("/health", "recovery_off", resumed=str(len(status.resumed_consumers)))

    async def mutate(request: Request, rpc: Any, done: str, form_id: str) -> Response:
        def build(form: Any) -> h.QueuedMutation:
            return h.QueuedMutation(lane=_text(form, "lane"), subject=_text(form, "subject"),
                                    expected_count=whole_number(form, "expected_count") or 0,
                                    delay_minutes=whole_number(form, "delay_minutes"), actor="operator")
        try:
            receipt = await perform(request, service, rpc, build)
        except Refused as refused:
            return await refused_page(request, form_id, refused)
        return back_to("/health", done, count=str(receipt.count), skipped=str(len(receipt.skipped)))

    @router.post("/health/queued/discard")
    async def discard(request: Request) -> Response:
        return await mutate(request, h.DISCARD_QUEUED, "discarded", "queued-discard")

    @router.post("/health/queued/reschedule")
    async def reschedule(request: Request) -> Response:
        return await mutate(request, h.RESCHEDULE_QUEUED, "rescheduled", "queued-reschedule")

    return router


def install_queue_recovery_pages(app: FastAPI, service: Service, ping: Ping) -> None:
    """The banner on every page and the panels' form routes (`ping`: the Health page's, which a
    refused form re-renders)."""
    install_recovery_banner(app, service)
    app.include_router(create_health_recovery(service, ping))
