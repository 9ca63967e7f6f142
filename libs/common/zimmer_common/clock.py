"""Injectable time sources.

Code that schedules, expires or budgets work takes a :class:`Clock` instead of
calling :func:`datetime.now` / :func:`time.monotonic` directly, so tests can
drive time with :class:`FrozenClock` rather than sleeping.

Two readings are exposed on purpose:

* ``now()`` is wall-clock time (timezone-aware UTC) for timestamps that are
  stored or shown to people.
* ``monotonic()`` is for measuring intervals; it never jumps backwards when
  the system clock is adjusted, so deadlines and budgets use it.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FrozenClock", "SystemClock", "utcnow"]


@runtime_checkable
class Clock(Protocol):
    """Source of wall-clock and monotonic time."""

    def now(self) -> datetime:
        """Current wall-clock time as a timezone-aware UTC datetime."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; only differences are meaningful."""
        ...


def utcnow() -> datetime:
    """Timezone-aware current UTC time.

    Exists because ``datetime.utcnow()`` returns a *naive* datetime, which
    silently compares/serialises wrongly next to aware ones.
    """
    return datetime.now(UTC)


class SystemClock:
    """The real clock. Stateless, so one instance can be shared freely."""

    __slots__ = ()

    def now(self) -> datetime:
        return utcnow()

    def monotonic(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


def _require_aware(when: datetime, what: str) -> datetime:
    # Naive datetimes are ambiguous (local time? UTC?); refusing them here
    # catches the bug at the test that introduced it, not in a later compare.
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {when!r}")
    return when.astimezone(UTC)


class FrozenClock:
    """A clock that only moves when told to, for deterministic tests.

    Wall and monotonic time advance together, so code that mixes the two
    (e.g. records ``now()`` and checks a monotonic budget) sees a consistent
    world. Time can only move forward: a real monotonic clock never goes
    backwards, and a fake one that did would let tests pass that production
    would fail.
    """

    __slots__ = ("_now", "_monotonic")

    def __init__(self, start: datetime, *, monotonic_start: float = 0.0) -> None:
        if not math.isfinite(monotonic_start):
            raise ValueError(f"monotonic_start must be finite, got {monotonic_start!r}")
        self._now = _require_aware(start, "start")
        self._monotonic = float(monotonic_start)

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move time forward by *seconds* (a number or a timedelta).

        Returns the new ``now()`` for convenient chaining in tests.
        """
        delta = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        step = delta.total_seconds()
        if step < 0 or math.isnan(step):
            raise ValueError(f"cannot advance by a negative amount: {seconds!r}")
        self._now += delta
        self._monotonic += step
        return self._now

    def set(self, when: datetime) -> None:
        """Jump wall time to *when*; monotonic time moves by the same amount.

        Raises ValueError if *when* is earlier than the current time.
        """
        when = _require_aware(when, "when")
        if when < self._now:
            raise ValueError(
                f"FrozenClock cannot move backwards: {when.isoformat()} < {self._now.isoformat()}"
            )
        self.advance(when - self._now)

    def __repr__(self) -> str:
        return f"FrozenClock(now={self._now.isoformat()}, monotonic={self._monotonic!r})"
