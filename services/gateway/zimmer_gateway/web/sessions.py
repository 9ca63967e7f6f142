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
from datetime import UTC, datetime
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
from zimmer_gateway.routes.transcripts import transcript_info, transcript_zip
from zimmer_gateway.web import spawn_forms
from zimmer_gateway.web.hierarchy import hierarchy
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

PAGE = 50  # sessions a list page shows at most; fewer when their prompts fill one answer
ENQUEUED_PAGE = 50  # the same for a session's enqueued messages
TIMELINE_PAGE = 100
SessionId = Annotated[int, Path(ge=1, le=ID_MAX)]
GENESES = ("web_ui", "slack", "github_issue", "github_label", "schedule", "ao_event", "api", "unknown")
# The form each action's refusal re-renders.
FORMS = {"class": "class", "priority": "priority", "precedence": "precedence", "restarted": "restart",
         "trashed": "trash", "restored": "untrash", "parked": "spot_queue", "paused_until": "pause_until"}
DONE = {"class": "Changed the scheduling class.", "priority": "Made this session priority.",
        "precedence": "Changed the precedence.", "restarted": "Restarted: its turn went to the gate.",
        "trashed": "Moved to the Trash: the session is archived and takes no turns.",
        "restored": "Restored from the Trash, as it was before.",
        "created": "Started this session from the new-session form: its first turn went to the gate.",
        "routed": "Started this session from the Quick Router: its first turn went to the gate.",
        "invoked": "Started this session by invoking its trigger: its first turn went to the gate.",
        "parked": "Parked in the spot queue: it sleeps in waiting until the sweep reaches it in precedence order.",
        "paused_until": "Paused until the time given: nothing starts it before then; then its wake answers to the gate."}
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
        return await list_page(request, signed_in(request), priority_class, genesis, offset, done)

    async def list_page(request: Request, operator: OperatorSession, priority_class: str = "", genesis: str = "",
                        offset: int = 0, done: str | None = None, refused: FormRefusal | None = None,
                        status_code: int = 200) -> Response:
        query = c.SessionQuery(priority_class=priority_class or None, genesis=[genesis] if genesis else None,
                               limit=PAGE, offset=offset)
        try:
            found = await bus_of(service).request(c.LIST_SESSIONS, query)
        except ZimmerError as exc:
            return refusal(request, exc)
        return render(request, "sessions.html", status_code=status_code, title="Sessions", found=found,
                      priority_class=priority_class, genesis=genesis, geneses=GENESES, offset=offset, page=PAGE,
                      notice=LIST_DONE.get(done or ""), csrf=operator.csrf, refused=refused,
                      form_key=spawn_forms.form_key())

    @router.post("/sessions/new")
    async def new_session(request: Request) -> Response:
        """The new-session form: `spawn_session` as POST /api/v1/sessions makes it, as the operator
        (genesis web_ui); then the new session's page. A refusal re-renders the list with the form
        as it was filled in and the refusal beside the field."""
        try:
            result = await perform(request, service, c.SPAWN, spawn_forms.new_session, spawn_forms.LABELS)
        except Refused as refused:
            if refused.error.code.value == "forbidden":
                return refused.response
            return await list_page(request, signed_in(request), status_code=refused.error.http_status,
                                   refused=form_refusal("new", refused.form, refused.error))
        return back_to(f"/sessions/{result.session.id}", "created")

    async def page(request: Request, operator: OperatorSession, session_id: int, done: str | None = None,
                   level: list[lg.LogLevel] | None = None, cursor: str | None = None,
                   enqueued_before: int | None = None, refused: FormRefusal | None = None,
                   status_code: int = 200) -> Response:
        bus = bus_of(service)
        try:
            session, decisions, enqueued = await asyncio.gather(
                bus.request(c.GET_SESSION, c.SessionRef(session_id=session_id)),
                bus.request(c.GATE_DECISIONS, c.GateDecisionQuery(session_id=session_id, limit=50)),
                bus.request(c.ENQUEUED, c.EnqueuedQuery(session_id=session_id, limit=ENQUEUED_PAGE,
                                                        before_id=enqueued_before)))
        except ZimmerError as exc:
            return refusal(request, exc)
        tree = await hierarchy(bus, session)
        timeline, timeline_problem = await _timeline(service, session_id, level, cursor)
        transcript, transcript_problem = await _transcript(service, session_id)
        return render(request, "session.html", status_code=status_code, title=f"Session {session.id}", s=session,
                      decisions=decisions.decisions, enqueued=enqueued.messages, banner=hold_banner(session),
                      enqueued_before=enqueued_before, enqueued_next=enqueued.next_before_id,
                      csrf=operator.csrf, timeline=timeline, timeline_problem=timeline_problem,
                      levels=lg.LEVELS, chosen_levels=timeline.levels if timeline else list(level or []),
                      notice=DONE.get(done or ""), refused=refused, transcript=transcript,
                      transcript_problem=transcript_problem, backlog_item=backlog_item(session), tree=tree)

    @router.get("/sessions/{session_id}")
    async def session_page(request: Request, session_id: SessionId, done: str | None = None,
                           level: Annotated[list[lg.LogLevel] | None, Query(max_length=4)] = None,
                           cursor: Annotated[str | None, Query(max_length=200)] = None,
                           enqueued_before: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None) -> Response:
        return await page(request, signed_in(request), session_id, done, level, cursor, enqueued_before)

    @router.get("/sessions/{session_id}/transcript.zip")
    async def transcript_download(request: Request, session_id: SessionId) -> Response:
        """The session page's transcript link: the zip REST serves, for a signed-in operator."""
        signed_in(request)
        try:
            return await transcript_zip(bus_of(service).js, session_id)
        except ZimmerError as exc:
            return refusal(request, exc)

    async def act(request: Request, session_id: int, done: str, rpc: Any, build: Callable[[FormData], Any]) -> Response:
        """A session page's form: the RPC, then back to the page saying what was done; a refusal
        re-renders the page with the form as it was filled in and the refusal beside it."""
        try:
            await perform(request, service, rpc, build)
        except Refused as refused:
            if refused.error.code.value in ("forbidden", "not_found"):  # nothing of this page to re-render
                return refused.response
            return await page(request, signed_in(request), session_id, status_code=refused.error.http_status,
                              refused=form_refusal(FORMS.get(done, done), refused.form, refused.error))
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

    @router.post("/sessions/{session_id}/spot_queue")
    async def spot_queue(request: Request, session_id: SessionId) -> Response:
        """Pause Until → Spot Queue in the header: `pause_into_spot_queue` as REST makes it; the
        web's Pause Until stops a running turn unconditionally (seed 004), and Resume with rides on
        the session, delivered when the sweep reaches it."""
        return await act(request, session_id, "parked", c.PAUSE_INTO_SPOT_QUEUE,
                         lambda form: spot_queue_request(form, session_id, "the operator's session page"))

    @router.post("/sessions/{session_id}/pause_until")
    async def pause_until(request: Request, session_id: SessionId) -> Response:
        """Pause Until a time from the session page (seed 004's Pause Until): a running turn stops
        now, nothing starts it before then, and its wake answers to the gate."""
        return await act(request, session_id, "paused_until", c.PAUSE_UNTIL,
                         lambda form: pause_until_request(form, session_id, "the operator's session page"))

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
            if refused.error.code.value in ("forbidden", "not_found"):
                return refused.response
            return await page(request, signed_in(request), session_id, status_code=refused.error.http_status,
                              refused=form_refusal("delete", refused.form, refused.error))
        return back_to("/sessions", "deleted")

    return router


def spot_queue_request(form: FormData, session_id: int, by: str) -> c.PauseIntoSpotQueue:
    """Pause Until → Spot Queue from a page: halt the running turn; Resume with, when typed."""
    resume_with = str(form.get("resume_with") or "").replace("\r\n", "\n")
    return c.PauseIntoSpotQueue(session_id=session_id, resume_with=resume_with if resume_with.strip() else None,
                                halt=True, by=by)


def pause_until_request(form: FormData, session_id: int, by: str) -> c.PauseUntil:
    """Pause Until from a page: the form's `until` is a wall-clock time in UTC (the field says so;
    `datetime-local` carries no zone), Wake with when typed."""
    raw = str(form.get("until") or "").strip()
    try:
        until = datetime.fromisoformat(raw).replace(tzinfo=UTC) if raw and len(raw) <= 32 else None
    except ValueError:
        until = None
    if until is None:
        raise ZimmerError(ErrorCode.INVALID, f"Until: “{raw[:40]}” is not a date and time (YYYY-MM-DD HH:MM, UTC)."
                          if raw else "Until is required: the moment, in UTC, before which nothing starts it.",
                          {"field": "until"})
    if until <= datetime.now(UTC):
        raise ZimmerError(ErrorCode.INVALID, "Until must be in the future: a pause that has already ended pauses "
                          "nothing (Restart runs it now).", {"field": "until"})
    prompt = str(form.get("prompt") or "").replace("\r\n", "\n")
    return c.PauseUntil(session_id=session_id, until=until, prompt=prompt if prompt.strip() else None, halt=True, by=by)


def backlog_item(s: c.SessionView) -> dict[str, Any] | None:
    """The work backlog row this session was started from (its spawn's metadata: seed 000
    "tagged ... with the item's id and key"), or None."""
    item_id, key = s.metadata.get("work_backlog_item_id"), s.metadata.get("work_backlog_key")
    if not isinstance(item_id, int) or not isinstance(key, str):
        return None
    return {"id": item_id, "key": key}


async def _transcript(service: Service, session_id: int) -> tuple[dict[str, Any] | None, str | None]:
    """The archived transcript's size and when it was stored, or why it cannot be said; (None,
    None) when none is archived yet."""
    try:
        info = await transcript_info(bus_of(service).js, session_id)
    except ZimmerError as exc:
        return None, exc.message
    if info is None:
        return None, None
    return {"size": info.size or 0, "stored_at": _instant(info.mtime)}, None


def _instant(mtime: str | None) -> datetime | None:
    """JetStream's mtime (RFC 3339 with nanoseconds) as a moment; None when it is not one."""
    if not mtime:
        return None
    head, _, tail = mtime.partition(".")
    zone = tail.lstrip("0123456789") if tail else ""
    digits = tail[: len(tail) - len(zone)][:6] if tail else ""
    try:
        at = datetime.fromisoformat(f"{head}{'.' + digits if digits else ''}{zone.replace('Z', '+00:00')}")
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


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
