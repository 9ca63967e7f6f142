"""Dollars for the spot gate: list prices, burn rates, window calibration and sampling choice.

Rules from seed 003's QuotaCapacityCalibrationJob, BurnRateRecomputeJob and
ClaudeUsageSamplerJob rows, and seed 004 "Before the first calibration". Pure functions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta


@dataclass(frozen=True)
class ModelPrices:
    """List prices in US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{f.name} price must be a finite number >= 0, got {v!r}")


# A price table: model name or family prefix -> prices. Configurable; these are defaults.
Prices = Mapping[str, ModelPrices]

_OPUS_4 = ModelPrices(input=15.0, output=75.0, cache_write=18.75, cache_read=1.50)
_SONNET_4 = ModelPrices(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
_HAIKU_4 = ModelPrices(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10)
_GPT_5 = ModelPrices(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125)
_GPT_5_MINI = ModelPrices(input=0.25, output=2.0, cache_write=0.25, cache_read=0.025)

DEFAULT_PRICES: dict[str, ModelPrices] = {
    # Anthropic list prices; cache_write is the 5-minute cache write (1.25x input), cache_read
    # is 0.1x input. Opus is the capacity currency (QuotaCapacityCalibrationJob prices quota
    # windows "in Opus dollars"). Note: Opus 4.5 and later list lower than Opus 4/4.1 —
    # override "claude-opus-4-5" in the configured table if that model is in use.
    "claude-opus-4": _OPUS_4,
    "claude-sonnet-4": _SONNET_4,
    "claude-haiku-4": _HAIKU_4,
    "claude-3-7-sonnet": _SONNET_4,
    "claude-3-5-sonnet": _SONNET_4,
    "claude-3-5-haiku": ModelPrices(input=0.80, output=4.0, cache_write=1.0, cache_read=0.08),
    # Claude Code's model aliases name a family, not a version.
    "opus": _OPUS_4,
    "sonnet": _SONNET_4,
    "haiku": _HAIKU_4,
    # OpenAI (Codex harness): best documented guess at list prices, configurable. OpenAI
    # charges no cache-write premium (cached input is written at the normal input price).
    "gpt-5": _GPT_5,  # also matches gpt-5-codex, gpt-5.1, gpt-5.1-codex
    "gpt-5-mini": _GPT_5_MINI,
    "gpt-5.1-codex-mini": _GPT_5_MINI,
    "codex-mini-latest": ModelPrices(input=1.50, output=6.0, cache_write=1.50, cache_read=0.375),
    "gpt-4.1": ModelPrices(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "o3": ModelPrices(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "o4-mini": ModelPrices(input=1.10, output=4.40, cache_write=1.10, cache_read=0.275),
}

# A key matches a longer name only at a boundary: "claude-opus-4" prices
# "claude-opus-4-1-20250805" and "claude-opus-4@20250514" but not "claude-opus-40".
_BOUNDARY = "-._@:[ "


def _normalize(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]  # "anthropic/claude-…" -> "claude-…"
    return name.rsplit("anthropic.", 1)[-1]  # Bedrock "us.anthropic.claude-…" -> "claude-…"


def price_for(model: str, prices: Prices = DEFAULT_PRICES) -> ModelPrices:
    """The prices of `model`: an exact key, else the longest key that is a family prefix of it.

    Raises KeyError naming the model when nothing matches, rather than pricing it at $0 —
    an unpriced model silently spending nothing would make the gate admit work for free.
    """
    name = _normalize(model)
    table = {k.strip().lower(): v for k, v in prices.items()}
    if name in table:
        return table[name]
    matches = [k for k in table if name.startswith(k) and name[len(k)] in _BOUNDARY]
    if not matches:
        raise KeyError(f"no price for model {model!r}; add it (or its family prefix) to the price table")
    return table[max(matches, key=len)]


OPUS = "claude-opus-4"  # the capacity currency: quota windows are priced in Opus dollars
CLAUDE_FAMILIES = ("claude", "opus", "sonnet", "haiku")


def is_claude(model: str) -> bool:
    """A model that spends against a Claude account's windows (Codex's do not)."""
    name = _normalize(model)
    return any(name == f or (name.startswith(f) and name[len(f)] in _BOUNDARY) for f in CLAUDE_FAMILIES)


def opus_dollars(usage_by_model: Iterable[tuple[str, TokenUsage]], prices: Prices = DEFAULT_PRICES) -> float:
    """Claude spend, Opus-denominated: every Claude model's tokens priced at Opus list prices
    (seed 003 QuotaCapacityCalibrationJob; DESIGN §9 "Calibration"). Codex spend is outside the
    gate and outside this sum."""
    opus = price_for(OPUS, prices)
    return sum(spend_dollars(usage, opus) for model, usage in usage_by_model if is_claude(model))


def dearest(prices: Prices) -> ModelPrices:
    """The most expensive entry of the table (by output price, then input): what spend of an
    unpriced model is counted at, so it is never free."""
    return max(prices.values(), key=lambda p: (p.output, p.input, p.cache_write, p.cache_read))


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{f.name} must be an integer >= 0, got {v!r}")


def spend_dollars(usage: TokenUsage, prices: ModelPrices) -> float:
    """What `usage` costs at `prices` (per-million-token list prices, as on the Costs page)."""
    return (
        usage.input_tokens * prices.input
        + usage.output_tokens * prices.output
        + usage.cache_write_tokens * prices.cache_write
        + usage.cache_read_tokens * prices.cache_read
    ) / 1_000_000


@dataclass(frozen=True)
class SessionSpend:
    session_id: str
    harness: str
    model: str
    dollars: float
    first_at: datetime  # first token-ledger entry
    last_at: datetime  # last token-ledger entry

    def __post_init__(self) -> None:
        if not (math.isfinite(self.dollars) and self.dollars >= 0):
            raise ValueError(f"dollars must be a finite number >= 0, got {self.dollars!r}")
        if self.last_at < self.first_at:
            raise ValueError(f"session {self.session_id}: last_at is before first_at")

    @property
    def active_minutes(self) -> float:
        # Floored at one minute: a session with a single ledger entry spans zero time, and
        # dividing by it would project an infinite (or absurd) $/min from one burst of tokens.
        return max(1.0, (self.last_at - self.first_at).total_seconds() / 60)


def burn_rates(spends: Iterable[SessionSpend], per_combination: int = 25) -> dict[tuple[str, str], float]:
    """$/min per (harness, model) over its most recent sessions (seed 003, BurnRateRecomputeJob).

    The most recent `per_combination` (25) sessions of each combination by last_at (ties
    broken by session_id so a recompute is deterministic); rate = total dollars / total active
    minutes, a duration-weighted rate, so a one-minute session cannot dominate the projection
    the way it would in a mean of per-session rates. Recomputed from scratch each run.
    """
    if per_combination < 1:
        raise ValueError(f"per_combination must be >= 1, got {per_combination!r}")
    groups: dict[tuple[str, str], list[SessionSpend]] = defaultdict(list)
    for s in spends:
        groups[(s.harness, s.model)].append(s)
    rates: dict[tuple[str, str], float] = {}
    for key, sessions in groups.items():
        recent = sorted(sessions, key=lambda s: (s.last_at, s.session_id), reverse=True)[:per_combination]
        rates[key] = sum(s.dollars for s in recent) / sum(s.active_minutes for s in recent)
    return rates


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
