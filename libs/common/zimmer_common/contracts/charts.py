"""History for the operator pages' charts, which REST serves as it is (issue 32 #4; DESIGN §9
"History for charts"): the quota pool's utilization with its pacing curve, reserve and spot budget,
spend per model (spot-gate), and each queue lane's depth and oldest-ready age (alerts).

Every read takes `since`/`until` and a `step_minutes` to aggregate to, and answers with the range
and step it used. Points are buckets: `at` is where one starts, `samples` how many one-minute
readings it stands for; a bucket nothing was recorded in is absent (a gap, not a zero). History is
kept one point a minute for 7 days, then one per 15 minutes for 90 days: a step finer than what is
kept for a time reads what is kept.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field, model_validator

from zimmer_common.contracts import health, spot
from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import Name, Time

StepMinutes = Literal[1, 5, 15, 60, 240, 1440]  # zimmer_common.history.STEPS (a test holds them equal)
WindowName = Literal["five_hour", "seven_day"]

# The most points one answer carries (an answer is one bus message, its rows half of one:
# zimmer_common.byte_pages; tests/unit/test_chart_answers_fit.py builds the largest answers): per
# series for the pool, over every series together for spend and lanes (their points are smaller),
# and the most models a spend answer names (the most spend first; the rest counted).
POOL_MAX_POINTS: Final = 1200
SERIES_MAX_POINTS: Final = 2500
MAX_MODELS: Final = 50

SINCE = "Start of the range (RFC 3339). Default: the span the read names before `until`; nothing older than 90 days is kept"
UNTIL = "End of the range, exclusive (RFC 3339). Default and latest: now"
STEP = ("Minutes each point aggregates. Default: the smallest that fits one answer; a step too small for the range is "
        "refused (422) naming the smallest that fits")


class HistoryRange(Request):
    since: Time | None = Field(default=None, description=SINCE)
    until: Time | None = Field(default=None, description=UNTIL)
    step_minutes: StepMinutes | None = Field(default=None, description=STEP)

    @model_validator(mode="after")
    def _ordered(self) -> HistoryRange:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class HistoryAnswer(Payload):
    since: datetime = Field(description="Where the first bucket starts (the range's start rounded down to the step)")
    until: datetime = Field(description="End of the range read, exclusive")
    step_minutes: StepMinutes


# ---- the quota pool (spot-gate) ------------------------------------------------------------------


class PoolHistoryQuery(HistoryRange):
    """One window's history; the default range is that window's length (5 hours, 7 days)."""

    window: WindowName


class PoolHistoryPoint(Payload):
    """One bucket of one window. Fractions are of the window (0-1)."""

    at: datetime
    samples: int = Field(description="One-minute readings this point stands for")
    utilization: float | None = Field(description="Pooled utilization, mean over the bucket; null: no account had a "
                                                  "reading of this window")
    pacing: float | None = Field(description="The pacing curve: where utilization would stand had the spot budget been "
                                             "spent evenly since the window started, (1 - reserve) x elapsed / "
                                             "length; null: no account recorded when the window resets")
    reserve: float = Field(description="The priority reserve (fraction of the window)")
    spot_budget: float = Field(description="The spot budget line: 1 - reserve; spot work is held above it")
    capacity_dollars: float | None = Field(description="The calibrated capacity (an estimate); null: not calibrated, "
                                                       "every figure is a fraction of the window")
    running: int = Field(description="Most sessions running at once in the bucket")
    held: int = Field(description="Most sessions held at the gate at once in the bucket")
    paused: int = Field(description="Most sessions asleep in the spot queue at once in the bucket")
    holds: int = Field(description="Turns the gate held in the bucket")
    pauses: int = Field(description="Running spot sessions the ceiling sweep paused in the bucket")
    resumes: int = Field(description="Paused sessions the ceiling sweep resumed in the bucket")


class PoolHistory(HistoryAnswer):
    window: WindowName
    points: list[PoolHistoryPoint]


# ---- spend per model (spot-gate's spend ledger) ------------------------------------------------------


class CostsHistoryQuery(HistoryRange):
    """Spend per harness and model; the default range is 7 days."""


class SpendPoint(Payload):
    at: datetime
    dollars: float = Field(description="List-price spend in the bucket")
    dollars_per_minute: float = Field(description="The burn rate over the bucket: dollars / step_minutes")


class ModelSpend(Payload):
    harness: str
    model: str
    spends_against: Literal["claude", "codex"]
    dollars: float = Field(description="List-price spend over the whole range")
    points: list[SpendPoint] = Field(description="Buckets with spend, oldest first (a bucket without is absent)")


class CostsHistory(HistoryAnswer):
    models: list[ModelSpend] = Field(description="Each harness and model with spend in the range, most spend first: "
                                                 "at most 50")
    models_left_out: int = Field(0, description="Harness and model combinations with less spend in the range than "
                                                "the 50 shown, left out of `models`")


# ---- queue lanes (alerts) -------------------------------------------------------------------------------


class HealthHistoryQuery(HistoryRange):
    """Each lane's depth and oldest-ready age; the default range is 24 hours."""

    lane: Name | None = Field(default=None, description="Only this lane (default: every lane with history)")


class LanePoint(Payload):
    at: datetime
    samples: int = Field(description="Health checks (one a minute) this point stands for")
    ready: int = Field(description="Most messages waiting at once in the bucket (the lane's depth)")
    claimed: int = Field(description="Most messages being worked at once in the bucket")
    oldest_ready_age_seconds: float | None = Field(description="The oldest waiting message's age, the highest in the "
                                                               "bucket; null: nothing waited")
    depth_threshold: int = Field(description="The depth at which the lane counts as backed up")
    stall_age_seconds: float = Field(description="The oldest-ready age at which the lane counts as stalled")


class LaneHistory(Payload):
    lane: str
    points: list[LanePoint]


class HealthHistory(HistoryAnswer):
    lanes: list[LaneHistory] = Field(description="Every lane with a point in the range, by name")


GET_POOL_HISTORY = RpcSpec(spot.CTX, "pool_history", PoolHistoryQuery, PoolHistory)
GET_COSTS_HISTORY = RpcSpec(spot.CTX, "costs_history", CostsHistoryQuery, CostsHistory)
GET_HEALTH_HISTORY = RpcSpec(health.CTX, "health_history", HealthHistoryQuery, HealthHistory)
