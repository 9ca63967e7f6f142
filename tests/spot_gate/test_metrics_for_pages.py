"""Every number the Quotas and Costs pages show has its series (issue 10): fed one policy view and
one costs view, the spot-gate metrics carry the same figures; an uncalibrated window has no dollar
series (never $0.00) and a pool that is not blocked has no countdown."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_spot_gate.metrics import SpotMetrics


def window(name: str, calibrated: bool) -> p.WindowPosture:
    return p.WindowPosture(
        window=name, calibrated=calibrated, capacity_dollars=450.0 if calibrated else None, utilization=0.5,
        accounts_averaged=2, reserve_percent=20, reserve_dollars=90.0 if calibrated else None,
        spot_budget_dollars=360.0 if calibrated else None, spot_budget_left_dollars=135.0 if calibrated else None,
        spot_budget_left_fraction=0.3, minutes_to_reset=150, sustainable_rate=0.9, fleet_burn=0.1)


def view(unblock_at: datetime | None) -> p.PolicyView:
    return p.PolicyView(
        gating_enabled=True, max_sessions=7, accounts_in_pool=3, running={"priority": 1, "spot": 2},
        held={"fleet_at_cap": 2}, running_slots=3, windows=[window("five_hour", True), window("seven_day", False)],
        reserve_percent={"five_hour": 20.0, "seven_day": 10.0},
        decision=c.DecisionView(allowed=False, reason="at_utilization_limit", ceiling="spot_budget", sentence="Held.",
                                accounts_averaged=2, accounts_in_pool=3),
        unblock=p.UnblockView(state="countdown" if unblock_at else "not_blocked", at=unblock_at, accounts_out=2,
                              accounts_read=2, sentence="…", next_weekly_reset_at=None, accounts_week_spent=0),
        decided_for=p.DecidedFor(harness="claude_code", model="claude-opus-4", burn_per_minute=0.5),
        genesis_classes=[], triggers=[])


def test_the_pages_numbers_have_their_series() -> None:
    registry = CollectorRegistry()
    metrics = SpotMetrics(registry)
    metrics.observe(view(datetime.now(UTC) + timedelta(minutes=30)))
    metrics.observe_costs(p.CostsView(
        burn_rates=[p.BurnRateView(harness="claude_code", model="claude-sonnet-4-5", dollars_per_minute=0.25,
                                   opus_dollars_per_minute=1.25, sessions_counted=4, computed_at=datetime.now(UTC))],
        spend_five_hour_dollars=75.0, spend_seven_day_dollars=300.0, spend_five_hour_claude_dollars=70.0,
        spend_five_hour_codex_dollars=5.0, spend_seven_day_claude_dollars=280.0, spend_seven_day_codex_dollars=20.0,
        prices_per_million_tokens={},
        models=[p.ModelPricing(model="default", priced_as="claude-opus-4-1", how="unknown", note="…"),
                p.ModelPricing(model="claude-sonnet-4-5", priced_as="claude-sonnet-4-5", how="exact", note="…")]))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("zimmer_spot_pool_accounts", kind="in_pool") == 3
    assert value("zimmer_spot_pool_accounts", kind="averaged") == 2
    assert value("zimmer_spot_window_capacity_dollars", window="five_hour") == 450.0
    assert value("zimmer_spot_window_capacity_dollars", window="seven_day") is None  # not calibrated: no series
    assert value("zimmer_spot_priority_reserve_fraction", window="seven_day") == 0.1
    assert value("zimmer_spot_running_slots") == 3 and value("zimmer_spot_max_sessions") == 7
    assert 1790 <= (value("zimmer_spot_unblock_seconds") or 0) <= 1800
    assert value("zimmer_spot_spend_dollars", window="five_hour") == 75.0
    assert value("zimmer_spot_burn_rate_dollars_per_minute", harness="claude_code", model="claude-sonnet-4-5") == 0.25
    assert value("zimmer_spot_burn_rate_opus_dollars_per_minute", harness="claude_code",
                 model="claude-sonnet-4-5") == 1.25
    assert value("zimmer_spot_spend_by_account_dollars", window="seven_day", spends_against="codex") == 20.0
    assert value("zimmer_spot_spend_by_account_dollars", window="five_hour", spends_against="claude") == 70.0
    assert value("zimmer_spot_unpriced_models") == 1
    assert value("zimmer_spot_candidate_burn_rate") == 0.5

    metrics.observe(view(None))
    assert math.isnan(value("zimmer_spot_unblock_seconds") or 0.0)  # nothing to count down to
