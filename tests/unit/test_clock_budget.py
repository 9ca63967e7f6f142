"""Tests for zimmer_common.clock and zimmer_common.budget (no real sleeping)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from zimmer_common.budget import BudgetExhausted, SweepBudget
from zimmer_common.clock import Clock, FrozenClock, SystemClock, utcnow

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def test_system_clock_is_aware_utc_and_monotonic() -> None:
    clock = SystemClock()
    assert isinstance(clock, Clock)
    now = clock.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert abs((utcnow() - now).total_seconds()) < 60
    a = clock.monotonic()
    assert clock.monotonic() >= a
    assert abs(a - time.monotonic()) < 60


def test_frozen_clock_advance_moves_both_readings() -> None:
    clock = FrozenClock(T0)
    assert isinstance(clock, Clock)
    assert clock.now() == T0
    m0 = clock.monotonic()
    assert clock.advance(1.5) == T0 + timedelta(seconds=1.5)
    assert clock.monotonic() == pytest.approx(m0 + 1.5)
    clock.advance(timedelta(minutes=2))
    assert clock.now() == T0 + timedelta(seconds=121.5)
    assert clock.monotonic() == pytest.approx(m0 + 121.5)


def test_frozen_clock_does_not_move_on_its_own() -> None:
    clock = FrozenClock(T0)
    assert clock.now() == clock.now() == T0
    assert clock.monotonic() == clock.monotonic()


def test_frozen_clock_set_forward_and_backwards() -> None:
    clock = FrozenClock(T0, monotonic_start=100.0)
    clock.set(T0 + timedelta(hours=1))
    assert clock.now() == T0 + timedelta(hours=1)
    assert clock.monotonic() == pytest.approx(3700.0)
    clock.set(clock.now())  # same instant is allowed
    with pytest.raises(ValueError):
        clock.set(T0)
    assert clock.now() == T0 + timedelta(hours=1)  # unchanged by the failed set
    assert clock.monotonic() == pytest.approx(3700.0)


def test_frozen_clock_rejects_negative_advance_and_naive_datetimes() -> None:
    clock = FrozenClock(T0)
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.advance(timedelta(seconds=-1))
    with pytest.raises(ValueError):
        FrozenClock(datetime(2024, 1, 1))
    with pytest.raises(ValueError):
        clock.set(datetime(2030, 1, 1))


def test_frozen_clock_normalises_to_utc() -> None:
    plus2 = timezone(timedelta(hours=2))
    clock = FrozenClock(datetime(2024, 1, 1, 14, 0, tzinfo=plus2))
    assert clock.now() == T0
    assert clock.now().utcoffset() == timedelta(0)


def test_budget_exhausts_with_frozen_clock() -> None:
    clock = FrozenClock(T0)
    budget = SweepBudget(10, clock=clock)
    assert budget.seconds == 10
    assert budget.elapsed() == 0
    assert budget.remaining() == 10
    assert not budget.exhausted()
    budget.check()

    clock.advance(4)
    assert budget.elapsed() == pytest.approx(4)
    assert budget.remaining() == pytest.approx(6)
    assert not budget.exhausted()

    clock.advance(6)
    assert budget.exhausted()
    assert budget.remaining() == 0
    with pytest.raises(BudgetExhausted) as info:
        budget.check()
    assert info.value.budget_seconds == 10
    assert info.value.elapsed == pytest.approx(10)
    assert not isinstance(info.value, TimeoutError)


def test_budget_remaining_never_negative() -> None:
    clock = FrozenClock(T0)
    budget = SweepBudget(1, clock=clock)
    clock.advance(timedelta(days=1))
    assert budget.remaining() == 0.0
    assert budget.elapsed() == pytest.approx(86400)
    assert budget.exhausted()


def test_budget_starts_at_construction() -> None:
    clock = FrozenClock(T0)
    clock.advance(100)  # time before construction must not count
    budget = SweepBudget(5, clock=clock)
    assert budget.remaining() == 5
    clock.advance(3)
    assert budget.remaining() == pytest.approx(2)


def test_zero_and_infinite_budgets() -> None:
    clock = FrozenClock(T0)
    zero = SweepBudget(0, clock=clock)
    assert zero.exhausted()
    with pytest.raises(BudgetExhausted):
        zero.check()
    forever = SweepBudget(math.inf, clock=clock)
    clock.advance(timedelta(days=365))
    assert not forever.exhausted()
    forever.check()


@pytest.mark.parametrize("bad", [-1, math.nan])
def test_budget_rejects_invalid_seconds(bad: float) -> None:
    with pytest.raises(ValueError):
        SweepBudget(bad, clock=FrozenClock(T0))


def test_budget_defaults_to_system_clock() -> None:
    budget = SweepBudget(3600)
    assert not budget.exhausted()
    assert 0 < budget.remaining() <= 3600
