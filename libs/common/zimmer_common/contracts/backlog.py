"""The backlog's published language (seed 000): its RPC operations, payloads and events."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from zimmer_common.contracts.envelope import Payload, Request, RpcErrorBody, RpcSpec
from zimmer_common.contracts.fields import (
    NAME_MAX,
    NEXT_OFFSET,
    WORDS,
    IdempotencyKey,
    Int32,
    ItemPayload,
    LongText,
    Name,
    RowId,
    ShortText,
    Time,
    Title,
    exactly_one_of,
)
from zimmer_common.contracts.issue_state import IssueState
from zimmer_common.contracts.subjects import event_subject

CTX = "backlog"
Cost = Literal["small", "medium", "large"]
ItemStatus = Literal["queued", "starting", "started", "removed"]
StatusFilter = Literal["queued", "started", "removed", "all", "in_flight", "spot_held", "parked", "claimed",
                       "stranded", "awaiting_decision"]
RemovalReason = Literal["issue_closed", "issue_has_open_pr", "session_already_working", "trust_failed"]
AddedVia = Literal["rest", "mcp", "operator", "import"]

ITEM_APPENDED = event_subject(CTX, "item_appended")
ITEM_STARTED = event_subject(CTX, "item_started")
ITEM_REMOVED = event_subject(CTX, "item_removed")
ITEM_PINNED = event_subject(CTX, "item_pinned")
ITEM_UNPINNED = event_subject(CTX, "item_unpinned")
ITEM_HELD = event_subject(CTX, "item_held")


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
    # Its issue as GitHub last showed it (issue 27 #2); None where the answer did not read it (a write's own row).
    github: IssueState | None = None
    # True in the answers of bulk writes (append_items, pull_items), which leave payloads out so the
    # answer always fits one bus message (up to 60 items × 64 KB would not); `payload` is then {}.
    # The caller has what it appended; a read (list_items) carries every payload.
    payload_omitted: bool = False

    def without_payload(self) -> ItemView:
        return self.model_copy(update={"payload": {}, "payload_omitted": True})


class Counts(Payload):
    queued: int
    in_flight: int  # produced sessions running or waiting
    spot_held: int  # of those, waiting at the spot gate before their first turn
    parked: int  # produced sessions in needs_input: waiting on a person
    claimed: int  # in_flight ∪ parked (DESIGN §9)
    stranded: int = 0  # left the queue, and the liveness sweep's stored verdict says nothing resolves it
    awaiting_decision: int = 0  # stranded but held for a human decision
    held: int = 0  # rows with a hold in force: awaiting_decision plus those a moving PR suspends


class ItemQuery(Request):
    status: StatusFilter = "queued"
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=2**63 - 1)


class ItemList(Payload):
    items: list[ItemView]
    total: int
    counts: Counts
    next_offset: int | None = NEXT_OFFSET


def canonical_key(key: str) -> str:
    """The one spelling of a key (issue 27): lower case, and an issue key without its owner
    (`ACME/Zimmer#1` → `zimmer#1`). Every spelling of one issue maps to one key, so one GitHub
    issue cannot sit on the queue twice under different spellings. A spelling, not a rule: which
    keys the backlog takes (seed 000's issue rules) is its own (`zimmer_backlog.domain.issues`)."""
    name, sep, number = key.lower().rpartition("#")
    return f"{name.rpartition('/')[2]}#{number}" if sep else key.lower()


# A key as a caller spells it, read as its one canonical spelling (`ACME/Zimmer#1` is `zimmer#1`).
KeySpelling = Annotated[Name, AfterValidator(canonical_key)]


# A GitHub issue's URL, as the backlog's issue rules take it (`zimmer_backlog.domain.issues`) and
# the OpenAPI document states it.
ISSUE_URL_PATTERN = (r"^https://github\.com/(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))"
                     r"/(?P<repo>[A-Za-z0-9._-]{1,100})/issues/(?P<number>[1-9][0-9]{0,9})$")
# The same without its group names, for JSON Schema (which spells them otherwise, if at all).
ISSUE_URL_SCHEMA_PATTERN = re.sub(r"\(\?P<\w+>", "(", ISSUE_URL_PATTERN)
# The key of an item without an issue, in any case (the backlog reads it lower-cased).
MANUAL_KEY_SCHEMA_PATTERN = "^[Mm][Aa][Nn][Uu][Aa][Ll]-[A-Za-z0-9][A-Za-z0-9._-]*$"


# An append's shape. Which keys, issue URLs and sources the backlog takes (seed 000's issue rules)
# the backlog decides (`zimmer_backlog.domain.issues`), refusing with `invalid` naming the field; it
# also reads the key in its one spelling (`canonical_key`).
class AppendItem(Request):
    key: Name
    issue_url: LongText | None = Field(default=None, description=(
        "https://github.com/{owner}/{repo}/issues/{n}; the key must be {repo}#{n}. Omitted only by an operator "
        "or the import (an issueless item, key manual-<slug>)"))
    repo: ShortText | None = None
    surface: ShortText | None = None
    title: Title = ""
    kind: ShortText | None = None
    scope_direction: ShortText | None = None
    estimated_cost: Cost
    gate_verdict: ShortText | None = None
    decided_at: Time | None = None
    added_by: ShortText | None = None
    added_via: AddedVia = "rest"
    acting_session_id: RowId | None = None  # provenance, never authorization
    payload: ItemPayload = Field(default_factory=dict)
    idempotency_key: IdempotencyKey | None = None


class AppendResult(Payload):
    item: ItemView
    counts: Counts


APPEND_MANY_MAX = 100  # appends in one append_items request: what one batch transaction of the backlog takes
# Who an append came from, as the gateway authenticated it ("fleet", "operator/session:7"): it
# scopes the append's idempotency key, as the Zimmer-Caller header does for a single append.
Caller = Annotated[str, StringConstraints(min_length=1, max_length=NAME_MAX, pattern=r"^[\x21-\x7e]+$")]


class _Closed(Payload):
    """Strict and closed like a `Request`, without walking its strings for unstorable ones: every
    string in it is an `AppendItem`'s (which refuses them itself) or a printable-ASCII `Caller`;
    walking the batch as well would check each string of each item three times."""

    model_config = ConfigDict(extra="forbid", strict=True)


class CallerAppend(_Closed):
    item: AppendItem
    caller: Caller | None = None  # None: a service's own append (the service scope)


class AppendMany(_Closed):
    """Appends from concurrent callers in one request (the gateway coalesces its REST appends):
    each is keyed to its own caller, ranked with every append waiting and answered on its own,
    exactly as if it had come alone as `append_item`. The request's deadline is its earliest
    append's."""

    appends: list[CallerAppend] = Field(min_length=1, max_length=APPEND_MANY_MAX)


class AppendOutcome(Payload):
    """One append's own answer: its result, or the error that refused it alone."""

    result: AppendResult | None = None
    error: RpcErrorBody | None = None


class AppendManyResult(Payload):
    outcomes: list[AppendOutcome]  # one per append, in the request's order


class ItemEvent(Payload):
    item: ItemView


class Removal(Request):
    key: KeySpelling
    reason: RemovalReason  # a fixed vocabulary of observed facts; free text is refused


class PullItems(Request):
    """Pull the top `count` queued items, or exactly `keys`, into spot sessions under the puller.

    A pull by keys is safe to retry (the same sessions come back, none doubled); a pull by count
    is not: a retry pulls the next items. Exactly one of `count` and `keys` (the schema's `oneOf`)."""

    model_config = ConfigDict(json_schema_extra=exactly_one_of("count", "keys"))

    # 0 is a pull: the groomer's is max(0, min(cap, ceiling − in_flight)), and its answer says
    # which zero it is.
    count: int | None = Field(default=None, ge=0, le=10)
    keys: list[KeySpelling] | None = Field(default=None, min_length=1, max_length=10)
    removals: list[Removal] = Field(default_factory=list, max_length=50)
    acting_session_id: RowId | None = None  # the pulling session: parent of what it starts; provenance only
    idempotency_key: IdempotencyKey | None = None  # a pull by count repeated with it starts nothing twice
    wip_ceiling: int | None = Field(default=None, ge=0, le=10_000, description=(
        "The puller's WIP ceiling, so a pull of zero can say \"N in flight against a ceiling of M\""))


class StartedItem(Payload):
    item: ItemView
    session_id: int
    precedence: int  # the session's, as spot-gate has it
    earlier: bool = False  # started by an earlier pull (a retried pull by keys): not pulled now


class NotRemoved(Payload):
    key: str
    why: str  # pinned (a human placed it), or not queued (started, removed, unknown)


class FailedStart(Payload):
    key: str
    code: str
    message: str
    retry_safe: bool  # unavailable: the spawn may or may not have happened; a pull by these keys resolves it


class PullResult(Payload):
    started: list[StartedItem]
    removed: list[ItemView]
    failed: list[FailedStart] = Field(default_factory=list)
    not_removed: list[NotRemoved] = Field(default_factory=list)
    counts: Counts
    sentence: str  # which zero a pull of zero is, when it is one


class ItemRef(Request):
    item_id: RowId
    acting_session_id: RowId | None = None
    by: ShortText | None = None  # the operator, for the record


class PinItem(ItemRef):
    precedence: Int32 | None = None  # hand-place; None pins where it sits


class RemoveItem(ItemRef):
    reason: Annotated[LongText, Field(min_length=1)]  # a human's judgement, in words


class HoldItem(ItemRef):
    """Record that what remains of a stranded row is a person's call (seed 000 "Held for a human
    decision"). Not a removal; the status does not change."""

    reason: Annotated[LongText, Field(min_length=1, json_schema_extra={"pattern": WORDS}, description=(
        "The decision owed, who owes it, and where it is laid out (not only whitespace)"))]

    @model_validator(mode="after")
    def _reason_has_words(self) -> HoldItem:
        if not self.reason.strip():
            raise ValidationError.from_exception_data(type(self).__name__, [InitErrorDetails(
                type=PydanticCustomError("blank", "a hold needs its reason in words"), loc=("reason",),
                input=self.reason)])
        return self


class StartNowResult(Payload):
    item: ItemView
    session_id: int


class IssuesViewQuery(Request):
    limit: int = Field(default=200, ge=1, le=1000)  # rows per section
    stranded_offset: int = Field(default=0, ge=0, le=2**63 - 1)
    awaiting_offset: int = Field(default=0, ge=0, le=2**63 - 1)


class GithubIssue(Payload):
    repo: str
    number: int
    title: str
    url: str


class TrendPoint(Payload):
    at: datetime
    open_issues: int


class TrendSeries(Payload):
    repo: str
    points: list[TrendPoint]


class IssuesView(Payload):
    """The Issues view's GitHub side (seed 000 "Where the count shows up"): Stranded and Awaiting
    your decision by the stored verdict, less the rows whose issue the GitHub snapshot shows closed
    (counted apart, never written back); open issues of the gated repositories with no row at all;
    and the open-issue count per repository over time."""

    stranded: list[ItemView]
    stranded_total: int
    stranded_closed_in_github: int
    awaiting: list[ItemView]
    awaiting_total: int
    awaiting_closed_in_github: int
    stranded_next_offset: int | None = NEXT_OFFSET
    awaiting_next_offset: int | None = NEXT_OFFSET
    held: int  # holds in force, including those a moving PR suspends
    not_on_queue: list[GithubIssue]
    not_on_queue_total: int
    queued_closed_in_github: int = 0  # queued rows whose issue the snapshot shows closed: a pull should remove them
    trend: list[TrendSeries]  # one point per repository per 6 hours, the bucket's last, over 30 days
    snapshot_at: datetime | None


GET_ITEMS = RpcSpec(CTX, "list_items", ItemQuery, ItemList)
APPEND = RpcSpec(CTX, "append_item", AppendItem, AppendResult)
APPEND_MANY = RpcSpec(CTX, "append_items", AppendMany, AppendManyResult)
PULL = RpcSpec(CTX, "pull_items", PullItems, PullResult)
PIN = RpcSpec(CTX, "pin_item", PinItem, ItemView)
UNPIN = RpcSpec(CTX, "unpin_item", ItemRef, ItemView)
REMOVE = RpcSpec(CTX, "remove_item", RemoveItem, ItemView)
START_NOW = RpcSpec(CTX, "start_now", ItemRef, StartNowResult)
HOLD = RpcSpec(CTX, "hold_item", HoldItem, ItemView)
ISSUES_VIEW = RpcSpec(CTX, "issues_view", IssuesViewQuery, IssuesView)
