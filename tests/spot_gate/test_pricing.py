"""Seed 003 QuotaCapacityCalibrationJob / BurnRateRecomputeJob / ClaudeUsageSamplerJob, and
seed 004 "Before the first calibration"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.pricing import (
    MAX_PROBES_PER_TICK,
    BurnRate,
    SessionSpend,
    accounts_to_sample,
    burn_rates,
    calibrate,
    fallback_burn,
    session_burn,
    spare_candidates,
)

NOW = datetime(2026, 8, 20, 10, 0, tzinfo=UTC)
M = timedelta(minutes=1)
KEY = ("claude_code", "claude-opus-4-1")


def rate_of(rates: dict[tuple[str, str], BurnRate], key: tuple[str, str] = KEY) -> float:
    return rates[key].dollars_per_minute


# ---- burn rates -------------------------------------------------------------------------------

def spend(sid: str, dollars: float, minutes: float, end_min: float = 0, harness: str = "claude_code",
          model: str = "claude-opus-4-1", currency: float | None = None) -> SessionSpend:
    last = NOW + end_min * M
    return SessionSpend(sid, harness, model, dollars, last - minutes * M, last,
                        dollars if currency is None else currency)


def test_burn_rate_is_total_dollars_over_total_active_minutes():
    rates = burn_rates([spend("a", 10, 10), spend("b", 30, 20)])
    assert list(rates) == [KEY] and rate_of(rates) == pytest.approx(40 / 30) and rates[KEY].sessions_counted == 2


def test_the_currency_rate_is_taken_over_the_same_sessions():
    """DESIGN §9 "One currency for pacing": the gate compares Opus-priced burn with Opus-priced
    capacity; the list-price rate stays for the Costs page, over the same sessions."""
    rates = burn_rates([spend("a", 3, 10, model="claude-sonnet-4-5", currency=15),
                        spend("b", 6, 20, model="claude-sonnet-4-5", currency=30)])
    r = rates[("claude_code", "claude-sonnet-4-5")]
    assert (r.dollars_per_minute, r.currency_per_minute) == (pytest.approx(0.3), pytest.approx(1.5))


def test_a_combination_with_no_rate_burns_the_mean_claude_rate_and_codex_nothing():
    rates = {("claude_code", "claude-opus-4"): 2.0, ("claude_code", "claude-sonnet-4-5"): 1.0, ("codex", "gpt-5"): 0.0}
    assert fallback_burn(rates) == pytest.approx(1.5)  # Codex is outside the mean
    assert session_burn(rates, "claude_code", "claude-haiku-4-5") == pytest.approx(1.5)
    assert session_burn(rates, "claude_code", "claude-opus-4") == 2.0
    assert session_burn(rates, "codex", "gpt-5-codex") == 0.0
    assert session_burn({}, "claude_code", "anything") == 0.0


def test_burn_rate_uses_only_the_25_most_recent_sessions_of_each_combination():
    old = [spend(f"old{i}", 100, 1, end_min=-1000 - i) for i in range(10)]
    recent = [spend(f"new{i}", 1, 1, end_min=-i) for i in range(25)]
    assert rate_of(burn_rates(old + recent)) == pytest.approx(1.0)
    assert rate_of(burn_rates(old + recent, per_combination=26)) == pytest.approx((25 + 100) / 26)


def test_burn_rates_are_per_harness_and_model():
    rates = burn_rates([spend("a", 10, 10), spend("b", 6, 2, harness="codex", model="gpt-5-codex"),
                        spend("c", 3, 1, model="claude-sonnet-4-5")])
    assert {k: r.dollars_per_minute for k, r in rates.items()} == {
        KEY: pytest.approx(1.0), ("codex", "gpt-5-codex"): pytest.approx(3.0),
        ("claude_code", "claude-sonnet-4-5"): pytest.approx(3.0)}


def test_a_session_shorter_than_a_minute_counts_one_minute():
    # One ledger entry spans zero time; without the floor it would project an infinite rate.
    assert rate_of(burn_rates([spend("a", 2, 0)])) == 2.0
    assert rate_of(burn_rates([spend("a", 2, 0.25)])) == 2.0


def test_a_long_session_outweighs_a_short_burst():
    # Duration-weighted: $10 in 1 min and $60 in 60 min is 70/61 $/min, not the mean of the
    # per-session rates (5.5 $/min), which one short burst would dominate.
    rate = rate_of(burn_rates([spend("a", 10, 1), spend("b", 60, 60)]))
    assert rate == pytest.approx(70 / 61)


def test_burn_rate_recompute_is_deterministic_on_ties():
    same_end = [spend(f"s{i:02d}", float(i), 1) for i in range(30)]
    assert burn_rates(same_end) == burn_rates(list(reversed(same_end)))


def test_burn_rate_inputs_are_validated():
    assert burn_rates([]) == {}
    with pytest.raises(ValueError):
        burn_rates([spend("a", 1, 1)], per_combination=0)
    with pytest.raises(ValueError):
        SessionSpend("a", "h", "m", 1.0, NOW, NOW - M)
    with pytest.raises(ValueError):
        spend("a", -1, 1)


@given(st.floats(0, 1000), st.floats(0, 600), st.integers(1, 40))
def test_burn_rate_of_identical_sessions_equals_their_individual_rate(dollars, minutes, n):
    sessions = [spend(f"s{i}", dollars, minutes, end_min=-i) for i in range(n)]
    assert rate_of(burn_rates(sessions)) == pytest.approx(dollars / max(1, minutes))


# ---- calibration ------------------------------------------------------------------------------

def test_first_observation_is_taken_as_is():
    assert calibrate(None, 50.0, 0.25) == pytest.approx(200.0)


def test_later_observations_are_smoothed():
    assert calibrate(200.0, 100.0, 0.25) == pytest.approx(200 + 0.3 * (400 - 200))
    assert calibrate(200.0, 100.0, 0.25, alpha=1.0) == pytest.approx(400)


def test_before_the_first_calibration_there_is_no_dollar_figure():
    # No measurable spend or utilization yet: "not calibrated", never $0.00.
    assert calibrate(None, 0.0, 0.5) is None
    assert calibrate(None, 5.0, 0.0) is None
    assert calibrate(None, 5.0, 0.019) is None


def test_unmeasurable_observation_keeps_the_estimate():
    assert calibrate(300.0, 0.0, 0.5) == 300.0
    assert calibrate(300.0, 0.05, 0.001) == 300.0
    assert calibrate(300.0, 5.0, 0.02) == pytest.approx(300 + 0.3 * (250 - 300))


@pytest.mark.parametrize("kwargs", [dict(previous=None, own_spend_dollars=-1, pool_utilization=0.5),
                                    dict(previous=None, own_spend_dollars=1, pool_utilization=1.5),
                                    dict(previous=None, own_spend_dollars=1, pool_utilization=float("nan")),
                                    dict(previous=0.0, own_spend_dollars=1, pool_utilization=0.5),
                                    dict(previous=None, own_spend_dollars=1, pool_utilization=0.5, alpha=0)])
def test_calibration_inputs_are_validated(kwargs):
    with pytest.raises(ValueError):
        calibrate(**kwargs)


@given(st.one_of(st.none(), st.floats(0.01, 1e6)), st.floats(0, 1e4), st.floats(0, 0.0199))
def test_calibration_ignores_unmeasurable_windows(previous, spend_, util):
    assert calibrate(previous, spend_, util) == previous


@given(st.one_of(st.none(), st.floats(0.01, 1e6)), st.floats(0.01, 1e4), st.floats(0.02, 1))
def test_calibration_lies_between_estimate_and_observation_and_is_never_zero(previous, spend_, util):
    result = calibrate(previous, spend_, util)
    observed = spend_ / util
    assert result is not None and result > 0
    lo, hi = sorted((observed, observed if previous is None else previous))
    assert lo - 1e-9 * hi <= result <= hi + 1e-9 * hi


# ---- staleness sampler ------------------------------------------------------------------------

def ago(minutes: float) -> datetime:
    return NOW - minutes * M


def test_serving_every_tick_plus_two_stalest_others():
    newest = {"serving": ago(1), "a": ago(61), "b": ago(200), "c": None, "d": ago(90)}
    assert accounts_to_sample("serving", newest, NOW) == ["serving", "c", "b"]


def test_serving_is_sampled_even_when_fresh_or_unknown_and_never_twice():
    assert accounts_to_sample("s", {"s": ago(0)}, NOW) == ["s"]
    assert accounts_to_sample("s", {}, NOW) == ["s"]
    assert accounts_to_sample("s", {"s": None, "a": None}, NOW) == ["s", "a"]


def test_recently_read_accounts_are_not_picked_whoever_read_them():
    # Every other writer counts: the reset checker or /inference just read these.
    assert accounts_to_sample("s", {"s": ago(5), "x": ago(2), "y": ago(59)}, NOW) == ["s"]


def test_never_read_is_stalest_and_ties_break_by_name():
    newest = {"z": None, "b": None, "a": ago(100), "c": ago(100)}
    assert spare_candidates(None, newest, NOW) == ["b", "z", "a", "c"]
    assert accounts_to_sample(None, newest, NOW) == ["b", "z"]


def test_a_failed_probe_writes_no_reading_so_the_account_stays_eligible():
    newest = {"s": ago(0), "a": ago(120), "b": ago(90), "c": ago(70)}
    assert accounts_to_sample("s", newest, NOW) == ["s", "a", "b"]
    # Next tick: "a" refused (no reading written), "b" answered.
    newest |= {"s": NOW + 15 * M, "b": NOW}
    assert accounts_to_sample("s", newest, NOW + 15 * M) == ["s", "a", "c"]


def test_candidates_list_lets_the_job_walk_past_refusals_within_the_tick_budget():
    newest = {f"a{i}": None for i in range(8)}
    assert len(spare_candidates("s", newest, NOW)) == 8
    assert MAX_PROBES_PER_TICK == 5


def test_max_spares_is_configurable_and_validated():
    newest = {"a": None, "b": None, "c": None}
    assert accounts_to_sample("s", newest, NOW, max_spares=0) == ["s"]
    assert accounts_to_sample("s", newest, NOW, max_spares=3) == ["s", "a", "b", "c"]
    with pytest.raises(ValueError):
        accounts_to_sample("s", newest, NOW, max_spares=-1)


@pytest.mark.parametrize("pool", [1, 2, 3, 5, 9])
def test_probes_a_day_are_96_plus_24_per_other_account(pool):
    # Seed 003: "96 + 24(N-1) probes a day for a pool of N while its probes answer".
    newest: dict[str, datetime | None] = {f"acct{i}": None for i in range(pool)}
    probes = 0
    for tick in range(96):
        now = NOW + tick * 15 * M
        chosen = accounts_to_sample("acct0", newest, now)
        assert len(chosen) <= 3
        probes += len(chosen)
        newest |= {a: now for a in chosen}
    assert probes == 96 + 24 * (pool - 1)


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.one_of(st.none(), st.integers(0, 500)), max_size=8),
       st.one_of(st.none(), st.sampled_from("abcdefgh")))
def test_sampler_choice_is_serving_plus_at_most_two_distinct_stale_others(ages, serving):
    newest = {k: None if v is None else ago(v) for k, v in ages.items()}
    chosen = accounts_to_sample(serving, newest, NOW)
    spares = chosen[1:] if serving is not None else chosen
    assert serving is None or chosen[0] == serving
    assert len(spares) <= 2 and len(set(chosen)) == len(chosen) and serving not in spares
    assert all(newest[a] is None or NOW - newest[a] >= 60 * M for a in spares)
