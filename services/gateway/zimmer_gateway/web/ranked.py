"""The Ranked page (seed 004 "The Ranked view", "Quick filters"): priority sessions stacked above
the spot queue, the queue highest precedence first, both editable in place.

Every control is a form that works without script (a POST, then back to the page). `ranked.js`
makes them in-place: Enter in a precedence field saves it and moves the row; a drag between two
rows posts the two neighbours (`reorder_precedence`: their midpoint, or a nudge); the ⋮ menu
promotes/demotes, starts now, trashes (with a speed bump and an Undo). Writes are optimistic:
the row moves first and the server's answer corrects the numbers; a refused write rolls back by
reloading, because the server's order is the only one that counts. The page follows the server
live over its event stream (`live.js`, web/live.py: pills, order, rows), never touching a row that
holds focus or an unsaved edit; `/ranked/statuses` still answers a row's pills on request. Each
form makes the RPC the REST route makes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from starlette.datastructures import FormData
from starlette.responses import JSONResponse, Response

from zimmer_common.contracts import spot as c
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.routes.common import ID_MAX
from zimmer_gateway.web import quick_bubble, spawn_forms
from zimmer_gateway.web.pages import (
    TEMPLATES,
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
from zimmer_gateway.web.session_lists import every_session
from zimmer_gateway.web.sessions import spot_queue_request

SECTION_LIMIT = 500  # rows a section shows, read as many answers as their prompts need
SessionId = Annotated[int, Path(ge=1, le=ID_MAX)]
QUEUE_STATUSES = ["waiting", "running", "needs_input", "failed"]  # what has not started, or stopped short
UNARCHIVED = ["waiting", "running", "needs_input", "failed"]
Filter = Literal["queue", "all", "all_unarchived", "all_priority_unarchived"]
FILTERS: dict[str, tuple[str, list[str] | None, bool]] = {  # label, statuses, spot queue shown
    "queue": ("Waiting, running, needs input, failed", QUEUE_STATUSES, True),
    "all": ("All", None, True),
    "all_unarchived": ("All Unarchived", UNARCHIVED, True),
    "all_priority_unarchived": ("All Priority Unarchived", UNARCHIVED, False),
}
FORMS = {"reorder": "move", "start_now": "start"}  # the form a refused action re-renders: its row's, by action
DONE = {"precedence": "Changed the precedence of session {id}.", "moved": "Moved session {id}.",
        "promoted": "Made session {id} priority.",
        "promoted_started": "Made session {id} priority, which started it.",
        "demoted": "Demoted session {id} to the top of the spot queue.",
        "started": "Start now: {said}", "trashed": "Trashed session {id}.", "restored": "Restored session {id}.",
        "parked": "Parked session {id} in the spot queue: it sleeps until the sweep reaches it in precedence order.",
        "routed": "Started session {id} from the Quick Router: its first turn went to the gate.",
        "routed_spot": "Started session {id} from the Quick Router as spot, at the top of the spot queue."}


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def kept_filter(request: Request) -> dict[str, str]:
    """The quick filter a form was posted from (its action carries it), to go back to."""
    chosen = request.query_params.get("filter", "queue")
    return {"filter": chosen} if chosen in FILTERS and chosen != "queue" else {}


def _parent(raw: object) -> int | None:
    """The parent a refused bubble form named, to draw it again (None when it is not an id)."""
    text = str(raw or "")
    return int(text) if text.isdigit() and 0 < int(text) <= ID_MAX else None


def create_ranked(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def page(request: Request, operator: OperatorSession, filter: str = "queue",  # noqa: A002 - the query's name
                   notice: str | None = None, refused: FormRefusal | None = None, status_code: int = 200) -> Response:
        _label, statuses, with_spot = FILTERS[filter]
        bus = bus_of(service)
        try:
            priority, spot = await asyncio.gather(
                every_session(bus, c.SessionQuery(status=statuses, priority_class="priority", order="precedence"),
                              SECTION_LIMIT),
                every_session(bus, c.SessionQuery(status=statuses, priority_class="spot", order="precedence"),
                              SECTION_LIMIT))
        except ZimmerError as exc:
            return refusal(request, exc)
        return render(request, "ranked.html", status_code=status_code, title="Ranked", csrf=operator.csrf,
                      priority=priority, spot=spot if with_spot else None, filter=filter, filters=FILTERS,
                      notice=notice, refused=refused, form_key=spawn_forms.form_key())

    @router.get("/ranked")
    async def ranked(request: Request, filter: Filter = "queue",  # noqa: A002 - the query's name
                     done: str | None = None, id: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,  # noqa: A002 - the query's name
                     said: Annotated[str | None, Query(max_length=300)] = None) -> Response:
        notice = DONE[done].format(id=id or "", said=said or "") if done in DONE else None
        return await page(request, signed_in(request), filter, notice)

    @router.get("/ranked/statuses")
    async def statuses(request: Request, ids: Annotated[str, Query(max_length=12000)] = "") -> Response:
        """The live status pills: {id: {status, pills}} for the rows the page shows (500 a request):
        `pills` is the status and why it waits, rendered as the page renders them."""
        signed_in(request)
        wanted = sorted({int(x) for x in ids.split(",") if x.strip().isdigit() and 0 < int(x) <= ID_MAX})[:500]
        if not wanted:
            return JSONResponse({})
        try:
            found = await every_session(bus_of(service), c.SessionQuery(ids=wanted), len(wanted))
        except ZimmerError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.http_status)
        pills = TEMPLATES.get_template("panel.html").module.status_pills  # the macro the page renders them with
        return JSONResponse({str(v.id): {"status": v.status, "pills": str(pills(v))} for v in found.sessions},
                            headers={"Cache-Control": "no-store"})

    async def act(request: Request, done: str, rpc: Any, build: Callable[[FormData], Any],
                  answer: Callable[[Any], dict[str, Any]], **about: str) -> Response:
        try:
            out = await perform(request, service, rpc, build)
        except Refused as refused:
            return await refused_answer(request, refused)
        if wants_json(request):
            return JSONResponse(answer(out))
        return back_to("/ranked", done, **about, **({"said": out.sentence} if done == "started" else {}),
                       **kept_filter(request))

    async def refused_answer(request: Request, refused: Refused) -> Response:
        """For the page's script, the refusal's words (it reloads and shows them); without script,
        the page again (the filter it was on) with the row's form as typed and the refusal beside
        it; a form that is not this site's gets the refusal page."""
        if wants_json(request):
            return JSONResponse({"error": refused.error.message, "code": refused.error.code.value},
                                status_code=refused.error.http_status)
        if refused.error.code.value == "forbidden":
            return refused.response
        parts = request.url.path.split("/")  # /ranked/{id}/{action}
        return await page(request, signed_in(request), kept_filter(request).get("filter", "queue"),
                          status_code=refused.error.http_status,
                          refused=form_refusal(f"{FORMS.get(parts[-1], parts[-1])}-{parts[2]}", refused.form,
                                               refused.error))

    def one(view: c.SessionView) -> dict[str, Any]:
        return {"id": view.id, "precedence": view.precedence, "status": view.status,
                "priority_class": view.priority_class}

    @router.post("/ranked/quick")
    async def quick_router(request: Request) -> Response:
        """The Quick Router: `spawn_session` as POST /api/v1/sessions makes it, as the operator
        (genesis web_ui; Run as spot: spot, above the top of the spot queue); Submit comes back
        here, Submit & Open goes to the session.
        The chat bubble's panel (web/quick_bubble.py) posts here too, naming the page it was opened
        on (`back`) and, on a session's page, that session as parent: Submit goes back to that page,
        a refusal re-renders the bubble's page."""
        try:
            result = await perform(request, service, c.SPAWN, spawn_forms.quick_router, spawn_forms.LABELS)
        except Refused as refused:
            if refused.error.code.value == "forbidden":
                return refused.response
            posted = refused.form or {}
            if posted.get("back"):
                return await quick_bubble.bubble_page(
                    request, _parent(posted.get("parent")), str(posted.get("back")),
                    status_code=refused.error.http_status,
                    refused=form_refusal(quick_bubble.FORM, refused.form, refused.error))
            return await page(request, signed_in(request), kept_filter(request).get("filter", "queue"),
                              status_code=refused.error.http_status,
                              refused=form_refusal("quick", refused.form, refused.error))
        made, form = result.session, await request.form()
        if form.get("open") == "yes":
            return back_to(f"/sessions/{made.id}", "routed")
        if form.get("back"):  # the bubble: back to the page it was opened on, which says what was started
            return quick_bubble.routed(str(form.get("back")), made.id, made.scheduling_class == "spot")
        return back_to("/ranked", "routed_spot" if made.scheduling_class == "spot" else "routed", id=str(made.id),
                       **kept_filter(request))

    @router.post("/ranked/{session_id}/precedence")
    async def precedence(request: Request, session_id: SessionId) -> Response:
        return await act(request, "precedence", c.UPDATE_SESSION, lambda form: c.UpdateSession(
            session_id=session_id, precedence=whole_number(form, "precedence")), lambda v: {"session": one(v)},
            id=str(session_id))

    @router.post("/ranked/{session_id}/reorder")
    async def reorder(request: Request, session_id: SessionId) -> Response:
        return await act(request, "moved", c.REORDER, lambda form: c.ReorderSession(
            session_id=session_id, above_session_id=whole_number(form, "above"),
            below_session_id=whole_number(form, "below")),
            lambda r: {"session": one(r.session), "nudged": [one(v) for v in r.nudged]}, id=str(session_id))

    @router.post("/ranked/{session_id}/promote")
    async def promote(request: Request, session_id: SessionId) -> Response:
        """Promote to priority keeps its rank for a later demotion, and starts it: the promotion
        itself starts a held or paused session (seed 004); Start now only when it did not."""
        try:
            view = await perform(request, service, c.UPDATE_SESSION, lambda form: c.UpdateSession(
                session_id=session_id, scheduling_class="priority"))
        except Refused as refused:
            return await refused_answer(request, refused)
        if view.status == "running":
            if wants_json(request):
                return JSONResponse({"session": one(view), "did": "started",
                                     "sentence": DONE["promoted_started"].format(id=session_id)})
            return back_to("/ranked", "promoted_started", id=str(session_id), **kept_filter(request))
        return await act(request, "started", c.START_NOW, lambda form: c.StartNow(session_id=session_id),
                         lambda r: {"session": one(r.session), "did": r.did, "sentence": r.sentence},
                         id=str(session_id))

    @router.post("/ranked/{session_id}/demote")
    async def demote(request: Request, session_id: SessionId) -> Response:
        return await act(request, "demoted", c.UPDATE_SESSION, lambda form: c.UpdateSession(
            session_id=session_id, scheduling_class="spot", place="top_of_spot"), lambda v: {"session": one(v)},
            id=str(session_id))

    @router.post("/ranked/{session_id}/start_now")
    async def start_now(request: Request, session_id: SessionId) -> Response:
        return await act(request, "started", c.START_NOW, lambda form: c.StartNow(session_id=session_id),
                         lambda r: {"session": one(r.session), "did": r.did, "sentence": r.sentence},
                         id=str(session_id))

    @router.post("/ranked/{session_id}/spot_queue")
    async def spot_queue(request: Request, session_id: SessionId) -> Response:
        """Pause Until → Spot Queue in the ⋮ menu (seed 004): as on the session's page."""
        return await act(request, "parked", c.PAUSE_INTO_SPOT_QUEUE,
                         lambda form: spot_queue_request(form, session_id, "the operator's Ranked view"),
                         lambda v: {"session": one(v)}, id=str(session_id))

    @router.post("/ranked/{session_id}/trash")
    async def trash(request: Request, session_id: SessionId) -> Response:
        return await act(request, "trashed", c.ARCHIVE, lambda form: c.SessionRef(session_id=session_id),
                         lambda v: {"session": one(v)}, id=str(session_id))

    @router.post("/ranked/{session_id}/untrash")
    async def untrash(request: Request, session_id: SessionId) -> Response:
        return await act(request, "restored", c.UNARCHIVE, lambda form: c.SessionRef(session_id=session_id),
                         lambda v: {"session": one(v)}, id=str(session_id))

    return router
