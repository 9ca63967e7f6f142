"""Seed 004 "Consecutive holds back off" and DESIGN §9 "Hold ladder"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.ladder import (
    BASE,
    CEILINGS,
    MAX_JITTER,
    REPAIR_SPREAD,
    hold_delay,
    repair_delay,
)
from zimmer_spot_gate.domain.model import HOLD_REASONS, Reason

UTIL, CAP = Reason.AT_UTILIZATION_LIMIT, Reason.FLEET_AT_CAP
M = timedelta(minutes=1)


def test_constants_match_design():
    assert BASE == 10 * M and MAX_JITTER == timedelta(seconds=60) and REPAIR_SPREAD == 3 * M
    assert CEILINGS == {UTIL: timedelta(hours=1), CAP: 30 * M}
    assert set(CEILINGS) == HOLD_REASONS


def test_utilization_ladder_runs_10_20_40_60_60():
    assert [hold_delay(UTIL, k, 0.0) for k in range(1, 7)] == [10 * M, 20 * M, 40 * M, 60 * M, 60 * M, 60 * M]


def test_fleet_cap_ladder_runs_10_20_30_30():
    assert [hold_delay(CAP, k, 0.0) for k in range(1, 6)] == [10 * M, 20 * M, 30 * M, 30 * M, 30 * M]


def test_jitter_is_added_after_the_ceiling_so_a_pinned_population_still_spreads():
    assert hold_delay(UTIL, 9, 1.0) == 60 * M + MAX_JITTER
    assert hold_delay(CAP, 9, 0.5) == 30 * M + timedelta(seconds=30)
    pinned = {hold_delay(UTIL, 20, j / 10) for j in range(11)}
    assert len(pinned) == 11


def test_sessions_held_in_the_same_minute_recheck_at_different_times():
    # Without jitter they would re-check in the same minute forever, all reading the same fleet.
    delays = [hold_delay(CAP, 1, j) for j in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert len(set(delays)) == 5 and max(delays) - min(delays) == MAX_JITTER


@pytest.mark.parametrize("reason", sorted(HOLD_REASONS))
def test_a_reset_ladder_starts_again_at_ten_minutes(reason):
    # The session got through, or a person restarted it: the caller passes hold_count=1 again,
    # so the next outage begins at ten minutes rather than resuming where the last left off.
    assert hold_delay(reason, 1, 0.0) == BASE


def test_a_very_long_hold_stays_at_the_ceiling():
    assert hold_delay(UTIL, 10_000, 0.0) == 60 * M
    assert hold_delay(CAP, 10**9, 0.0) == 30 * M


@pytest.mark.parametrize("reason", [Reason.WITHIN_LIMITS, Reason.NO_SNAPSHOT, Reason.GATING_DISABLED, Reason.UNAVAILABLE])
def test_only_hold_reasons_have_a_ladder(reason):
    with pytest.raises(ValueError, match="not a hold reason"):
        hold_delay(reason, 1, 0.0)


@pytest.mark.parametrize("count", [0, -1, 1.5, True])
def test_hold_count_is_one_based(count):
    with pytest.raises(ValueError, match="hold_count"):
        hold_delay(UTIL, count, 0.0)


@pytest.mark.parametrize("fraction", [-0.01, 1.01, float("nan"), float("inf")])
def test_jitter_fraction_is_validated(fraction):
    with pytest.raises(ValueError, match="jitter_fraction"):
        hold_delay(UTIL, 1, fraction)
    with pytest.raises(ValueError, match="jitter_fraction"):
        repair_delay(fraction)


def _rechecks_per_minute(reason: Reason, held: int, hours: int) -> float:
    """Re-check arrivals in the last hour of a hold that has lasted `hours`, jitter at midpoint."""
    times: list[timedelta] = []
    for s in range(held):
        t, k = timedelta(0), 1
        while t < timedelta(hours=hours):
            t += hold_delay(reason, k, s / max(1, held - 1))
            k += 1
            times.append(t)
    last_hour = [t for t in times if timedelta(hours=hours - 1) <= t < timedelta(hours=hours)]
    return len(last_hour) / 60


def test_back_off_lets_the_arrival_rate_of_a_long_hold_fall():
    # 2026-08-20: ~80 held sessions at a flat ~11 minutes put a standing ~8 jobs/min on the agents
    # queue. With the ladder the standing rate falls to about one re-check per session per hour.
    flat = 80 / 11
    pinned = _rechecks_per_minute(UTIL, 80, hours=6)
    assert flat > 7
    assert pinned <= 80 / 60 + 0.1
    assert _rechecks_per_minute(CAP, 80, hours=6) <= 80 / 30 + 0.1


def test_sleep_is_bounded_by_the_ceiling_plus_jitter():
    # The cost is real but bounded: never more than the ceiling (plus jitter) past a clearing.
    for reason, ceiling in CEILINGS.items():
        assert max(hold_delay(reason, k, 1.0) for k in range(1, 50)) == ceiling + MAX_JITTER


def test_repair_spreads_over_three_minutes():
    assert repair_delay(0.0) == timedelta(0)
    assert repair_delay(1.0) == REPAIR_SPREAD
    assert repair_delay(0.5) == timedelta(seconds=90)


@given(st.sampled_from(sorted(HOLD_REASONS)), st.integers(1, 200), st.floats(0, 1))
def test_ladder_is_non_decreasing_and_bounded(reason, k, jitter):
    here, nxt = hold_delay(reason, k, jitter), hold_delay(reason, k + 1, jitter)
    assert nxt >= here
    assert BASE <= here <= CEILINGS[reason] + MAX_JITTER


@given(st.sampled_from(sorted(HOLD_REASONS)), st.integers(1, 200), st.floats(0, 1), st.floats(0, 1))
def test_more_jitter_never_shortens_the_delay(reason, k, a, b):
    lo, hi = sorted((a, b))
    assert hold_delay(reason, k, lo) <= hold_delay(reason, k, hi)


@given(st.floats(0, 1))
def test_repair_delay_stays_in_its_spread(j):
    assert timedelta(0) <= repair_delay(j) <= REPAIR_SPREAD
