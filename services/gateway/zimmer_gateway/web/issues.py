"""The Issues page (seed 000 "Reading the queue as a human"): the queue in rank order, the counts
with the In flight header split as the seed words it, the Queued, In flight and Parked sections,
and the operator's forms: Promote (start now as priority), Pin (with a precedence), Unpin and
Remove (with a reason in words). Each form makes the RPC the operator-only REST route makes.

Its GitHub side (`backlog.issues_view`): Stranded (verdict, age, the Hold form), Awaiting your
decision (naming how many rows are held), "In GitHub, not on the queue" and the open-issue trend.
A row whose issue the GitHub snapshot shows closed is left out of its section and count (#173);
the page writes nothing back.

Queued, In flight and Parked carry an On GitHub column (issue 27 #2): each row's issue as GitHub
last showed it, with the age of the reading, and a queued row a pull should remove flagged with
the pull's reason (the backlog decides; `on_github` only words it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.limits import max_length
from zimmer_common.contracts.spot import SessionQuery
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.routes.common import ID_MAX
from zimmer_gateway.web import words
from zimmer_gateway.web.pages import (
    FormRefusal,
    Refused,
    age,
    back_to,
    bus_of,
    form_refusal,
    perform,
    refusal,
    render,
    signed_in,
    utc,
    whole_number,
)
from zimmer_gateway.web.session import OperatorSession
from zimmer_gateway.web.session_lists import LIMIT_MAX, every_session

QUEUE_PAGE = 200  # queued rows per page: each carries four small forms
SECTION_LIMIT = 200
OPERATOR = "operator"
ItemId = Annotated[int, Path(ge=1, le=ID_MAX)]
# Where each section's page starts: a section ends early when its rows reach an answer's byte
# bound, and its "Next page" link carries the offset the answer gave (issue 27 #13).
SectionOffset = Annotated[int, Query(ge=0, le=10**9)]
# The forms' inputs take what the contract takes: the same numbers as docs/backlog.md's generated
# table (issue 27 #7), read from the models the forms build.
FORM_MAXLENGTH = {"remove_reason": max_length(c.RemoveItem, "reason"), "hold_reason": max_length(c.HoldItem, "reason")}
SHOWN = 5  # rows a section shows open; the rest fold under "N more" (375 px: Parked a few Tab presses away)
FORMS = {"promoted": "promote", "pinned": "pin", "unpinned": "unpin", "removed": "remove", "held": "hold"}
RPCS: dict[str, Any] = {"promoted": c.START_NOW, "pinned": c.PIN, "unpinned": c.UNPIN, "removed": c.REMOVE,
                        "held": c.HOLD}
DONE = {  # what a form did, said back on the page (a fixed vocabulary: the query names which)
    "promoted": "Started {key} now as a priority session.",
    "pinned": "Pinned {key}.",
    "unpinned": "Unpinned {key}; it moved back into its band if it was outside it.",
    "removed": "Removed {key}.",
    "held": "Held {key} for a decision; it is in Awaiting your decision for 14 days.",
}
# What each stored verdict means, in the seed's words (the Stranded and Awaiting sections).
VERDICTS = {
    "pr_stalled": "the only open PRs referencing it have gone quiet (14 days)",
    "pr_merged_issue_open": "a merged PR references it, but the issue is still open",
    "no_pr": "no PR has ever referenced it",
    "abandoned_pr": "PRs referenced it, and every one was closed unmerged: an attempt was made",
    "unknown": "GitHub could not be read; re-checked next pass",
    "pr_open": "an open PR referencing it moved within 14 days",
    "issue_closed": "the issue is closed",
    "superseded": "a newer row carries the same key",
}
CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 640, 200, 28


def trend_chart(trend: list[c.TrendSeries]) -> dict[str, Any] | None:
    """The open-issue trend as SVG polylines (one per repository) on shared axes; None when the
    snapshot has not run. Server-drawn: no script, and the numbers are in a table beside it."""
    points = [p for series in trend for p in series.points]
    if not points:
        return None
    start, end = min(p.at for p in points), max(p.at for p in points)
    span = max((end - start).total_seconds(), 1.0)
    top = max(max(p.open_issues for p in points), 1)
    width, height = CHART_WIDTH - 2 * CHART_PAD, CHART_HEIGHT - 2 * CHART_PAD

    def xy(p: c.TrendPoint) -> str:
        x = CHART_PAD + width * (p.at - start).total_seconds() / span
        y = CHART_PAD + height * (1 - p.open_issues / top)
        return f"{x:.1f},{y:.1f}"

    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "pad": CHART_PAD, "top": top, "start": start, "end": end,
            "lines": [{"repo": s.repo, "points": " ".join(xy(p) for p in s.points), "last": s.points[-1]}
                      for s in trend]}


# A row's issue as GitHub last showed it (issue 27 #2), in words; `leaves_as` is the pull's own reason.
GITHUB_WORDS = {"open": "open", "closed": "closed", "open_pr": "has an open PR", "merged_pr": "has a merged PR",
                "unknown": "unknown"}
READ_BY = {"snapshot": "the GitHub snapshot (every 10 minutes)", "liveness": "the liveness sweep (hourly)"}


def on_github(item: c.ItemView, now: datetime) -> dict[str, str | None]:
    """The On GitHub cell: the state and the age of the reading ("closed · 4m ago"), who read it,
    and on a queued row a pull should remove, the flag naming the reason. A flag, not a removal:
    only the groomer's pull takes a queued row off, with one of its fixed reasons."""
    github = item.github
    if github is None:
        return {"state": "unknown", "words": "not read", "read": None, "flag": None, "leaves_as": None}
    words = GITHUB_WORDS[github.state]
    read = None
    if github.read_at is not None:
        words += f" · {age(max((now - github.read_at).total_seconds(), 0))} ago"
        read = f"read by {READ_BY[github.read_by or 'snapshot']} at {utc(github.read_at)}"
    flag = f"a pull should remove it: {github.leaves_as}" if github.leaves_as else None
    return {"state": github.state, "words": words, "read": read, "flag": flag, "leaves_as": github.leaves_as}


def days_since(item: c.ItemView, now: datetime) -> int:
    left = item.started_at or item.removed_at
    return 0 if left is None else max((now - left).days, 0)


def in_flight_header(counts: c.Counts) -> str:
    """The seed's words: the population, not a cause, split whenever any are held."""
    if counts.spot_held:
        return (f"{counts.in_flight - counts.spot_held} an agent is still advancing, "
                f"{counts.spot_held} held at the spot gate before a turn")
    return f"{counts.in_flight}"


@dataclass
class Offsets:
    """Where each section's page starts: the page's query, and a form's (it posts to the page's own
    query, so a refusal re-renders the page the operator was on)."""

    offset: SectionOffset = 0
    in_flight_offset: SectionOffset = 0
    parked_offset: SectionOffset = 0
    stranded_offset: SectionOffset = 0
    awaiting_offset: SectionOffset = 0

    def given(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items() if v}


def repositories(items: list[c.ItemView], trend: list[c.TrendSeries]) -> dict[str, str]:
    """Short name → owner/name of every repository the page knows (the gated ones, the rows' issues'):
    `zimmer#79` in a hold's reason links to its issue."""
    known = [s.repo for s in trend] + [r for r in (words.repository_of(i.issue_url) for i in items) if r]
    return {full.rsplit("/", 1)[-1].lower(): full for full in known}


def create_issues(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def page(request: Request, session: OperatorSession, at: Offsets, notice: str | None = None,
                   refused: FormRefusal | None = None, status_code: int = 200) -> Response:
        bus = bus_of(service)
        offset = at.offset
        try:
            queued, flying, parked, github = await asyncio.gather(
                bus.request(c.GET_ITEMS, c.ItemQuery(status="queued", limit=QUEUE_PAGE, offset=offset)),
                bus.request(c.GET_ITEMS, c.ItemQuery(status="in_flight", limit=SECTION_LIMIT,
                                                     offset=at.in_flight_offset)),
                bus.request(c.GET_ITEMS, c.ItemQuery(status="parked", limit=SECTION_LIMIT,
                                                     offset=at.parked_offset)),
                bus.request(c.ISSUES_VIEW, c.IssuesViewQuery(
                    limit=SECTION_LIMIT, stranded_offset=at.stranded_offset, awaiting_offset=at.awaiting_offset)))
        except ZimmerError as exc:
            return refusal(request, exc)
        now = datetime.now(UTC)
        every = [*queued.items, *flying.items, *parked.items, *github.stranded, *github.awaiting]
        names = {i.id: i.key for i in every}
        if refused is not None:
            refused = replace(refused, message=words.name_rows(refused.message, names))
        return render(request, "issues.html", status_code=status_code, title="Issues", csrf=session.csrf,
                      counts=queued.counts, in_flight_header=in_flight_header(queued.counts), queued=queued,
                      in_flight=flying, parked=parked, offset=offset, page=QUEUE_PAGE, notice=notice, github=github,
                      verdicts=VERDICTS, chart=trend_chart(github.trend), maxlength=FORM_MAXLENGTH,
                      offsets={"in_flight": at.in_flight_offset, "parked": at.parked_offset,
                               "stranded": at.stranded_offset, "awaiting": at.awaiting_offset},
                      age={i.id: days_since(i, now) for i in [*github.stranded, *github.awaiting]},
                      on_github={i.id: on_github(i, now) for i in [*queued.items, *flying.items, *parked.items]},
                      sessions=await sessions_of(service, [*flying.items, *parked.items]),
                      repos=repositories(every, github.trend), refused=refused, shown=SHOWN,
                      here=urlencode(at.given()))

    @router.get("/issues")
    async def issues(request: Request, at: Annotated[Offsets, Depends()], done: str | None = None,
                     key: Annotated[str | None, Query(max_length=500)] = None) -> Response:
        session = signed_in(request)
        notice = DONE[done].format(key=key or "the item") if done in DONE else None
        return await page(request, session, at, notice=notice)

    async def act(request: Request, item_id: int, done: str, build: Callable[[FormData], Any], at: Offsets) -> Response:
        """A row's form: the RPC, then back to the page it was posted from, saying what was done; a
        refusal re-renders that page with the form as it was typed and the refusal beside it."""
        try:
            answer = await perform(request, service, RPCS[done], build)
        except Refused as refused:
            if refused.error.code.value == "forbidden":  # not this page's form: nothing to re-render
                return refused.response
            shown = str((refused.form or {}).get("key") or "")[:200]  # the row as the page that posted named it
            return await page(request, signed_in(request), at, status_code=refused.error.http_status,
                              refused=form_refusal(f"{FORMS[done]}-{item_id}", refused.form, refused.error,
                                                   {item_id: shown} if shown else None))
        item = answer.item if isinstance(answer, c.StartNowResult) else answer
        return back_to("/issues", done, key=item.key, **at.given())

    @router.post("/issues/{item_id}/hold")
    async def hold(request: Request, item_id: ItemId, at: Annotated[Offsets, Depends()]) -> Response:
        return await act(request, item_id, "held", lambda form: c.HoldItem(
            item_id=item_id, by=OPERATOR, reason=str(form.get("reason") or "").strip()), at)

    @router.post("/issues/{item_id}/promote")
    async def promote(request: Request, item_id: ItemId, at: Annotated[Offsets, Depends()]) -> Response:
        return await act(request, item_id, "promoted", lambda form: c.ItemRef(item_id=item_id, by=OPERATOR), at)

    @router.post("/issues/{item_id}/pin")
    async def pin(request: Request, item_id: ItemId, at: Annotated[Offsets, Depends()]) -> Response:
        return await act(request, item_id, "pinned", lambda form: c.PinItem(
            item_id=item_id, by=OPERATOR, precedence=whole_number(form, "precedence")), at)

    @router.post("/issues/{item_id}/unpin")
    async def unpin(request: Request, item_id: ItemId, at: Annotated[Offsets, Depends()]) -> Response:
        return await act(request, item_id, "unpinned", lambda form: c.ItemRef(item_id=item_id, by=OPERATOR), at)

    @router.post("/issues/{item_id}/remove")
    async def remove(request: Request, item_id: ItemId, at: Annotated[Offsets, Depends()]) -> Response:
        return await act(request, item_id, "removed", lambda form: c.RemoveItem(
            item_id=item_id, by=OPERATOR, reason=str(form.get("reason") or "").strip()), at)

    return router


async def sessions_of(service: Service, items: list[c.ItemView]) -> dict[int, Any]:
    """The sessions the rows became, by id, for their status pills (why each waits); {} when
    spot-gate does not answer: the rows then show the status the backlog last heard."""
    ids = sorted({i.started_session_id for i in items if i.started_session_id})[:LIMIT_MAX]
    if not ids:
        return {}
    try:
        found = await every_session(bus_of(service), SessionQuery(ids=ids), len(ids))
    except ZimmerError:
        return {}
    return {s.id: s for s in found.sessions}
