"""The Sessions pages (seed 004): a list with the dashboard's class and genesis filters, and a
session page with its class, genesis, precedence and status, the hold banner ("Held for quota
headroom", or "Next turn held for quota headroom" for a resume, naming the reason, the next check
and "Make this session priority"), the Scheduling class selector, its gate decisions, its
enqueued messages and its timeline (log lines, newest first, verbose only when asked for), the
warnings a sweeper left on it, and Delete (not the Trash: a checked confirmation, then the row goes).
The forms make `update_session`, as PATCH /api/v1/sessions/{id} does, and `delete_session`, as
DELETE /api/v1/sessions/{id} does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from zimmer_common.contracts import clones as k
from zimmer_common.contracts import logs as lg
from zimmer_common.contracts import spot as c
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.routes.common import ID_MAX
from zimmer_gateway.web.pages import Refused, back_to, bus_of, perform, refusal, render, signed_in, whole_number

PAGE = 50  # sessions a list page shows at most; fewer when their prompts fill one answer
ENQUEUED_PAGE = 50  # the same for a session's enqueued messages
TIMELINE_PAGE = 100
SessionId = Annotated[int, Path(ge=1, le=ID_MAX)]
GENESES = ("web_ui", "slack", "github_issue", "github_label", "schedule", "ao_event", "api", "unknown")
DONE = {"class": "Changed the scheduling class.", "priority": "Made this session priority.",
        "precedence": "Changed the precedence.", "restarted": "Restarted: its turn went to the gate.",
        "trashed": "Moved to the Trash: the session is archived and takes no turns.",
        "restored": "Restored from the Trash, as it was before."}
LIST_DONE = {"deleted": "Deleted the session; the sweeper takes its directories."}


def hold_banner(s: c.SessionView) -> str | None:
    """The banner's heading: a resume's hold names the next turn (seed 004)."""
    if s.spot_hold_reason is None:
        return None
    return "Next turn held for quota headroom" if s.ever_started else "Held for quota headroom"


def create_sessions(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/sessions")
    async def sessions(request: Request, priority_class: Literal["priority", "spot", ""] = "",
                       genesis: Literal[GENESES] | Literal[""] = "",  # type: ignore[valid-type]  # GENESES is a tuple of literals spread into Literal
                       offset: Annotated[int, Query(ge=0, le=10**9)] = 0, done: str | None = None) -> Response:
        signed_in(request)
        query = c.SessionQuery(priority_class=priority_class or None, genesis=[genesis] if genesis else None,
                               limit=PAGE, offset=offset)
        try:
            found = await bus_of(service).request(c.LIST_SESSIONS, query)
        except ZimmerError as exc:
            return refusal(request, exc)
        return render(request, "sessions.html", title="Sessions", found=found, priority_class=priority_class,
                      genesis=genesis, geneses=GENESES, offset=offset, page=PAGE, notice=LIST_DONE.get(done or ""))

    @router.get("/sessions/{session_id}")
    async def session_page(request: Request, session_id: SessionId, done: str | None = None,
                           level: Annotated[list[lg.LogLevel] | None, Query(max_length=4)] = None,
                           cursor: Annotated[str | None, Query(max_length=200)] = None,
                           enqueued_before: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None) -> Response:
        operator = signed_in(request)
        bus = bus_of(service)
        try:
            session, decisions, enqueued = await asyncio.gather(
                bus.request(c.GET_SESSION, c.SessionRef(session_id=session_id)),
                bus.request(c.GATE_DECISIONS, c.GateDecisionQuery(session_id=session_id, limit=50)),
                bus.request(c.ENQUEUED, c.EnqueuedQuery(session_id=session_id, limit=ENQUEUED_PAGE,
                                                        before_id=enqueued_before)))
        except ZimmerError as exc:
            return refusal(request, exc)
        timeline, timeline_problem = await _timeline(service, session_id, level, cursor)
        return render(request, "session.html", title=f"Session {session.id}", s=session,
                      decisions=decisions.decisions, enqueued=enqueued.messages, banner=hold_banner(session),
                      enqueued_before=enqueued_before, enqueued_next=enqueued.next_before_id,
                      csrf=operator.csrf, timeline=timeline, timeline_problem=timeline_problem,
                      levels=lg.LEVELS, chosen_levels=timeline.levels if timeline else list(level or []),
                      notice=DONE.get(done or ""))

    async def act(request: Request, session_id: int, done: str, rpc: Any, build: Callable[[FormData], Any]) -> Response:
        """A session page's form: the RPC, then back to the page saying what was done (or the refusal)."""
        try:
            await perform(request, service, rpc, build)
        except Refused as refused:
            return refused.response
        return back_to(f"/sessions/{session_id}", done)

    async def update(request: Request, session_id: int, done: str, **change: object) -> Response:
        return await act(request, session_id, done, c.UPDATE_SESSION, lambda form: c.UpdateSession(
            session_id=session_id, **{k: v(form) if callable(v) else v for k, v in change.items()}))

    @router.post("/sessions/{session_id}/priority")
    async def make_priority(request: Request, session_id: SessionId) -> Response:
        return await update(request, session_id, "priority", scheduling_class="priority")

    @router.post("/sessions/{session_id}/class")
    async def change_class(request: Request, session_id: SessionId) -> Response:
        return await update(request, session_id, "class",
                            scheduling_class=lambda form: str(form.get("scheduling_class") or ""))

    @router.post("/sessions/{session_id}/precedence")
    async def change_precedence(request: Request, session_id: SessionId) -> Response:
        return await update(request, session_id, "precedence",
                            precedence=lambda form: whole_number(form, "precedence"))

    @router.post("/sessions/{session_id}/restart")
    async def restart(request: Request, session_id: SessionId) -> Response:
        """The web Restart takes the session over: it consumes a wall-clock pause (seed 004), unlike
        the API's and an agent's restart, which refuse while the pause is ahead."""
        return await act(request, session_id, "restarted", c.RESTART,
                         lambda form: c.RestartSession(session_id=session_id, consume_pause=True))

    @router.post("/sessions/{session_id}/trash")
    async def trash(request: Request, session_id: SessionId) -> Response:
        """The Ranked view's Trash, on the session's own page: archived, restorable."""
        return await act(request, session_id, "trashed", c.ARCHIVE, lambda form: c.SessionRef(session_id=session_id))

    @router.post("/sessions/{session_id}/untrash")
    async def untrash(request: Request, session_id: SessionId) -> Response:
        return await act(request, session_id, "restored", c.UNARCHIVE,
                         lambda form: c.SessionRef(session_id=session_id))

    @router.post("/sessions/{session_id}/delete")
    async def delete(request: Request, session_id: SessionId) -> Response:
        """Not the Trash: nothing brings it back, so the form's confirmation box must be ticked."""
        def confirmed(form: FormData) -> c.SessionRef:
            if form.get("confirm") != "yes":
                raise ZimmerError(ErrorCode.INVALID, "Tick the box to confirm: a deleted session cannot be brought "
                                  "back (the Trash panel on the session's page keeps it restorable instead).",
                                  {"field": "confirm"})
            return c.SessionRef(session_id=session_id)

        try:
            await perform(request, service, k.DELETE_SESSION, confirmed)
        except Refused as refused:
            return refused.response
        return back_to("/sessions", "deleted")

    return router


async def _timeline(service: Service, session_id: int, level: list[lg.LogLevel] | None,
                    cursor: str | None) -> tuple[lg.LogPage | None, str | None]:
    """The newest page of the session's timeline, or why it cannot be shown: the sweeper being
    down (or a stale cursor) takes the panel, never the whole session page."""
    try:
        page = await bus_of(service).request(lg.GET_SESSION_LOGS, lg.LogQuery(
            session_id=session_id, levels=level, cursor=cursor, order="desc", limit=TIMELINE_PAGE))
    except ZimmerError as exc:
        return None, f"{exc.code.value}: {exc.message}"
    return page, None
