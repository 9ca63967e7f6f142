"""MCP tools of the work backlog (seed 000, "Who may do what"), in the opt-in group `work_backlog`.

get_work_backlog (read), append_work_backlog_item (append a cleared issue),
pull_work_backlog_items (pull the top N or named keys into spot sessions, with mechanical
removals from a fixed vocabulary), hold_work_backlog_item_for_decision (record that what remains
of a stranded row is a person's call). Nothing here is in `core`: a connection has to name the
group, so neither the unscoped server nor `sessions` carries backlog writes.

The discretionary operations (pin, unpin, hand-place, removal by judgement, start now /
promote) have no MCP tool at all; they are operator-only REST routes. An agent's item must have
an issue: `issue_url` is required here and `prompt` is refused outright (there is no `prompt`
parameter and a `payload` carrying a "prompt" key is a tool error), because an item spawned from
a bare prompt is ungated work. The writing / pulling session is the one the connection declared
with the `X-Zimmer-Session-Id` header (seed 000: "stamped from the MCP connection"), never an
argument; it is provenance, never authorization.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.fields import IdempotencyKey, JsonObject, LongText, Name, ShortText, Time, Title
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.mcp.registry import tool
from zimmer_gateway.routes.common import ID_MAX

GROUP = "work_backlog"
Text = ShortText | None


def _bus(service: Service) -> Bus:
    if service.bus is None:
        raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
    return service.bus


class WorkBacklogReport(c.ItemList):
    summary: str = Field(description="The counts in plain words")


def describe_counts(counts: c.Counts) -> str:
    held = (f", {counts.spot_held} of them held at the spot gate before a turn (waiting on quota or a slot, "
            "not being advanced)") if counts.spot_held else ""
    return (f"{counts.queued} queued; {counts.in_flight} in flight (running or waiting){held}; "
            f"{counts.parked} parked in needs_input, waiting on a person and not part of the WIP arithmetic; "
            f"{counts.stranded} stranded (left the queue, nothing resolves them: triage them); "
            f"{counts.awaiting_decision} awaiting a person's decision (held).")


@tool(group=GROUP, read_only=True, destructive=False, idempotent=True)
async def get_work_backlog(
    service: Service,
    status: Annotated[c.StatusFilter, Field(
        description="queued (default), started, removed, all; or by the session an item became: in_flight "
                    "(running or waiting), spot_held (waiting at the spot gate before its first turn), parked "
                    "(needs_input), claimed (in_flight or parked); or by the liveness sweep's stored verdict: "
                    "stranded (left the queue and unresolved: pr_stalled, pr_merged_issue_open, no_pr, abandoned_pr, "
                    "unknown), "
                    "awaiting_decision (stranded but held for a person's decision)")] = "queued",
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0, le=ID_MAX)] = 0,
) -> WorkBacklogReport:
    """The work backlog, highest precedence first (the order a pull takes them), with `counts`
    of the sessions this backlog produced: queued, in_flight (running or waiting), spot_held (the
    part of in_flight held at the spot gate before a first turn), parked (needs_input: waiting on a
    person, not in flight), claimed, stranded and awaiting_decision. Stranded rows list oldest first,
    each with its liveness_state: triage one by appending its key again (work left), by asking a
    human to close the issue or retire the row (nothing left), or with
    hold_work_backlog_item_for_decision (what remains is a person's call). A page ends before
    `limit` rows when its rows reach the byte bound of one answer: ask again with `next_offset` as
    `offset` (null: that was the last page)."""
    listing = await _bus(service).request(c.GET_ITEMS, c.ItemQuery(status=status, limit=limit, offset=offset))
    return WorkBacklogReport(**listing.model_dump(), summary=describe_counts(listing.counts))


@tool(group=GROUP, read_only=False, destructive=False, idempotent=False)
async def append_work_backlog_item(
    service: Service,
    key: Annotated[Name, Field(description='The item\'s key, "{repo}#{n}" of its issue, e.g. "zimmer#498"; any case '
                                           'and "{owner}/{repo}#{n}" are the same key (stored as lower-case repo#n)')],
    issue_url: Annotated[LongText, Field(min_length=1, pattern=r"^https?://\S+$",
                                         description="The GitHub issue this item implements (required)")],
    estimated_cost: Annotated[c.Cost, Field(description="small, medium or large: chooses the band it ranks in")],
    title: Title = "",
    repo: Text = None,
    surface: Text = None,
    kind: Text = None,
    scope_direction: Text = None,
    gate_verdict: Text = None,
    decided_at: Annotated[Time | None, Field(description="When the gate decided (ISO 8601)")] = None,
    payload: Annotated[JsonObject | None, Field(
        description='Ratings, notes, gate_session and the like; a "prompt" key is refused')] = None,
    idempotency_key: Annotated[IdempotencyKey | None, Field(
        description="Repeat the call with the same key and get the first answer back, nothing appended twice")] = None,
    acting_session: int | None = None,
) -> c.AppendResult:
    """Append one issue the gate cleared. It lands 10 below the lowest unpinned peer of its
    estimated_cost (first in, first out within a cost band). Every item needs its issue_url; a
    prompt is refused: the session an item becomes is prompted from its issue. An issue that is
    already queued, under any spelling of its key, is a conflict naming that item; a band with no
    room left is band_full."""
    payload = payload or {}
    prompts = [k for k in payload if isinstance(k, str) and k.strip().lower() == "prompt"]
    if prompts:
        raise ZimmerError(ErrorCode.INVALID, "an agent's item is prompted from its issue; payload.prompt is refused "
                          "outright", {"field": f"payload.{prompts[0]}"})
    return await _bus(service).request(c.APPEND, c.AppendItem(
        key=key, issue_url=issue_url, repo=repo, surface=surface, title=title, kind=kind,
        scope_direction=scope_direction, estimated_cost=estimated_cost, gate_verdict=gate_verdict,
        decided_at=decided_at, added_via="mcp", acting_session_id=acting_session, payload=payload,
        idempotency_key=idempotency_key))


@tool(group=GROUP, read_only=False, destructive=True, idempotent=False)
async def pull_work_backlog_items(
    service: Service,
    count: Annotated[int | None, Field(ge=0, le=10, description="Pull the top this many queued items (at most 10; "
                                                                "0 when the WIP ceiling is full)")
                     ] = None,
    keys: Annotated[list[Name] | None, Field(min_length=1, max_length=10,
                                             description="Pull exactly these keys instead of a count")] = None,
    removals: Annotated[list[c.Removal] | None, Field(
        max_length=50, description="Take these queued keys off first, each with a reason from the fixed vocabulary "
                                   "issue_closed, issue_has_open_pr, session_already_working, trust_failed")] = None,
    idempotency_key: Annotated[IdempotencyKey | None, Field(
        description="Makes a pull by count safe to retry: the same key returns the first answer (or finishes a "
                    "first attempt that did not answer) and starts nothing twice")] = None,
    wip_ceiling: Annotated[int | None, Field(ge=0, le=10_000, description=(
        "Your WIP ceiling, so a pull of zero says \"N in flight against a ceiling of M\""))] = None,
    acting_session: int | None = None,
) -> c.PullResult:
    """Pull queued items into spot sessions, children of the pulling session: give count (0-10)
    or keys, not both. The n-th item gets the puller's precedence + (count − n + 1). A pull by keys
    is safe to retry after an error: the same sessions come back and none is doubled. A pull by
    count is safe to retry only with an idempotency_key (without one a retry pulls the next items;
    after an error, read the backlog and pull by keys instead). `failed` lists starts that did not
    happen (retry_safe: pull those keys again); `counts` and `sentence` say how much is in flight
    and, for a pull of zero, which zero it is (busy fleet, or idle behind quota at the spot gate)."""
    return await _bus(service).request(c.PULL, c.PullItems(
        count=count, keys=keys, removals=removals or [], acting_session_id=acting_session,
        idempotency_key=idempotency_key, wip_ceiling=wip_ceiling))


@tool(group=GROUP, read_only=False, destructive=False, idempotent=False)
async def hold_work_backlog_item_for_decision(
    service: Service,
    item_id: Annotated[int, Field(ge=1, le=ID_MAX, description="The stranded row's id (get_work_backlog status=stranded)")],
    reason: Annotated[LongText, Field(min_length=1, description=(
        "The decision owed, who owes it, and where it is laid out, e.g. \"pick one of #80/#81/#82: the maintainers; "
        "laid out in #83\""))],
    acting_session: int | None = None,
) -> c.ItemView:
    """Hold a stranded row for a human decision when what remains is a person's call (pick one of
    overlapping issues, seed a secret only a human holds, rule on a declined PR). Not a removal: the
    status stays. The row moves to awaiting_decision and out of the stranded alert for 14 days; then
    the hold lapses, the row is stranded again at its original age and the lapse pages once. Refused
    (`refused`, details.refusal) for a row that is not stranded (queued, in flight, parked or
    resolved: not_stranded), one the sweep has not read (not_read), one a newer row superseded
    (superseded), one already held (already_held: a hold cannot be extended) and one whose lapsed
    hold has not paged yet (lapse_not_paged)."""
    by = f"session {acting_session}" if acting_session else "an agent"
    return await _bus(service).request(c.HOLD, c.HoldItem(item_id=item_id, reason=reason, by=by,
                                                          acting_session_id=acting_session))
