"""Prices: pricing never refuses work, names resolve by version then family, and the gate's one
currency (DESIGN §9 "Pricing never refuses work", "One currency for pacing"; issue 25 #3, #5)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.config import PriceBook
from zimmer_spot_gate.domain.prices import (
    CURRENCY,
    DEFAULT_PRICES,
    ModelPrices,
    TokenUsage,
    currency_dollars,
    dearest,
    resolve_price,
    spend_dollars,
    spends_against_claude,
)

OPUS_4 = ModelPrices(15, 75, 18.75, 1.50)
OPUS_4_5 = ModelPrices(5, 25, 6.25, 0.50)
SONNET = ModelPrices(3, 15, 3.75, 0.30)


@pytest.mark.parametrize(("model", "expected", "how"), [
    ("claude-opus-4-1-20250805", OPUS_4, "version"),
    ("claude-opus-4-20250514", OPUS_4, "version"),
    ("claude-opus-4@20250514", OPUS_4, "version"),
    ("us.anthropic.claude-opus-4-1-20250805-v1:0", OPUS_4, "version"),
    # Opus 4.5 lists at a third of Opus 4: it was priced as Opus 4 (3x its list price).
    ("claude-opus-4-5-20251101", OPUS_4_5, "version"),
    ("claude-opus-4-5", OPUS_4_5, "exact"),
    ("Claude-Sonnet-4-5-20250929", SONNET, "version"),
    ("claude-sonnet-4-5[1m]", SONNET, "version"),
    ("anthropic/claude-sonnet-4", SONNET, "exact"),
    ("claude-haiku-4-5", ModelPrices(1, 5, 1.25, 0.10), "exact"),
    ("claude-3-opus-20240229", OPUS_4, "version"),
    ("gpt-5-codex", DEFAULT_PRICES["gpt-5"], "version"),
    ("gpt-5.1-codex", DEFAULT_PRICES["gpt-5"], "version"),
    ("gpt-5-mini-2025-08-07", DEFAULT_PRICES["gpt-5-mini"], "version"),
    # Families: a new version of a known family, and Claude Code's aliases.
    ("claude-opus-5", OPUS_4_5, "family"),
    ("opusplan", OPUS_4_5, "family"),
    ("opus", OPUS_4_5, "exact"),
    ("claude-sonnet-5-20260101", SONNET, "family"),
])
def test_names_resolve_by_version_then_family(model: str, expected: ModelPrices, how: str) -> None:
    match = resolve_price(model, DEFAULT_PRICES)
    assert (match.prices, match.how) == (expected, how)


def test_longest_version_prefix_wins_and_exact_first() -> None:
    table = {"m": ModelPrices(1, 1, 1, 1), "m-big": ModelPrices(2, 2, 2, 2)}
    assert resolve_price("m-big-2", table).prices.input == 2
    assert resolve_price("m-2", table).prices.input == 1
    assert resolve_price("m", table).how == "exact"


@pytest.mark.parametrize("model", ["default", "mystery-model", "", "gpt-50"])
def test_an_unknown_model_is_priced_at_the_dearest_known_price(model: str) -> None:
    """Pricing never refuses work, and spend is never free: an unknown model costs the most."""
    match = resolve_price(model, DEFAULT_PRICES)
    assert match.how == "unknown" and match.prices == DEFAULT_PRICES[dearest(DEFAULT_PRICES)]
    assert match.prices.output == max(p.output for p in DEFAULT_PRICES.values())
    assert match.note == f"unknown model, priced as {match.priced_as} (the dearest known price)"


def test_the_book_warns_once_per_unknown_model(caplog: pytest.LogCaptureFixture) -> None:
    book = PriceBook()
    with caplog.at_level(logging.WARNING, logger="zimmer.spot_gate.prices"):
        for _ in range(3):
            book.resolve("default")
            book.resolve("claude-opus-4-5")
        book.resolve("mystery")
    warned = [r for r in caplog.records if r.name == "zimmer.spot_gate.prices"]
    assert [r.fields["model"] for r in warned] == ["default", "mystery"]  # type: ignore[attr-defined]  # log records carry the `fields` extra


@given(st.text(max_size=60))
def test_any_name_is_priced(model: str) -> None:
    assert resolve_price(model, DEFAULT_PRICES).prices in DEFAULT_PRICES.values()


def test_prices_are_validated() -> None:
    for bad in (-1, float("nan"), float("inf"), True):
        with pytest.raises(ValueError):
            ModelPrices(bad, 1, 1, 1)  # type: ignore[arg-type]  # bad values, on purpose


def test_spend_dollars_prices_each_token_kind() -> None:
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=100_000, cache_write_tokens=200_000,
                       cache_read_tokens=2_000_000)
    assert spend_dollars(usage, OPUS_4) == pytest.approx(15 + 7.5 + 3.75 + 3.0)
    assert spend_dollars(TokenUsage(), OPUS_4) == 0


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"])
def test_token_counts_are_validated(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TokenUsage(**{field: -1})
    with pytest.raises(ValueError, match=field):
        TokenUsage(**{field: 1.5})


@given(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9),
       st.sampled_from(sorted(DEFAULT_PRICES)))
def test_spend_is_non_negative_and_additive(i: int, o: int, w: int, r: int, model: str) -> None:
    p = DEFAULT_PRICES[model]
    parts = [TokenUsage(input_tokens=i), TokenUsage(output_tokens=o), TokenUsage(cache_write_tokens=w),
             TokenUsage(cache_read_tokens=r)]
    assert spend_dollars(TokenUsage(i, o, w, r), p) == pytest.approx(sum(spend_dollars(u, p) for u in parts))


def test_one_currency_for_pacing() -> None:
    """DESIGN §9: capacity is calibrated in Opus-priced dollars, so every burn the gate compares
    with it is Opus-priced: a Sonnet session's tokens cost the gate what Opus's would (its list
    price read about 5x too low against capacity), and Codex spends nothing against Claude."""
    usage = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    opus = spend_dollars(usage, DEFAULT_PRICES[CURRENCY])
    assert currency_dollars(usage, "claude_code", "claude-sonnet-4-5", DEFAULT_PRICES) == pytest.approx(opus)
    assert currency_dollars(usage, "claude_code", "default", DEFAULT_PRICES) == pytest.approx(opus)
    assert spend_dollars(usage, SONNET) == pytest.approx(opus / 5)
    assert currency_dollars(usage, "codex", "gpt-5-codex", DEFAULT_PRICES) == 0.0
    assert currency_dollars(usage, "claude_code", "gpt-5", DEFAULT_PRICES) == 0.0
    assert spends_against_claude("claude_code", "claude-opus-4") and not spends_against_claude("codex", "opus")
