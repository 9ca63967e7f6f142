"""Spot-gate's published language: its RPC operations, their payloads, and its events."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import (
    ID_MAX,
    NEXT_OFFSET,
    IdempotencyKey,
    Int32,
    JsonObject,
    LongText,
    Name,
    Prompt,
    RowId,
    ShortText,
    Time,
    Title,
)
from zimmer_common.contracts.runtime import QuotaReadingIn, SessionStatusName, SessionStatusReport, TurnKindName
from zimmer_common.contracts.spot_history import (  # noqa: F401 - part of this language: callers read spot.<name>
    DecisionEvent,
    EnqueuedList,
    EnqueuedMessage,
    EnqueuedQuery,
    GateDecisionList,
    GateDecisionQuery,
    GateDecisionRow,
)
from zimmer_common.contracts.subjects import event_subject

CTX = "spot"
GenesisName = Literal["web_ui", "slack", "github_issue", "github_label", "schedule", "ao_event", "api", "unknown"]
ClassName = Literal["priority", "spot"]
TriggerKindName = Literal["slack", "github_issue", "github_label", "schedule", "ao_event"]

MAX_ATTACHMENTS: Final = 20
FORK_KEY: Final = "forked_from_session_id"  # the metadata key a fork names its origin by

SESSION_CREATED = event_subject(CTX, "session_created")
SESSION_STATUS_CHANGED = event_subject(CTX, "session_status_changed")
SESSION_CLASS_CHANGED = event_subject(CTX, "session_class_changed")
SESSION_PRECEDENCE_CHANGED = event_subject(CTX, "session_precedence_changed")
SESSION_PAUSED = event_subject(CTX, "session_paused")
SESSION_ARCHIVED = event_subject(CTX, "session_archived")
SESSION_UNARCHIVED = event_subject(CTX, "session_unarchived")
# The session row is gone (DELETE /api/v1/sessions/{id}, or an archive purge): whatever another
# service keeps by its id (its log lines, its directories) goes with it.
SESSION_DELETED = event_subject(CTX, "session_deleted")
# An account's quota reading was recorded: the pool's figures moved (the Quotas page follows it live).
QUOTA_READING_RECORDED = event_subject(CTX, "quota_reading_recorded")


class SessionWarningNote(Payload):
    """A durable warning on a session (contracts.clones `record_session_warning`): a refused reap
    means a sweeper's snapshot went stale and the guard caught it, which is never routine."""

    id: int
    kind: str
    message: str
    source: str
    created_at: datetime


class SessionSpend(Payload):
    """What a session has spent, from the spend ledger (every spend report naming it): at each
    model's list price, its tokens, when its first and last reports came, and the models."""

    dollars: float = Field(description="List-price dollars of every spend report naming the session")
    reports: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    first_at: datetime
    last_at: datetime
    models: list[str] = Field(description="harness/model of each kind of spend, dearest first")


class SessionView(Payload):
    id: int
    parent_session_id: int | None
    forked_from_session_id: int | None
    genesis: GenesisName
    scheduling_class: ClassName | None  # what is stored: NULL means derived
    priority_class: ClassName  # resolved now
    precedence: int
    status: SessionStatusName
    runtime: str
    harness: str
    model: str
    title: str
    goal: str | None
    prompt: str | None
    trigger_id: int | None
    clone_path: str | None
    metadata: dict[str, Any]
    is_status_summary_fork: bool
    ever_started: bool  # has had a turn admitted; "spot_held" counts holds before the first turn
    spot_hold_reason: str | None
    spot_hold_retry_at: datetime | None
    spot_hold_count: int
    held_turn_kind: str | None
    queued_prompt_coming: bool  # a held or enqueued prompt will still be delivered
    enqueued_messages: int
    created_at: datetime
    updated_at: datetime
    # Incremented by every change of the row, in the same UPDATE: the order of a session's
    # events, which consumers keep the highest of (never timestamps from two clocks).
    version: int = 0
    # The budget is a ceiling (seed 004): a session the ceiling sweep paused mid-run, or parked in
    # the spot queue, sleeps in waiting with these set; `pause_sentence` says why and when it resumes.
    paused_by: Literal["spot_quota", "auth_outage"] | None = None
    spot_pause_at: datetime | None = None
    spot_pause_reason: Literal["at_utilization_limit", "user_spot_queue", "auth_outage"] | None = None
    spot_pause_detail: str | None = None
    spot_pause_count: int = 0
    pause_sentence: str | None = None
    archived_at: datetime | None = None
    # The runtime host whose disk holds the clone, as the runtime reported it (CloneReport.host):
    # that host's sweeper trashes and restores it. None: never reported (any host holding it acts).
    clone_host: str | None = None
    # The armed one-time wake: while it is ahead, the session is paused until then (a wall-clock
    # pause: nothing starts it early); past it, it no longer holds anything back.
    next_wake_at: datetime | None = None
    paused_until: datetime | None = None  # set on reads while that wake is still ahead: **Paused:** yes
    # The newest durable warnings left on the session (a sweeper's refused reap), newest first:
    # filled by get_session, empty in lists and events.
    warnings: list[SessionWarningNote] = Field(default_factory=list)
    # What it has spent (the spend ledger): filled by get_session, null in lists and events, and
    # null when no spend report has named it.
    spend: SessionSpend | None = None


class SessionEvent(Payload):
    """Payload of every session_* event: the session as it now is, plus what changed."""

    session: SessionView
    previous: dict[str, Any] = Field(default_factory=dict)
    spawned_by: str | None = None


class SessionDeleted(Payload):
    """Payload of session_deleted: only the id survives the row."""

    session_id: int
    deleted_at: datetime
    reason: str = "deleted"  # deleted (an operator's DELETE) or purged (an archive purge)


class QuotaReadingRecorded(Payload):
    """Payload of quota_reading_recorded: which account was read and how it stood; the pool's
    figures are the spot gate's to compute (`get_spot_policy`)."""

    account: str
    status: str
    five_hour_utilization: float | None = None
    seven_day_utilization: float | None = None
    recorded_at: datetime


Attachments = Annotated[list[JsonObject], Field(max_length=MAX_ATTACHMENTS)]


class SpawnSession(Request):
    """`precedence` or `precedence_above_top_spot`, not both (the schema's `anyOf`)."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {"precedence": {"type": "null"}}},
        {"properties": {"precedence_above_top_spot": {"const": False}}}]})
    idempotency_key: IdempotencyKey | None = None
    parent_session_id: RowId | None = None
    forked_from_session_id: RowId | None = None
    genesis: GenesisName | None = None
    scheduling_class: ClassName | None = None
    precedence: Int32 | None = None
    runtime: Literal["claude_code", "codex"] = "claude_code"
    harness: Name = "claude_code"
    model: Name = "claude-opus-4"
    title: Title = ""
    goal: LongText | None = None
    prompt: Prompt | None = None
    metadata: JsonObject = Field(default_factory=dict, json_schema_extra={"properties": {FORK_KEY: {
        "description": "The session this one forks (seed 004): the same as forked_from_session_id when both are given",
        "anyOf": [{"type": "integer", "minimum": 1, "maximum": ID_MAX},
                  {"type": "string", "pattern": "^0*[1-9][0-9]{0,17}$"}]}}})
    is_status_summary_fork: bool = False
    start: bool = True  # ask for the first turn right away
    # "Run as spot": land SLOT_GAP (5) above the top of the spot queue instead of a declared precedence.
    precedence_above_top_spot: bool = False

    @model_validator(mode="after")
    def _one_placement(self) -> SpawnSession:
        if self.precedence_above_top_spot and self.precedence is not None:
            raise ValueError("give precedence or precedence_above_top_spot, not both")
        return self

    @model_validator(mode="after")
    def _fork_named_in_metadata(self) -> SpawnSession:
        """Seed 004: "Forks inherit through metadata["forked_from_session_id"], the only lineage
        edge a fork has." The metadata key names the fork as the top-level field does."""
        named = self.metadata.get(FORK_KEY)
        if named is None:
            return self
        # "7", and 7.0: JSON Schema's integer 7, as everywhere
        if (isinstance(named, str) and named.isascii() and named.isdigit()) or (isinstance(named, float) and named.is_integer()):
            named = int(named)
        if isinstance(named, bool) or not isinstance(named, int) or not 1 <= named <= ID_MAX:
            raise ValueError(f"metadata.{FORK_KEY} must be a session id (an integer from 1)")
        if self.forked_from_session_id is not None and self.forked_from_session_id != named:
            raise ValueError(f"forked_from_session_id {self.forked_from_session_id} and metadata.{FORK_KEY} "
                             f"{named} name different sessions")
        self.forked_from_session_id = named
        return self


class SpawnResult(Payload):
    session: SessionView
    created: bool  # False when the idempotency key named an existing session
    turn: TurnResult | None = None


class SessionRef(Request):
    session_id: RowId


class SessionByKey(Request):
    """The session a spawn with this idempotency key made, if any (it never makes one)."""

    idempotency_key: IdempotencyKey


class SessionQuery(Request):
    status: list[SessionStatusName] | None = Field(default=None, max_length=10)
    priority_class: ClassName | None = None
    genesis: list[GenesisName] | None = Field(default=None, max_length=10)
    parent_session_id: RowId | None = None
    ids: list[RowId] | None = Field(default=None, max_length=500)  # exactly these sessions (a page's rows)
    order: Literal["precedence", "created_at", "updated_at"] = "created_at"
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0, le=2**63 - 1)


class SessionList(Payload):
    sessions: list[SessionView]
    total: int
    next_offset: int | None = NEXT_OFFSET  # fewer than `limit` rows when their prompts fill one answer


class UpdateSession(Request):
    session_id: RowId
    # "derive" clears the stored class so the session follows its genesis default again.
    scheduling_class: Literal["priority", "spot", "derive"] | None = None
    precedence: Int32 | None = None
    # Demote to spot and land SLOT_GAP (5) above the top of the spot queue (the Ranked view's ⋮ menu).
    place: Literal["top_of_spot"] | None = None

    @model_validator(mode="after")
    def _place_needs_spot(self) -> UpdateSession:
        if self.place is not None and (self.scheduling_class != "spot" or self.precedence is not None):
            raise ValueError("place=top_of_spot goes with scheduling_class spot and no precedence")
        return self


class ReorderSession(Request):
    """Drop a session between two neighbours in the ranked list (either may be omitted at an end):
    it takes their midpoint, or, where none exists, they are nudged one apart each."""

    session_id: RowId
    above_session_id: RowId | None = None
    below_session_id: RowId | None = None

    @model_validator(mode="after")
    def _a_neighbour(self) -> ReorderSession:
        if self.above_session_id is None and self.below_session_id is None:
            raise ValueError("give above_session_id, below_session_id or both")
        if self.session_id in (self.above_session_id, self.below_session_id):
            raise ValueError("a session is not its own neighbour")
        return self


class ReorderResult(Payload):
    session: SessionView
    nudged: list[SessionView]  # neighbours moved one apart to open a gap


class RequestTurn(Request):
    session_id: RowId
    kind: TurnKindName
    prompt: Prompt | None = None
    attachments: Attachments = Field(default_factory=list)
    idempotency_key: IdempotencyKey | None = None


class DecisionView(Payload):
    allowed: bool
    reason: str
    ceiling: str | None
    sentence: str
    windows: list[dict[str, Any]] = Field(default_factory=list)
    accounts_averaged: int = 0
    accounts_in_pool: int = 0


class TurnResult(Payload):
    outcome: Literal["admitted", "held", "queued", "passed"]
    # passed: not consulted (priority, Codex, status-summary fork, clone_only, resume_monitoring)
    exempt_because: str | None = None
    decision: DecisionView | None = None
    session: SessionView


class StatusChange(SessionStatusReport):
    pass


class Ok(Payload):
    ok: bool = True


class PauseIntoSpotQueue(Request):
    """Park a session in the spot queue on purpose (seed 004 "Joining the queue on purpose"): it
    sleeps in waiting until the ceiling sweep reaches it in precedence order. A priority session
    becomes spot; `resume_with` is delivered in place of the recovery nudge; `halt` stops a running
    turn now (the default lets it finish)."""

    session_id: RowId
    resume_with: Prompt | None = None
    halt: bool = False
    by: ShortText | None = None


class PauseUntil(Request):
    """Sleep a session until a moment (Pause Until; an agent's wake_me_up_later): nothing starts it
    before then, and then its wake is a turn that answers to the gate like any other."""

    session_id: RowId
    until: Time
    prompt: Prompt | None = None  # delivered by the wake; default: a short "continue"
    halt: bool = True  # Pause Until stops a running turn; wake_me_up_later lets the agent's turn end
    by: ShortText | None = None


class ParkForAuthOutage(Request):
    """The runtime's report that a session's turn could not run because its account's credentials
    are out (an auth outage): it sleeps until the account recovers. Priority parks are resumed by
    the un-park sweep; spot parks are the spot queue's (the ceiling sweep)."""

    session_id: RowId
    account: Name | None = None


class RestartSession(Request):
    session_id: RowId
    prompt: Prompt | None = None
    # The web Restart takes the session over and consumes a wall-clock pause; the API and an agent
    # are refused while the pause is ahead.
    consume_pause: bool = False


class StartNow(Request):
    session_id: RowId


class StartNowResult(Payload):
    """What start now did: `rechecked` (a held session's re-check pulled forward), `resumed` (a
    paused session's own resume), `started` (a session that never ran: its first turn, with its
    first prompt), `nudged` (the continue nudge to a session that ran and has nothing scheduled),
    `held` (the gate holds it: nothing changed, the sentence says why), `running` (already
    running: nothing to start), or `nothing` (a promote found nothing to start)."""

    did: Literal["rechecked", "resumed", "started", "nudged", "held", "running", "nothing"]
    sentence: str
    session: SessionView
    turn: TurnResult | None = None


SPAWN = RpcSpec(CTX, "spawn_session", SpawnSession, SpawnResult)
PAUSE_INTO_SPOT_QUEUE = RpcSpec(CTX, "pause_into_spot_queue", PauseIntoSpotQueue, SessionView)
START_NOW = RpcSpec(CTX, "start_now", StartNow, StartNowResult)
ARCHIVE = RpcSpec(CTX, "archive_session", SessionRef, SessionView)
UNARCHIVE = RpcSpec(CTX, "unarchive_session", SessionRef, SessionView)
PAUSE_UNTIL = RpcSpec(CTX, "pause_until", PauseUntil, SessionView)
PARK_FOR_AUTH_OUTAGE = RpcSpec(CTX, "park_for_auth_outage", ParkForAuthOutage, SessionView)
RESTART = RpcSpec(CTX, "restart_session", RestartSession, TurnResult)
REORDER = RpcSpec(CTX, "reorder_precedence", ReorderSession, ReorderResult)
GET_SESSION = RpcSpec(CTX, "get_session", SessionRef, SessionView)
SESSION_BY_KEY = RpcSpec(CTX, "session_by_key", SessionByKey, SessionView)
LIST_SESSIONS = RpcSpec(CTX, "list_sessions", SessionQuery, SessionList)
UPDATE_SESSION = RpcSpec(CTX, "update_session", UpdateSession, SessionView)
REQUEST_TURN = RpcSpec(CTX, "request_turn", RequestTurn, TurnResult)
REPORT_STATUS = RpcSpec(CTX, "report_status", StatusChange, SessionView)
GATE_DECISIONS = RpcSpec(CTX, "gate_decisions", GateDecisionQuery, GateDecisionList)
ENQUEUED = RpcSpec(CTX, "enqueued_messages", EnqueuedQuery, EnqueuedList)
RECORD_READING = RpcSpec(CTX, "record_quota_reading", QuotaReadingIn, Ok)
SpawnResult.model_rebuild()
