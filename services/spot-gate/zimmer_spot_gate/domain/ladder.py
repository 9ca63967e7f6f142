"""The hold ladder: how long a held spot session sleeps before re-checking the gate.

Seed 004 "Consecutive holds back off" and DESIGN §9 "Hold ladder":
`min(ceiling, 10 min · 2^(k−1)) + uniform jitter [0, 60 s]`, ceilings 1 h (at_utilization_limit)
and 30 min (fleet_at_cap). Pure: the caller draws the jitter and counts the holds.
"""

from __future__ import annotations

from datetime import timedelta

from zimmer_spot_gate.domain.model import HOLD_REASONS, Reason

BASE = timedelta(minutes=10)

# The ceiling depends on why the session is held, because the two reasons clear on very
# different timescales (seed 004, the "Hold reason / Ceiling / Why" table):
CEILINGS: dict[Reason, timedelta] = {
    # A pool window comes back down over hours; re-checking more often learns nothing new,
    # and this is the reason that produces the long-lived holds.
    Reason.AT_UTILIZATION_LIMIT: timedelta(hours=1),
    # A slot frees whenever any running session ends: unpredictable and often soon.
    Reason.FLEET_AT_CAP: timedelta(minutes=30),
}

MAX_JITTER = timedelta(seconds=60)

# SpotHoldSweepJob (seed 003) puts repaired holds back on the ladder "spread over 3 minutes",
# so a sweep that finds ten stranded sessions does not re-check all ten in the same second.
REPAIR_SPREAD = timedelta(minutes=3)

# Past this many doublings every ceiling is already reached (10 min · 2^8 > 1 h); capping the
# exponent keeps a very long hold from overflowing timedelta.
_MAX_DOUBLINGS = 8


def _check_fraction(jitter_fraction: float) -> None:
    if not (isinstance(jitter_fraction, (int, float)) and 0.0 <= jitter_fraction <= 1.0):
        raise ValueError(f"jitter_fraction must be within [0, 1], got {jitter_fraction!r}")


def hold_delay(reason: Reason, hold_count: int, jitter_fraction: float) -> timedelta:
    """How long to sleep before the next re-check (seed 004, "Consecutive holds back off").

    `hold_count` is the 1-based number of consecutive holds including this one. Each
    consecutive hold doubles the interval (10m, 20m, 40m…) until the reason's ceiling clamps
    it, because a flat interval puts a fixed N / 10 min of re-check work on the queue for as
    long as the hold lasts — an arrival rate that cannot fall when the deployment struggles.

    Jitter is added AFTER the ceiling, so a population pinned at the ceiling still spreads out
    (sessions held in the same minute would otherwise re-check in the same minute forever).

    The ladder resets only when the caller says so, by passing hold_count=1: when the session
    gets through (spot_hold_* keys cleared on start) or a person restarts it.
    """
    if reason not in HOLD_REASONS:
        raise ValueError(f"{reason!r} is not a hold reason; only {sorted(HOLD_REASONS)} hold a session")
    if isinstance(hold_count, bool) or not isinstance(hold_count, int) or hold_count < 1:
        raise ValueError(f"hold_count must be an integer >= 1, got {hold_count!r}")
    _check_fraction(jitter_fraction)
    doubled = BASE * 2 ** min(hold_count - 1, _MAX_DOUBLINGS)
    return min(CEILINGS[reason], doubled) + MAX_JITTER * jitter_fraction


def repair_delay(jitter_fraction: float) -> timedelta:
    """Delay for a hold the SpotHoldSweepJob repairs: spread over 3 minutes (seed 003).

    A repaired hold lost its delayed job; it is overdue already (retry_at passed more than
    10 minutes ago), so it is not sent back up the ladder — only spread so a sweep's batch
    does not land on the queue at once.
    """
    _check_fraction(jitter_fraction)
    return REPAIR_SPREAD * jitter_fraction

