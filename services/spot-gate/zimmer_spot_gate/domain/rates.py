"""The fleet's estimated burn before calibration (seed 004, "Before the first calibration"; DESIGN
§9: before calibration F is the observed utilization rate of the pool).

It is the climb of the pooled utilization itself, not of the accounts that happened to be read
twice: the sampler reads the serving account every tick and the spares hourly, so averaging only
the accounts with two readings took the serving account's climb for the pool's, about N times
too high. Each account's climb between two moments at least `MIN_SPAN` apart counts, divided by
every account the pool averages now: one read only once climbed by nothing anyone saw.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from zimmer_spot_gate.domain.model import AccountReading, Window

# Two readings seconds apart say nothing about a rate (they once projected 373.5% in 10 minutes).
MIN_SPAN = timedelta(minutes=5)
# The span the climb is measured over, ending at the newest reading.
SPAN = timedelta(minutes=30)
# How far back an account's reading may be to stand for its value at the span's start.
LOOKBACK = SPAN + timedelta(minutes=60)


def _as_of(readings: Sequence[AccountReading], at: datetime, window: Window) -> float | None:
    """The account's utilization of `window` by its newest reading at or before `at`."""
    value = None
    for r in readings:  # oldest first
        if r.read_at > at:
            break
        w = r.windows.get(window)
        if w is not None and w.utilization == w.utilization:  # NaN is no reading
            value = min(1.0, max(0.0, w.utilization))
    return value


def observed_rates(series: Sequence[AccountReading]) -> dict[Window, float]:
    """The pool's utilization climb per minute for each window, from `series` (readings of the
    last `LOOKBACK`). From the span's start (the newest reading minus `SPAN`, or the oldest
    reading when the series is shorter) to the newest reading: each account's climb counts,
    never a fall (a reset is not negative spend), over the accounts averaged at the end. Nothing
    when the span is shorter than `MIN_SPAN`: no estimate rather than a wild one."""
    if not series:
        return {}
    by_account: dict[str, list[AccountReading]] = defaultdict(list)
    for r in series:
        by_account[r.account].append(r)
    for readings in by_account.values():
        readings.sort(key=lambda r: r.read_at)
    end = max(r.read_at for r in series)
    start = max(min(r.read_at for r in series), end - SPAN)
    minutes = (end - start).total_seconds() / 60
    if end - start < MIN_SPAN:
        return {}
    rates: dict[Window, float] = {}
    for window in Window:
        climbed, averaged = 0.0, 0
        for readings in by_account.values():
            now_value = _as_of(readings, end, window)
            if now_value is None:
                continue  # not in the pool's average of this window
            averaged += 1
            then_value = _as_of(readings, start, window)
            if then_value is not None:
                climbed += max(0.0, now_value - then_value)
        if averaged:
            rates[window] = climbed / averaged / minutes
    return rates
