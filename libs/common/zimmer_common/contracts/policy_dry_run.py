"""The policy dry-run (issue 32 #5): the recorded readings, spend and arrivals of a span replayed
through the gate at other settings, per hour, beside what happened. Spot-gate's published
language; served as POST /api/v1/spot_policy/dry_run (operator only) and the MCP tool
`preview_spot_policy` (group gate_decisions)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field, model_validator

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import Time
from zimmer_common.contracts.spot import CTX

MAX_SPAN = timedelta(days=7)
SINCE_AFTER_UNTIL = "since must be before until"
SPAN_TOO_LONG = "the span is longer than 7 days: replay at most 7 days at a time"


class PolicyDryRun(Request):
    """PATCH /api/v1/spot_policy's fields, none required: a field not given keeps what each recorded
    decision had (none given: the recorded settings, which decide exactly as the gate did), and the
    span, at most 7 days (`since` defaults to 7 days before `until`, `until` to now, or to 7 days
    after `since`, whichever is earlier)."""

    gating_enabled: bool | None = None
    reserve_five_hour_percent: float | None = Field(default=None, ge=0, le=100)
    reserve_seven_day_percent: float | None = Field(default=None, ge=0, le=100)
    max_sessions: int | None = Field(default=None, ge=0, le=10_000)
    since: Time | None = Field(default=None, description="The span's start (inclusive); at most 7 days before `until`")
    until: Time | None = Field(default=None, description="The span's end (exclusive); after `since`")

    @model_validator(mode="after")
    def _span(self) -> PolicyDryRun:
        if self.since is not None and self.until is not None:
            if self.since >= self.until:
                raise ValueError(SINCE_AFTER_UNTIL)
            if self.until - self.since > MAX_SPAN:
                raise ValueError(SPAN_TOO_LONG)
        return self


class DryRunFigures(Payload):
    admitted: int = Field(description="Gate decisions that let a turn or a resume start")
    held: int = Field(description="Gate decisions that held a turn")
    paused: int = Field(description="Running spot sessions the ceiling paused")
    held_minutes: float = Field(description="Minutes spot work waited at the gate (priority work is never held)")
    held_minutes_by_ceiling: dict[str, float] = Field(description="The same minutes by the ceiling that held: "
                                                                  "fleet_cap, spot_budget, pacing_curve")
    paused_minutes: float = Field(description="Minutes spot work spent paused mid-run by the ceiling")
    peak_running: int = Field(description="Sessions taking a slot at once, at the most")


class DryRunLeft(Payload):
    """A window's spot budget left: dollars once calibrated (the gate's Opus-priced currency),
    else a fraction of the window."""

    window: Literal["five_hour", "seven_day"]
    unit: Literal["dollars", "fraction"]
    recorded: float
    replayed: float
    utilization_recorded: float
    utilization_replayed: float


class DryRunHour(Payload):
    hour: datetime = Field(description="The hour's start (UTC)")
    decisions: int = Field(description="Recorded gate decisions asked again in this hour")
    recorded: DryRunFigures
    replayed: DryRunFigures
    held_instead: int = Field(description="Sessions the replay held or paused where the record let them run")
    admitted_instead: int = Field(description="Sessions the replay let run where the record held or paused them")
    spot_budget_left: list[DryRunLeft] = Field(description="At the hour's last reading of the windows (none: no "
                                                           "reading in the hour)")


class DryRunReset(Payload):
    at: datetime = Field(description="When the window reset")
    left: DryRunLeft = Field(description="What it had left at its last reading before the reset")


class DryRunSession(Payload):
    session_id: int
    at: datetime
    recorded: Literal["admitted", "held", "paused", "running"]
    replayed: Literal["admitted", "held", "paused", "running"]


class DryRunGap(Payload):
    since: datetime
    until: datetime
    what: str = Field(description="What is missing from the record here, and what the replay did about it")


class DryRunSettings(Payload):
    """The settings replayed; null: what each recorded decision had."""

    gating_enabled: bool | None
    reserve_five_hour_percent: float | None
    reserve_seven_day_percent: float | None
    max_sessions: int | None


class PolicyDryRunView(Payload):
    since: datetime
    until: datetime
    replayed_until: datetime = Field(description="Where the replay ends: `until`, or earlier when `truncated`")
    truncated: bool = Field(description="A bound on the records one dry-run reads was reached; the replay covers "
                                        "since to replayed_until")
    settings: DryRunSettings
    decisions_replayed: int
    decisions_changed: int = Field(description="Recorded decisions the replay decided the other way")
    reasons_changed: int = Field(description="Decided alike, for another reason or ceiling")
    sessions_changed: int = Field(description="Sessions held, paused or admitted differently at least once")
    recorded: DryRunFigures = Field(description="What happened over the span")
    replayed: DryRunFigures = Field(description="What the replay says would have happened")
    hours: list[DryRunHour]
    resets: list[DryRunReset]
    sessions: list[DryRunSession] = Field(description="The first 50 sessions decided differently, when and how")
    missing: list[DryRunGap] = Field(description="Periods the record lacks what the replay needs")
    sentence: str


DRY_RUN = RpcSpec(CTX, "policy_dry_run", PolicyDryRun, PolicyDryRunView)
