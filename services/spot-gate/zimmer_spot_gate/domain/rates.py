"""The fleet's observed burn before calibration (seed 004, "Before the first calibration";
DESIGN §9: before calibration F is the observed utilization rate)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from zimmer_spot_gate.domain.model import AccountReading, Window


def observed_rates(series: Sequence[AccountReading]) -> dict[Window, float]:
    """Mean over accounts of how fast each window's utilization climbed (fraction per minute),
    from each account's oldest and newest reading in `series`. A falling or flat window counts
    as 0: a reset is not negative spend. Accounts with one reading tell nothing and are left out."""
    by_account: dict[str, list[AccountReading]] = defaultdict(list)
    for r in series:
        by_account[r.account].append(r)
    rates: dict[Window, list[float]] = defaultdict(list)
    for readings in by_account.values():
        readings.sort(key=lambda r: r.read_at)
        first, last = readings[0], readings[-1]
        minutes = (last.read_at - first.read_at).total_seconds() / 60
        if minutes <= 0:
            continue
        for window in Window:
            a, b = first.windows.get(window), last.windows.get(window)
            if a is not None and b is not None:
                rates[window].append(max(0.0, b.utilization - a.utilization) / minutes)
    return {w: sum(v) / len(v) for w, v in rates.items() if v}
