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


class Removal(Payload):
    key: str = Field(min_length=1)
    reason: RemovalReason  # a fixed vocabulary of observed facts; free text is refused


class PullItems(Payload):
    """Pull the top `count` queued items, or exactly `keys`, into spot sessions under the puller.

    A pull by keys is safe to retry (the same sessions come back, none doubled); a pull by count
    is not: a retry pulls the next items."""

    count: int | None = Field(default=None, ge=1, le=10)
    keys: list[str] | None = Field(default=None, min_length=1, max_length=10)
    removals: list[Removal] = Field(default_factory=list, max_length=50)
    acting_session_id: int | None = None  # the pulling session: parent of what it starts; provenance only


class StartedItem(Payload):
    item: ItemView
    session_id: int
    precedence: int


class FailedStart(Payload):
    key: str
    code: str
    message: str
    retry_safe: bool  # unavailable: the spawn may or may not have happened; a pull by these keys resolves it


class PullResult(Payload):
    started: list[StartedItem]
    removed: list[ItemView]
    failed: list[FailedStart] = Field(default_factory=list)
    counts: Counts
    sentence: str  # which zero a pull of zero is, when it is one


class ItemRef(Payload):
    item_id: int
    acting_session_id: int | None = None
    by: str | None = None  # the operator, for the record


class PinItem(ItemRef):
    precedence: int | None = None  # hand-place; None pins where it sits


class RemoveItem(ItemRef):
    reason: str = Field(min_length=1, max_length=2000)  # a human's judgement, in words


class StartNowResult(Payload):
    item: ItemView
    session_id: int


GET_ITEMS = RpcSpec(CTX, "list_items", ItemQuery, ItemList)
APPEND = RpcSpec(CTX, "append_item", AppendItem, AppendResult)
PULL = RpcSpec(CTX, "pull_items", PullItems, PullResult)
PIN = RpcSpec(CTX, "pin_item", PinItem, ItemView)
UNPIN = RpcSpec(CTX, "unpin_item", ItemRef, ItemView)
REMOVE = RpcSpec(CTX, "remove_item", RemoveItem, ItemView)
START_NOW = RpcSpec(CTX, "start_now", ItemRef, StartNowResult)
