"""Spot-gate's policy, trigger and cost operations (seed 004, "MCP parity")."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import (
    NEXT_OFFSET,
    IdempotencyKey,
    Int32,
    JsonObject,
    Name,
    Prompt,
    RowId,
    ShortText,
    Title,
    at_least_one_of,
)
from zimmer_common.contracts.runtime import AccountStatusName
from zimmer_common.contracts.spot import CTX, ClassName, DecisionView, GenesisName, SpawnResult, TriggerKindName


class PolicyQuery(Request):
    pass


class WindowPosture(Payload):
    window: Literal["five_hour", "seven_day"]
    calibrated: bool  # False: every figure is a fraction of the window, never dollars
    capacity_dollars: float | None
    utilization: float
    accounts_averaged: int
    reserve_percent: float
    reserve_dollars: float | None
    spot_budget_dollars: float | None
    spot_budget_left_dollars: float | None
    spot_budget_left_fraction: float
    minutes_to_reset: float
    sustainable_rate: float  # $/min when calibrated, fraction/min otherwise
    # $/min in the gate's currency (Opus-priced) when calibrated; before, the pool's climb per
    # minute estimated from its readings (`fleet_burn_estimated`), never presented as measured.
    fleet_burn: float
    fleet_burn_estimated: bool = False
    # When the dollar figures were last calibrated (every one is an estimate); null until calibrated.
    calibrated_at: datetime | None = None
    # False: no averaged account recorded a future reset, so `minutes_to_reset` is the whole
    # window's length (the slowest pace), not a time anything recorded.
    reset_recorded: bool = True


class AccountWindowView(Payload):
    utilization: float = Field(ge=0, description="As read, 0-1 of the window; above 1 is past the window's cap")
    resets_at: datetime | None = Field(description="When the window resets; null when the reading recorded none")
    rolled_over: bool = Field(description=(
        "The reset passed since this reading: the pool average counts this window as 0 until it is read again"))
    counted_as: float = Field(ge=0, le=1, description=(
        "What the pool average counts for this account, 0-1: the reading clamped, 0 once rolled over, and 1 in the "
        "5-hour figure when the account's 7-day window is spent"))


class AccountView(Payload):
    """One account of the pool, read or not (seed 004: every account counts, whatever its status)."""

    account: str
    status: AccountStatusName = Field(description=(
        "The status last reported: needs_reauth is one Zimmer cannot serve from until a human signs in again"))
    serving: bool = Field(description="The account the runtime serves from now")
    read_at: datetime | None = Field(description="The newest reading; null when never read (left out of averages)")
    reading_age_seconds: float | None = Field(ge=0, description="How old the newest reading is; null when never read")
    stale: bool = Field(description="Read, but longer ago than `reading_stale_after_minutes`")
    five_hour: AccountWindowView | None = Field(description="Null when the reading has no 5-hour window")
    seven_day: AccountWindowView | None = Field(description="Null when the reading has no 7-day window")
    out_of_capacity: bool = Field(description="A window it waits on is spent")
    back_at: datetime | None = Field(description=(
        "When it can serve again: the later of the resets it waits on; null when not out, or when a spent window "
        "recorded no reset"))


class UnblockView(Payload):
    state: Literal["countdown", "not_blocked", "unknown", "no_readings"]
    at: datetime | None
    accounts_out: int
    accounts_read: int
    sentence: str
    next_weekly_reset_at: datetime | None
    accounts_week_spent: int


class GenesisClassView(Payload):
    genesis: GenesisName
    default: ClassName
    effective: ClassName
    set_on: Literal["policy", "trigger"]


class TriggerView(Payload):
    id: int
    kind: TriggerKindName
    name: str
    scheduling_class: ClassName | None
    precedence: int | None
    prompt: str | None
    enabled: bool
    created_at: datetime
    updated_at: datetime


class DecidedFor(Payload):
    """The candidate the view's decision is for: a new spot session as a spawn naming no harness or
    model gets it, at that combination's burn in the gate's currency."""

    harness: str
    model: str
    burn_per_minute: float


class PolicyView(Payload):
    gating_enabled: bool
    max_sessions: int
    windows: list[WindowPosture]  # the windows some account has a reading of
    reserve_percent: dict[str, float]  # the priority reserve of every window, read or not
    accounts_in_pool: int
    running: dict[str, int]  # by class
    held: dict[str, int]  # by hold reason
    # Asleep in the spot queue, by pause reason: at_utilization_limit (paused mid-run by the ceiling
    # sweep) and user_spot_queue (parked by a person; not part of what the ceiling cost).
    paused: dict[str, int] = Field(default_factory=dict)
    running_slots: int
    decision: DecisionView  # what the gate says now for a new spot session (`decided_for`)
    decided_for: DecidedFor | None = None
    unblock: UnblockView
    genesis_classes: list[GenesisClassView]
    triggers: list[TriggerView]  # oldest first, as many as fit with their prompts (issue 27 #13)
    triggers_next_offset: int | None = Field(default=None, description=(
        "Where the triggers this answer leaves out start: ask `search_triggers` with this as `offset` and follow "
        "its `next_offset`. Null when `triggers` holds every trigger"))
    # Every account of the pool in name order, read or not (issue 32 #3): the pooled figures above
    # average them, and a needs_reauth one is otherwise invisible.
    accounts: list[AccountView] = Field(default_factory=list)
    reading_stale_after_minutes: float = Field(default=60.0, description=(
        "A reading older than this is stale: the usage sampler re-reads an account once its reading is this old"))


class SetPolicy(Request):
    """Only the fields given change; at least one is given (an empty change is refused)."""

    model_config = ConfigDict(json_schema_extra=at_least_one_of(
        "gating_enabled", "reserve_five_hour_percent", "reserve_seven_day_percent", "max_sessions"))
    gating_enabled: bool | None = None
    reserve_five_hour_percent: float | None = Field(default=None, ge=0, le=100)
    reserve_seven_day_percent: float | None = Field(default=None, ge=0, le=100)
    max_sessions: int | None = Field(default=None, ge=0, le=10_000)


# The geneses no trigger produces: the only ones promote_genesis / demote_genesis take (a trigger's
# kind has its class set on the trigger).
POLICY_GENESES = ("web_ui", "api", "unknown")


class GenesisAction(Request):
    """reset_genesis_classes alone, or promote_genesis / demote_genesis with a genesis no trigger produces."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"properties": {"action": {"const": "reset_genesis_classes"}}},
        {"properties": {"action": {"enum": ["promote_genesis", "demote_genesis"]},
                        "genesis": {"enum": list(POLICY_GENESES)}}, "required": ["genesis"]}]})
    action: Literal["promote_genesis", "demote_genesis", "reset_genesis_classes"]
    genesis: GenesisName | None = None


class CreateTrigger(Request):
    kind: TriggerKindName
    name: Name
    scheduling_class: ClassName | None = None
    precedence: Int32 | None = None
    prompt: Prompt | None = None
    enabled: bool = True
    idempotency_key: IdempotencyKey | None = None


class UpdateTrigger(Request):
    trigger_id: RowId
    name: Name | None = None
    # "derive": clear the trigger's class so its sessions follow their genesis default.
    scheduling_class: Literal["priority", "spot", "derive"] | None = None
    precedence: Int32 | None = None
    clear_precedence: bool = False
    prompt: Prompt | None = None
    enabled: bool | None = None


class FireTrigger(Request):
    trigger_id: RowId
    prompt: Prompt | None = None
    title: Title | None = None
    idempotency_key: IdempotencyKey | None = None
    metadata: JsonObject = Field(default_factory=dict)
    invoked_from: Literal["api", "web_ui"] = Field(
        default="api", description="A by-hand invoke's origin, its session's genesis (seed 004): the web app's "
                                   "Invoke button is web_ui; REST and MCP are api. A trigger that fires ignores it.")


class TriggerQuery(Request):
    kind: TriggerKindName | None = None
    name_contains: ShortText | None = None
    limit: int = Field(default=100, ge=1, le=500)
    offset: int = Field(default=0, ge=0, le=2**63 - 1)


class TriggerList(Payload):
    triggers: list[TriggerView]  # oldest first
    next_offset: int | None = NEXT_OFFSET  # fewer than `limit` rows when their prompts fill one answer


SpendsAgainst = Literal["claude", "codex"]
PriceMatchName = Literal["exact", "version", "family", "unknown"]


class BurnRateView(Payload):
    harness: str
    model: str
    dollars_per_minute: float  # at the model's list price
    # In the gate's currency (`CostsView.currency`): what it compares with a window's capacity.
    # Codex: 0 (it spends nothing against a Claude account).
    opus_dollars_per_minute: float = 0.0
    spends_against: SpendsAgainst = "claude"
    sessions_counted: int
    computed_at: datetime


class ModelPricing(Payload):
    """How a model seen in the ledger or the burn rates is priced: its own list price (`exact`), a
    dated version's or family's (`version`, `family`), or, unknown, the dearest known price."""

    model: str
    priced_as: str
    how: PriceMatchName
    note: str


class CostsView(Payload):
    burn_rates: list[BurnRateView]
    # List-price spend, all of it and split by whose account it draws on.
    spend_five_hour_dollars: float
    spend_seven_day_dollars: float
    spend_five_hour_claude_dollars: float = 0.0
    spend_five_hour_codex_dollars: float = 0.0
    spend_seven_day_claude_dollars: float = 0.0
    spend_seven_day_codex_dollars: float = 0.0
    prices_per_million_tokens: dict[str, dict[str, float]]
    models: list[ModelPricing] = Field(default_factory=list)
    currency: str = ""  # what the gate's dollars are: every Claude token at this model's list prices


class CostsQuery(Request):
    pass


GET_POLICY = RpcSpec(CTX, "get_spot_policy", PolicyQuery, PolicyView)
SET_POLICY = RpcSpec(CTX, "set_spot_policy", SetPolicy, PolicyView)
GENESIS_ACTION = RpcSpec(CTX, "genesis_action", GenesisAction, PolicyView)
CREATE_TRIGGER = RpcSpec(CTX, "create_trigger", CreateTrigger, TriggerView)
UPDATE_TRIGGER = RpcSpec(CTX, "update_trigger", UpdateTrigger, TriggerView)
FIRE_TRIGGER = RpcSpec(CTX, "fire_trigger", FireTrigger, SpawnResult)
INVOKE_TRIGGER = RpcSpec(CTX, "invoke_trigger", FireTrigger, SpawnResult)
SEARCH_TRIGGERS = RpcSpec(CTX, "search_triggers", TriggerQuery, TriggerList)
GET_COSTS = RpcSpec(CTX, "get_costs", CostsQuery, CostsView)
