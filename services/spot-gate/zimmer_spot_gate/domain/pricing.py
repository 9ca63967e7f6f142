"""Dollars for the spot gate: burn rates, window calibration and sampling choice (prices and the
currency are `domain/prices.py`'s).

Rules from seed 003's QuotaCapacityCalibrationJob, BurnRateRecomputeJob and
ClaudeUsageSamplerJob rows, and seed 004 "Before the first calibration". Pure functions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from zimmer_spot_gate.domain.prices import spends_against_claude


@dataclass(frozen=True)
class SessionSpend:
    session_id: str
    harness: str
    model: str
    dollars: float  # at the model's list price
    first_at: datetime  # first token-ledger entry
    last_at: datetime  # last token-ledger entry
    currency_dollars: float = 0.0  # in the gate's currency (prices.currency_dollars)

    def __post_init__(self) -> None:
        for name in ("dollars", "currency_dollars"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.last_at < self.first_at:
            raise ValueError(f"session {self.session_id}: last_at is before first_at")

    @property
    def active_minutes(self) -> float:
        # Floored at one minute: a session with a single ledger entry spans zero time, and
        # dividing by it would project an infinite (or absurd) $/min from one burst of tokens.
        return max(1.0, (self.last_at - self.first_at).total_seconds() / 60)


@dataclass(frozen=True)
class BurnRate:
    dollars_per_minute: float  # at list prices (the Costs page)
    currency_per_minute: float  # in the gate's currency (what it compares with capacity)
    sessions_counted: int


def burn_rates(spends: Iterable[SessionSpend], per_combination: int = 25) -> dict[tuple[str, str], BurnRate]:
    """$/min per (harness, model) over its most recent sessions (seed 003, BurnRateRecomputeJob).

    The most recent `per_combination` (25) sessions of each combination by last_at (ties
    broken by session_id so a recompute is deterministic); rate = total dollars / total active
    minutes, a duration-weighted rate, so a one-minute session cannot dominate the projection
    the way it would in a mean of per-session rates. Recomputed from scratch each run, once at
    list prices and once in the gate's currency over the same sessions.
    """
    if per_combination < 1:
        raise ValueError(f"per_combination must be >= 1, got {per_combination!r}")
    groups: dict[tuple[str, str], list[SessionSpend]] = defaultdict(list)
    for s in spends:
        groups[(s.harness, s.model)].append(s)
    rates: dict[tuple[str, str], BurnRate] = {}
    for key, sessions in groups.items():
        recent = sorted(sessions, key=lambda s: (s.last_at, s.session_id), reverse=True)[:per_combination]
        minutes = sum(s.active_minutes for s in recent)
        rates[key] = BurnRate(sum(s.dollars for s in recent) / minutes,
                              sum(s.currency_dollars for s in recent) / minutes, len(recent))
    return rates


def fallback_burn(rates: Mapping[tuple[str, str], float]) -> float:
    """The burn, in the gate's currency, of a Claude session whose harness + model has no rate yet
    (no session of it has finished): the mean of the Claude combinations' rates, never free while
    anything is known. Codex combinations are outside it (they spend nothing against Claude)."""
    claude = [rate for (harness, model), rate in rates.items() if spends_against_claude(harness, model)]
    return sum(claude) / len(claude) if claude else 0.0


def session_burn(rates: Mapping[tuple[str, str], float], harness: str, model: str) -> float:
    """A session's burn in the gate's currency: its combination's rate, else `fallback_burn`;
    Codex spends nothing against a Claude account."""
    if not spends_against_claude(harness, model):
        return 0.0
    rate = rates.get((harness, model))
    return fallback_burn(rates) if rate is None else rate


def calibrate(
    previous: float | None,
    own_spend_dollars: float,
    pool_utilization: float,
    *,
    alpha: float = 0.3,
    min_utilization: float = 0.02,
) -> float | None:
    """Fold one observation into a window's dollar capacity (seed 003, QuotaCapacityCalibrationJob).

    Capacity = Zimmer's own Opus-denominated spend over the window ÷ the pool's average
    utilization of it, smoothed with an EMA (the first observation is taken as is). Seed 004
    "Before the first calibration": a window is priced only once spend and utilization are
    measurable; until then `previous` is returned unchanged (None = "not calibrated", which is
    never rendered as $0.00 — so this never returns 0).
    """
    if not (0.0 < alpha <= 1.0):
        raise ValueError(f"alpha must be within (0, 1], got {alpha!r}")
    if not (math.isfinite(own_spend_dollars) and own_spend_dollars >= 0):
        raise ValueError(f"own_spend_dollars must be a finite number >= 0, got {own_spend_dollars!r}")
    if not (0.0 <= pool_utilization <= 1.0):
        raise ValueError(f"pool_utilization must be within [0, 1], got {pool_utilization!r}")
    if previous is not None and not (math.isfinite(previous) and previous > 0):
        raise ValueError(f"previous capacity must be a finite number > 0, got {previous!r}")
    # Below the floor the quotient is noise: $0.05 over 0.1% would price the window at $50.
    if pool_utilization < min_utilization or own_spend_dollars == 0:
        return previous
    observed = own_spend_dollars / pool_utilization
    return observed if previous is None else previous + alpha * (observed - previous)


MAX_SPARE_PROBES_PER_TICK = 2
SPARE_MAX_STALENESS = timedelta(minutes=60)
# The I/O side's second budget: probes (serving + spares + refused ones walked past) per tick.
MAX_PROBES_PER_TICK = 5


def spare_candidates(
    serving: str | None,
    newest_reading_at: Mapping[str, datetime | None],
    now: datetime,
    *,
    stale_after: timedelta = SPARE_MAX_STALENESS,
) -> list[str]:
    """Every non-serving account stale enough to probe, stalest first (never read = stalest).

    Ties break by account name. A reading counts as stale once it is `stale_after` old or
    older: with 15-minute ticks that reads each spare hourly, the seed's 96 + 24(N-1) a day.
    The job walks this list past refused probes, within MAX_PROBES_PER_TICK.
    """
    stale = [
        (at is not None, at or now, account)
        for account, at in newest_reading_at.items()
        if account != serving and (at is None or now - at >= stale_after)
    ]
    return [account for _, _, account in sorted(stale)]


def accounts_to_sample(
    serving: str | None,
    newest_reading_at: Mapping[str, datetime | None],
    now: datetime,
    *,
    max_spares: int = MAX_SPARE_PROBES_PER_TICK,
    stale_after: timedelta = SPARE_MAX_STALENESS,
) -> list[str]:
    """Which accounts ClaudeUsageSamplerJob reads this tick (seed 003).

    The serving account every tick, plus up to `max_spares` OTHER accounts whose newest
    reading is stale. Choosing on staleness rather than a fixed rotation means every other
    writer counts: an account the reset checker or /inference just read is never picked, and a
    probe that failed wrote no reading, so that account stays eligible next tick.
    """
    if max_spares < 0:
        raise ValueError(f"max_spares must be >= 0, got {max_spares!r}")
    spares = spare_candidates(serving, newest_reading_at, now, stale_after=stale_after)[:max_spares]
    return ([serving] if serving is not None else []) + spares
