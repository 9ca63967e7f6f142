"""When the stranded alert pages (seed 000, "The alert has to reach a human more than once").

A page costs a real step change in one of two coarse numbers, the weeks the oldest unresolved row
has waited and the row count's step, and the band it went out for is remembered as a high-water
mark that expires after ALERT_BAND_TTL. So 21 rows whose oldest is 9 days old page at once, stay
quiet for five days and page again at 14 days; a count climbing past 50 pages without waiting for
the week; a count flickering 49 ↔ 50 does not page hourly; and after triage the mark expires
rather than silencing the remainder for weeks. Pure: the sweep stores the mark and sends the page.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

ALERT_AFTER = timedelta(days=7)
ALERT_BAND_TTL = timedelta(days=7)
ALERT_ROW_BANDS = (1, 10, 25, 50, 100, 250, 500, 1000)


@dataclass(frozen=True, order=True)
class Band:
    weeks: int  # whole multiples of ALERT_AFTER the oldest row has waited
    rows: int  # the highest step of ALERT_ROW_BANDS the count has reached

    def describe(self) -> str:
        return f"{self.weeks} week{'s' * (self.weeks != 1)}, {self.rows}+ row{'s' * (self.rows != 1)}"


@dataclass(frozen=True)
class Mark:
    band: Band
    expires_at: datetime


def band_of(count: int, oldest_age: timedelta) -> Band | None:
    """None while nothing is stranded or the oldest row has not passed ALERT_AFTER."""
    if count <= 0 or oldest_age <= ALERT_AFTER:
        return None
    return Band(int(oldest_age / ALERT_AFTER), ALERT_ROW_BANDS[bisect.bisect_right(ALERT_ROW_BANDS, count) - 1])


@dataclass(frozen=True)
class Decision:
    page: Band | None  # the band to page for, or None: say nothing
    mark: Mark | None  # the mark to keep from now on (None: forget it)


def decide(count: int, oldest_age: timedelta, mark: Mark | None, now: datetime) -> Decision:
    """One pass's alert decision. An empty population forgets its band (the next population starts
    from its first week); an expired mark is no mark."""
    if count <= 0:
        return Decision(None, None)
    live = mark if mark is not None and mark.expires_at > now else None
    band = band_of(count, oldest_age)
    if band is None:
        return Decision(None, live)
    if live is not None and band.weeks <= live.band.weeks and band.rows <= live.band.rows:
        return Decision(None, live)
    high = band if live is None else Band(max(band.weeks, live.band.weeks), max(band.rows, live.band.rows))
    return Decision(band, Mark(high, now + ALERT_BAND_TTL))
