"""The backlog's published language (seed 000): its RPC operations, payloads and events."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from zimmer_common.contracts.envelope import Payload, RpcSpec
from zimmer_common.contracts.subjects import event_subject

CTX = "backlog"
Cost = Literal["small", "medium", "large"]
ItemStatus = Literal["queued", "starting", "started", "removed"]
StatusFilter = Literal["queued", "started", "removed", "all", "in_flight", "spot_held", "parked", "claimed"]
RemovalReason = Literal["issue_closed", "issue_has_open_pr", "session_already_working", "trust_failed"]
AddedVia = Literal["rest", "mcp", "operator", "import"]

ITEM_APPENDED = event_subject(CTX, "item_appended")
ITEM_STARTED = event_subject(CTX, "item_started")
ITEM_REMOVED = event_subject(CTX, "item_removed")
ITEM_PINNED = event_subject(CTX, "item_pinned")
ITEM_UNPINNED = event_subject(CTX, "item_unpinned")


class ItemView(Payload):
    id: int
    key: str
    issue_url: str | None
    repo: str | None
    surface: str | None
    title: str
    kind: str | None
    scope_direction: str | None
    estimated_cost: Cost
    gate_verdict: str | None
    decided_at: datetime | None
    added_at: datetime
    added_by: str | None
    added_via: AddedVia
    precedence: int
    pinned: bool
    status: ItemStatus
    writing_session_id: int | None
    started_session_id: int | None
    started_by_session_id: int | None
    started_at: datetime | None
    removed_at: datetime | None
    removed_by: str | None
    removal_reason: str | None
    liveness_state: str | None
    liveness_checked_at: datetime | None
    held_at: datetime | None
    held_until: datetime | None
    held_by: str | None
    held_by_session_id: int | None
    hold_reason: str | None
    held_liveness_state: str | None
    payload: dict[str, Any]
    session_status: str | None = None  # of the session it became, as spot-gate last said


class Counts(Payload):
    queued: int
    in_flight: int  # produced sessions running or waiting
    spot_held: int  # of those, waiting at the spot gate before their first turn
    parked: int  # produced sessions in needs_input: waiting on a person
    claimed: int  # in_flight ∪ parked (DESIGN §9)


class ItemQuery(Payload):
    status: StatusFilter = "queued"
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ItemList(Payload):
    items: list[ItemView]
    total: int
    counts: Counts


class AppendItem(Payload):
    key: str = Field(min_length=1, max_length=200)
    issue_url: str | None = Field(default=None, max_length=2000)
    repo: str | None = None
    surface: str | None = None
    title: str = Field(default="", max_length=500)
    kind: str | None = None
    scope_direction: str | None = None
    estimated_cost: Cost
    gate_verdict: str | None = None
    decided_at: datetime | None = None
    added_by: str | None = None
    added_via: AddedVia = "rest"
    acting_session_id: int | None = None  # provenance, never authorization
    payload: dict[str, Any] = Field(default_factory=dict)


class AppendResult(Payload):
    item: ItemView
    counts: Counts


class ItemEvent(Payload):
    item: ItemView


GET_ITEMS = RpcSpec(CTX, "list_items", ItemQuery, ItemList)
APPEND = RpcSpec(CTX, "append_item", AppendItem, AppendResult)
