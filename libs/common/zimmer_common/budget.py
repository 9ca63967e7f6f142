"""Wall-clock budgets for sweeps and other open-ended loops.

A sweep walks an unknown amount of work; without a budget one slow run can
overlap the next scheduled one. Callers create a :class:`SweepBudget` at the
start and poll it between items::

    budget = SweepBudget(300)
    for item in items:
        budget.check()          # raises BudgetExhausted once time is up
        await process(item, timeout=min(30, budget.remaining()))

Time is read from an injectable :class:`~zimmer_common.clock.Clock` (its
monotonic reading, so system clock adjustments cannot stretch or cut a sweep)
which lets tests exhaust a budget without sleeping.
"""

from __future__ import annotations

import math

from zimmer_common.clock import Clock, SystemClock

__all__ = ["BudgetExhausted", "SweepBudget"]

# Stateless, so sharing one default instance between budgets is safe.
_SYSTEM_CLOCK = SystemClock()


class BudgetExhausted(Exception):
    """Raised by :meth:`SweepBudget.check` once the budget is used up.

    Deliberately not a ``TimeoutError``: generic timeout handlers around
    individual operations should not swallow "the whole sweep is over".
    """

    def __init__(self, budget_seconds: float, elapsed: float) -> None:
        self.budget_seconds = budget_seconds
        self.elapsed = elapsed
        super().__init__(f"budget of {budget_seconds:.1f}s exhausted after {elapsed:.1f}s")


class SweepBudget:
    """A fixed amount of time, started on construction."""

    __slots__ = ("_seconds", "_clock", "_started")

    def __init__(self, seconds: float, clock: Clock = _SYSTEM_CLOCK) -> None:
        # inf is allowed (an "unlimited" budget keeps call sites uniform);
        # NaN would make every comparison False and silently never exhaust.
        if math.isnan(seconds) or seconds < 0:
            raise ValueError(f"budget seconds must be >= 0, got {seconds!r}")
        self._seconds = float(seconds)
        self._clock = clock
        self._started = clock.monotonic()

    @property
    def seconds(self) -> float:
        """The total budget this instance was created with."""
        return self._seconds

    def elapsed(self) -> float:
        """Seconds since construction (never negative)."""
        return max(0.0, self._clock.monotonic() - self._started)

    def remaining(self) -> float:
        """Seconds left, clamped at 0 so it can be passed straight on as a timeout."""
        return max(0.0, self._seconds - self.elapsed())

    def exhausted(self) -> bool:
        """True once no time remains (a zero budget is exhausted immediately)."""
        return self.elapsed() >= self._seconds

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` if the budget is used up."""
        elapsed = self.elapsed()
        if elapsed >= self._seconds:
            raise BudgetExhausted(self._seconds, elapsed)

    def __repr__(self) -> str:
        return f"SweepBudget(seconds={self._seconds!r}, remaining={self.remaining():.3f})"
