"""List prices, how a model name finds its price, and the gate's one currency (DESIGN §9 "Pricing
never refuses work", "One currency for pacing"). Pure: the edge logs and configures.

- A model is priced by its own entry, else the longest entry that is a dated-version prefix of it
  ("claude-opus-4-5" prices "claude-opus-4-5-20251101"), else its family ("claude-opus-5" and
  "opusplan" are Opus), else at the dearest known price: spend is never free, and no spawn is
  refused for its model.
- The gate reasons in one currency: capacity is calibrated in Opus-priced dollars, so every burn
  it compares with it is Opus-priced too (each token at `CURRENCY`'s list price, whatever model
  spent it). Codex spends nothing against a Claude account: zero in that currency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal


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
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{f.name} price must be a finite number >= 0, got {v!r}")


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
    return (usage.input_tokens * prices.input + usage.output_tokens * prices.output
            + usage.cache_write_tokens * prices.cache_write + usage.cache_read_tokens * prices.cache_read) / 1_000_000


# A price table: model name, dated-version prefix or family alias -> prices. Configuration
# (ZIMMER_SPOT_PRICES) extends or overrides these defaults.
Prices = Mapping[str, ModelPrices]

# Anthropic list prices (cache_write is the 5-minute cache write, 1.25x input; cache_read 0.1x).
_OPUS_4 = ModelPrices(input=15.0, output=75.0, cache_write=18.75, cache_read=1.50)
_OPUS_4_5 = ModelPrices(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50)
_SONNET = ModelPrices(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
_HAIKU_4_5 = ModelPrices(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10)
# OpenAI list prices (the Codex harness): no cache-write premium, cached input at a tenth or a quarter.
_GPT_5 = ModelPrices(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125)
_GPT_5_MINI = ModelPrices(input=0.25, output=2.0, cache_write=0.25, cache_read=0.025)

DEFAULT_PRICES: dict[str, ModelPrices] = {
    "claude-opus-4-5": _OPUS_4_5,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4": _SONNET,
    "claude-haiku-4-5": _HAIKU_4_5,
    "claude-3-7-sonnet": _SONNET,
    "claude-3-5-sonnet": _SONNET,
    "claude-3-5-haiku": ModelPrices(input=0.80, output=4.0, cache_write=1.0, cache_read=0.08),
    "claude-3-opus": _OPUS_4,
    "claude-3-haiku": ModelPrices(input=0.25, output=1.25, cache_write=0.30, cache_read=0.03),
    # Families, and Claude Code's aliases (each names the current model of its family).
    "opus": _OPUS_4_5,
    "sonnet": _SONNET,
    "haiku": _HAIKU_4_5,
    "gpt-5": _GPT_5,  # also prices gpt-5-codex, gpt-5.1, gpt-5.1-codex
    "gpt-5-mini": _GPT_5_MINI,
    "gpt-5.1-codex-mini": _GPT_5_MINI,
    "gpt-5-nano": ModelPrices(input=0.05, output=0.40, cache_write=0.05, cache_read=0.005),
    "codex-mini-latest": ModelPrices(input=1.50, output=6.0, cache_write=1.50, cache_read=0.375),
    "gpt-4.1": ModelPrices(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "o3": ModelPrices(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "o4-mini": ModelPrices(input=1.10, output=4.40, cache_write=1.10, cache_read=0.275),
}

FAMILIES = ("opus", "sonnet", "haiku")
# The currency capacity is calibrated in and every gate burn is priced at. A unit, not a claim
# about which model runs: changing it would rescale every calibrated capacity.
CURRENCY = "claude-opus-4"
# Models that spend against an OpenAI account (the Codex harness), never a Claude one.
OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "codex-")

# A key matches a longer name only at a boundary: "claude-opus-4" prices
# "claude-opus-4-1-20250805" and "claude-opus-4@20250514" but not "claude-opus-40".
_BOUNDARY = "-._@:[ "

How = Literal["exact", "version", "family", "unknown"]


@dataclass(frozen=True)
class PriceMatch:
    """How a model found its price: its own entry (`exact`), a dated-version prefix (`version`),
    its family (`family`), or none (`unknown`: priced as the dearest entry, `priced_as`)."""

    model: str
    prices: ModelPrices
    priced_as: str
    how: How

    @property
    def note(self) -> str:
        if self.how == "unknown":
            return f"unknown model, priced as {self.priced_as} (the dearest known price)"
        if self.how == "exact":
            return "list price"
        return f"priced as {self.priced_as}"


def normalize(model: str) -> str:
    name = model.strip().lower().rsplit("/", 1)[-1]  # "anthropic/claude-…" -> "claude-…"
    return name.rsplit("anthropic.", 1)[-1]  # Bedrock "us.anthropic.claude-…" -> "claude-…"


def _table(prices: Prices) -> dict[str, ModelPrices]:
    return {k.strip().lower(): v for k, v in prices.items()}


def dearest(prices: Prices) -> str:
    """The most expensive entry (output price, then input, then name for a stable answer)."""
    table = _table(prices)
    return max(table, key=lambda k: (table[k].output, table[k].input, table[k].cache_write, table[k].cache_read, k))


def _tokens(name: str) -> list[str]:
    out, word = [], ""
    for ch in name:
        if ch in _BOUNDARY:
            out.append(word)
            word = ""
        else:
            word += ch
    return [*out, word]


def resolve_price(model: str, prices: Prices) -> PriceMatch:
    """The price of `model`; never raises for a name (an unknown one is priced dearest)."""
    if not prices:
        raise ValueError("the price table is empty")
    name = normalize(model)
    table = _table(prices)
    if name in table:
        return PriceMatch(model, table[name], name, "exact")
    versions = [k for k in table if name.startswith(k) and name[len(k)] in _BOUNDARY]
    if versions:
        key = max(versions, key=len)
        return PriceMatch(model, table[key], key, "version")
    for token in _tokens(name):
        family = next((f for f in FAMILIES if token.startswith(f) and f in table), None)
        if family is not None:
            return PriceMatch(model, table[family], family, "family")
    key = dearest(table)
    return PriceMatch(model, table[key], key, "unknown")


def spends_against_claude(harness: str, model: str) -> bool:
    """Spend that draws on a Claude account's windows: everything but the Codex harness and
    OpenAI's models. An unknown model under Claude Code counts (never free for the gate)."""
    if harness.strip().lower() == "codex":
        return False
    return not normalize(model).startswith(OPENAI_PREFIXES)


def currency_dollars(usage: TokenUsage, harness: str, model: str, prices: Prices) -> float:
    """Spend in the gate's currency: Claude spend's tokens at `CURRENCY`'s list price, Codex zero."""
    if not spends_against_claude(harness, model):
        return 0.0
    return spend_dollars(usage, resolve_price(CURRENCY, prices).prices)
