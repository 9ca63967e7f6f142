"""The Ranked page (seed 004 "The Ranked view", "Quick filters"): priority sessions stacked above
the spot queue, the queue highest precedence first, both editable in place.

Every control is a form that works without script (a POST, then back to the page). `ranked.js`
makes them in-place: Enter in a precedence field saves it and moves the row; a drag between two
rows posts the two neighbours (`reorder_precedence`: their midpoint, or a nudge); the ⋮ menu
promotes/demotes, starts now, trashes (with a speed bump and an Undo). Writes are optimistic:
the row moves first and the server's answer corrects the numbers; a refused write rolls back by
reloading, because the server's order is the only one that counts. Status pills update live
(`/ranked/statuses`), never re-sorting, re-grouping or inserting rows, and never touching a row
that holds focus or an unsaved edit. Each form makes the RPC the REST route makes.
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
from zimmer_gateway.web.pages import Refused, back_to, bus_of, perform, refusal, render, signed_in, whole_number
from zimmer_gateway.web.session_lists import every_session

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
DONE = {"precedence": "Changed the precedence of session {id}.", "moved": "Moved session {id}.",
        "promoted": "Made session {id} priority.",
        "promoted_started": "Made session {id} priority, which started it.",
        "demoted": "Demoted session {id} to the top of the spot queue.",
        "started": "Start now: {said}", "trashed": "Trashed session {id}.", "restored": "Restored session {id}."}


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def create_ranked(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/ranked")
    async def ranked(request: Request, filter: Filter = "queue",  # noqa: A002 - the query's name
                     done: str | None = None, id: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,  # noqa: A002 - the query's name
                     said: Annotated[str | None, Query(max_length=300)] = None) -> Response:
        operator = signed_in(request)
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
        notice = DONE[done].format(id=id or "", said=said or "") if done in DONE else None
        return render(request, "ranked.html", title="Ranked", csrf=operator.csrf, priority=priority,
                      spot=spot if with_spot else None, filter=filter, filters=FILTERS, notice=notice)

    @router.get("/ranked/statuses")
    async def statuses(request: Request, ids: Annotated[str, Query(max_length=12000)] = "") -> Response:
        """The live status pills: {id: status} for the rows the page shows (500 a request)."""
        signed_in(request)
        wanted = sorted({int(x) for x in ids.split(",") if x.strip().isdigit() and 0 < int(x) <= ID_MAX})[:500]
        if not wanted:
            return JSONResponse({})
        try:
            found = await every_session(bus_of(service), c.SessionQuery(ids=wanted), len(wanted))
        except ZimmerError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.http_status)
        return JSONResponse({str(v.id): v.status for v in found.sessions}, headers={"Cache-Control": "no-store"})

    async def act(request: Request, done: str, rpc: Any, build: Callable[[FormData], Any],
                  answer: Callable[[Any], dict[str, Any]], **about: str) -> Response:
        try:
            out = await perform(request, service, rpc, build)
        except Refused as refused:
            return refused_answer(request, refused)
        if wants_json(request):
            return JSONResponse(answer(out))
        return back_to("/ranked", done, **about, **({"said": out.sentence} if done == "started" else {}))

    def refused_answer(request: Request, refused: Refused) -> Response:
        """The refusal page, or for the page's script its words (it reloads and shows them)."""
        if wants_json(request):
            return JSONResponse({"error": refused.error.message, "code": refused.error.code.value},
                                status_code=refused.error.http_status)
        return refused.response

    def one(view: c.SessionView) -> dict[str, Any]:
        return {"id": view.id, "precedence": view.precedence, "status": view.status,
                "priority_class": view.priority_class}

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
            return refused_answer(request, refused)
        if view.status == "running":
            if wants_json(request):
                return JSONResponse({"session": one(view), "did": "started",
                                     "sentence": DONE["promoted_started"].format(id=session_id)})
            return back_to("/ranked", "promoted_started", id=str(session_id))
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

    @router.post("/ranked/{session_id}/trash")
    async def trash(request: Request, session_id: SessionId) -> Response:
        return await act(request, "trashed", c.ARCHIVE, lambda form: c.SessionRef(session_id=session_id),
                         lambda v: {"session": one(v)}, id=str(session_id))

    @router.post("/ranked/{session_id}/untrash")
    async def untrash(request: Request, session_id: SessionId) -> Response:
        return await act(request, "restored", c.UNARCHIVE, lambda form: c.SessionRef(session_id=session_id),
                         lambda v: {"session": one(v)}, id=str(session_id))

    return router
