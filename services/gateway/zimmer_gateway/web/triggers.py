"""The Triggers pages (seed 004: "Read a trigger's class: Trigger page, /triggers badge"; "Set a
trigger's class / predefine the rank: the trigger's edit form"): a list of every trigger with its
class badge, and a trigger's page with its edit form (name, Scheduling class, precedence, prompt,
enabled). The form makes `update_trigger`, as PATCH /api/v1/triggers/{id} does, as the operator.

A trigger's class and precedence are read once, when it fires, and stamped on the session: saving
moves the sessions it fires from now on, never the ones it already spawned (the page says so).
A trigger without a class of its own gives its sessions its kind's genesis default, read from the
policy (`get_spot_policy`'s genesis classes), never a copy here.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from zimmer_common.bus import Bus
from zimmer_common.contracts import spot_policy as p
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.routes.common import ID_MAX
from zimmer_gateway.web.pages import (
    FormRefusal,
    Refused,
    back_to,
    bus_of,
    form_refusal,
    perform,
    refusal,
    render,
    signed_in,
    whole_number,
)
from zimmer_gateway.web.session import OperatorSession
from zimmer_gateway.web.spawn_forms import form_key

PAGE = 100  # triggers a list page shows at most; fewer when their prompts fill one answer
FIND_PAGES = 40  # pages of 500 searched for one trigger (20,000 triggers)
TriggerId = Annotated[int, Path(ge=1, le=ID_MAX)]
KINDS = ("slack", "github_issue", "github_label", "schedule", "ao_event")
CLASSES = ("derive", "priority", "spot")
LABELS = {"name": "Name", "scheduling_class": "Scheduling class", "precedence": "Precedence", "prompt": "Prompt"}
DONE = {"saved": "Saved. Sessions it fires from now on get this class and precedence; the sessions it already "
                 "spawned keep theirs (move one of those on its own page)."}


async def kind_defaults(bus: Bus) -> dict[str, str]:
    """The class each trigger kind's genesis gives a session when its trigger names none."""
    policy = await bus.request(p.GET_POLICY, p.PolicyQuery())
    return {g.genesis: g.effective for g in policy.genesis_classes}


async def find_trigger(bus: Bus, trigger_id: int) -> p.TriggerView:
    """One trigger, by id: search_triggers' pages (oldest first, by id) until it is found."""
    offset: int | None = 0
    for _ in range(FIND_PAGES):
        if offset is None:
            break
        found = await bus.request(p.SEARCH_TRIGGERS, p.TriggerQuery(limit=500, offset=offset))
        for t in found.triggers:
            if t.id == trigger_id:
                return t
        if found.triggers and found.triggers[-1].id > trigger_id:
            break  # oldest first by id: it is not there
        offset = found.next_offset
    raise ZimmerError(ErrorCode.NOT_FOUND, f"trigger {trigger_id} does not exist", {"trigger_id": trigger_id})


def update_request(trigger_id: int, form: FormData) -> p.UpdateTrigger:
    """The edit form as `update_trigger`: every field as shown; an empty precedence clears it."""
    chosen = str(form.get("scheduling_class") or "derive")
    if chosen not in CLASSES:
        raise ZimmerError(ErrorCode.INVALID, "Scheduling class must be derive, priority or spot.",
                          {"field": "scheduling_class"})
    precedence = whole_number(form, "precedence")
    return p.UpdateTrigger(trigger_id=trigger_id, name=str(form.get("name") or "").strip(),
                           scheduling_class=chosen, precedence=precedence, clear_precedence=precedence is None,
                           prompt=str(form.get("prompt") or "").replace("\r\n", "\n"),
                           enabled=form.get("enabled") == "yes")


def create_triggers(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/triggers")
    async def triggers(request: Request, kind: p.TriggerKindName | None = None,
                       offset: Annotated[int, Query(ge=0, le=10**9)] = 0) -> Response:
        signed_in(request)
        bus = bus_of(service)
        try:
            found = await bus.request(p.SEARCH_TRIGGERS, p.TriggerQuery(kind=kind, limit=PAGE, offset=offset))
            defaults = await kind_defaults(bus)
        except ZimmerError as exc:
            return refusal(request, exc)
        return render(request, "triggers.html", title="Triggers", found=found, defaults=defaults, kind=kind or "",
                      kinds=KINDS, offset=offset, page=PAGE)

    async def page(request: Request, operator: OperatorSession, trigger_id: int, done: str | None = None,
                   refused: FormRefusal | None = None, status_code: int = 200) -> Response:
        bus = bus_of(service)
        try:
            trigger = await find_trigger(bus, trigger_id)
            defaults = await kind_defaults(bus)
        except ZimmerError as exc:
            return refusal(request, exc)
        return render(request, "trigger.html", status_code=status_code, title=f"Trigger {trigger.id}: {trigger.name}",
                      t=trigger, defaults=defaults, csrf=operator.csrf, notice=DONE.get(done or ""), refused=refused,
                      invoke_key=form_key())

    @router.get("/triggers/{trigger_id}")
    async def trigger_page(request: Request, trigger_id: TriggerId, done: str | None = None) -> Response:
        return await page(request, signed_in(request), trigger_id, done)

    async def refused_here(request: Request, trigger_id: int, refused: Refused, form: str) -> Response:
        """A refused form on the trigger's page again, as typed; a refusal of the page itself (not
        signed in, the trigger gone) as it came."""
        if refused.error.code.value in ("forbidden", "not_found"):
            return refused.response
        return await page(request, signed_in(request), trigger_id, status_code=refused.error.http_status,
                          refused=form_refusal(form, refused.form, refused.error))

    @router.post("/triggers/{trigger_id}")
    async def save(request: Request, trigger_id: TriggerId) -> Response:
        try:
            await perform(request, service, p.UPDATE_TRIGGER, lambda form: update_request(trigger_id, form), LABELS)
        except Refused as refused:
            return await refused_here(request, trigger_id, refused, "edit")
        return back_to(f"/triggers/{trigger_id}", "saved")

    @router.post("/triggers/{trigger_id}/invoke")
    async def invoke(request: Request, trigger_id: TriggerId) -> Response:
        """The Invoke button: a session from the trigger's prompt, genesis web_ui (seed 004: a human
        asked in the web app), then its page. The form's drawn key makes a double submit one session."""
        try:
            result = await perform(request, service, p.INVOKE_TRIGGER, lambda form: p.FireTrigger(
                trigger_id=trigger_id, invoked_from="web_ui",
                idempotency_key=str(form.get("idempotency_key") or "").strip()[:120] or None))
        except Refused as refused:
            return await refused_here(request, trigger_id, refused, "invoke")
        return back_to(f"/sessions/{result.session.id}", "invoked")

    return router


