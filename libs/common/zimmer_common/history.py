"""History for charts (DESIGN §9 "History for charts"): the rule every owning service keeps its
chart history by, pure. A service records one point a minute; after 7 days its minutes are folded
into one point per 15 minutes, kept for 90 days; then dropped. Each pass moves a bounded span, so
the table's size is flat over time (about 7 × 1,440 + 90 × 96 points per series) whatever the
history's age. `zimmer_common.history_store` applies this rule to a table in SQL; the tests hold
the two to the same answers.

A point is a bucket: where it starts (`at`), its resolution (1 or 15 minutes) and how many minute
samples it stands for (`samples`). Folding combines values by their kind: a level is averaged over
the samples (`mean`; a sample without a value is left out, never read as zero), a peak keeps the
highest (`max`), and a count of events adds up (`sum`). A read aggregates to a step the same way,
so a 15-minute point and the fifteen minutes it replaced read the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

FINE: Final = 1  # minutes: one point a minute ...
COARSE: Final = 15  # ... then one per 15 minutes
KEEP_FINE: Final = timedelta(days=7)
KEEP_COARSE: Final = timedelta(days=90)
# How far one retention batch reaches: a week of minutes, or 90 days of quarter hours, per series.
FOLD_SPAN: Final = timedelta(days=7)
DROP_SPAN: Final = timedelta(days=90)
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

# The steps a read may aggregate to, in minutes, and the most buckets one answer carries: an answer
# travels in one bus message (zimmer_common.byte_pages), so a span too long for its step is refused
# naming the smallest step that fits, and a read that names no step gets that step.
STEPS: Final = (1, 5, 15, 60, 240, 1440)

Aggregate = Literal["mean", "max", "sum"]


class HistoryRangeError(ValueError):
    """A read's range cannot be answered as asked; `field` names the parameter to change."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def floor_to(at: datetime, minutes: int) -> datetime:
    """The start of the `minutes`-long bucket holding `at` (buckets are aligned to the epoch, UTC)."""
    step = timedelta(minutes=minutes)
    return EPOCH + ((at - EPOCH) // step) * step


def fold_before(now: datetime) -> datetime:
    """Minute points before this instant are folded into quarter hours: 7 days back, rounded down to
    a quarter hour so a bucket is always folded whole."""
    return floor_to(now - KEEP_FINE, COARSE)


def drop_before(now: datetime) -> datetime:
    """Quarter-hour points that start before this instant are dropped: 90 days back."""
    return floor_to(now - KEEP_COARSE, COARSE)


def most_points(series: int = 1) -> int:
    """The most points per series a store holds once retention has run (a bucket still being
    written at each end counts too): the bound the tests check the table against."""
    fine = int(KEEP_FINE / timedelta(minutes=FINE)) + COARSE + 1
    coarse = int((KEEP_COARSE - KEEP_FINE) / timedelta(minutes=COARSE)) + 2
    return series * (fine + coarse)


@dataclass(frozen=True)
class Point:
    """One stored point of one series (`key`)."""

    key: Hashable
    at: datetime
    resolution: int
    samples: int
    values: Mapping[str, float | None] = field(default_factory=dict)


def combine(points: Iterable[Point], aggregates: Mapping[str, Aggregate], *, key: Hashable, at: datetime,
            resolution: int) -> Point:
    """The points of one bucket as one point: levels averaged over the samples that have a value,
    peaks the highest, counts summed."""
    points = list(points)
    values: dict[str, float | None] = {}
    for name, how in aggregates.items():
        given = [(p.values.get(name), p.samples) for p in points if p.values.get(name) is not None]
        if not given:
            values[name] = 0.0 if how == "sum" else None
        elif how == "mean":
            values[name] = sum(v * n for v, n in given) / sum(n for _, n in given)  # type: ignore[operator]  # None left out above
        elif how == "max":
            values[name] = max(v for v, _ in given)  # type: ignore[type-var]  # None left out above
        else:
            values[name] = sum(v for v, _ in given)  # type: ignore[misc]  # None left out above
    return Point(key, at, resolution, sum(p.samples for p in points), values)


def retain(points: Iterable[Point], now: datetime, aggregates: Mapping[str, Aggregate]) -> list[Point]:
    """What a full retention pass at `now` leaves (the rule `history_store.retain` applies in SQL):
    minute points before `fold_before(now)` folded into their quarter hour (with any quarter-hour
    point already there), quarter-hour points before `drop_before(now)` gone, the rest untouched.
    Sorted by key, then time, then resolution."""
    points = list(points)
    fold_at, drop_at = fold_before(now), drop_before(now)
    folding = {(p.key, floor_to(p.at, COARSE)) for p in points if p.resolution == FINE and p.at < fold_at}
    kept: list[Point] = []
    buckets: dict[tuple[Hashable, datetime], list[Point]] = defaultdict(list)
    for p in points:
        # A quarter-hour point whose minutes are being folded is folded in with them.
        if (p.resolution == FINE and p.at < fold_at) or (p.resolution == COARSE and (p.key, p.at) in folding):
            buckets[(p.key, floor_to(p.at, COARSE))].append(p)
        else:
            kept.append(p)
    for (key, at), group in buckets.items():
        kept.append(combine(group, aggregates, key=key, at=at, resolution=COARSE))
    survivors = [p for p in kept if not (p.resolution == COARSE and p.at < drop_at)]
    return sorted(survivors, key=lambda p: (str(p.key), p.at, p.resolution))


@dataclass(frozen=True)
class ReadRange:
    """A read's range as it is answered: `since` rounded down to the step, `until` (exclusive), and
    the step in minutes."""

    since: datetime
    until: datetime
    step_minutes: int

    @property
    def buckets(self) -> int:
        return buckets_between(self.since, self.until, self.step_minutes)


def buckets_between(since: datetime, until: datetime, step_minutes: int) -> int:
    """How many `step_minutes` buckets [since, until) touches, `since` aligned to the step."""
    step = timedelta(minutes=step_minutes)
    return max(0, -((floor_to(since, step_minutes) - until) // step))


def read_range(since: datetime | None, until: datetime | None, step_minutes: int | None, *, now: datetime,
               default_span: timedelta, series: int = 1, max_points: int, keep: timedelta = KEEP_COARSE
               ) -> ReadRange:
    """The range a history read answers. `until` defaults to now and reads no later than now (the
    bucket holding now is the last); `since` defaults to `default_span` before `until` and reads no
    earlier than `keep` before now (nothing older is kept). The step is the one asked for, or the
    smallest of `STEPS` whose buckets, times `series`, fit `max_points`. Raises `HistoryRangeError`
    for `since` not before `until`, a step not in `STEPS`, or a span too long for the step asked."""
    if step_minutes is not None and step_minutes not in STEPS:
        raise HistoryRangeError(f"step_minutes must be one of {', '.join(map(str, STEPS))}", "step_minutes")
    start, end = clamp_range(since, until, now=now, default_span=default_span, keep=keep)
    series = max(1, series)
    if step_minutes is None:
        step_minutes = next((s for s in STEPS if series * buckets_between(start, end, s) <= max_points), STEPS[-1])
    wanted = series * buckets_between(start, end, step_minutes)
    if wanted > max_points:
        fits = next((s for s in STEPS if series * buckets_between(start, end, s) <= max_points), None)
        hint = f"step_minutes={fits} or more" if fits else "a shorter range"
        raise HistoryRangeError(f"{wanted} points ({series} series) is more than one answer carries ({max_points}): "
                                f"ask with {hint}", "step_minutes")
    return ReadRange(floor_to(start, step_minutes), end, step_minutes)


def clamp_range(since: datetime | None, until: datetime | None, *, now: datetime, default_span: timedelta,
                keep: timedelta = KEEP_COARSE) -> tuple[datetime, datetime]:
    """[start, end) of a read as `read_range` takes it, before it is aligned to a step."""
    if since is not None and until is not None and since >= until:
        raise HistoryRangeError("since must be before until", "since")
    latest = floor_to(now, FINE) + timedelta(minutes=FINE)
    end = latest if until is None else min(until, latest)
    earliest = floor_to(now - keep, COARSE)
    start = max(earliest, since if since is not None else end - default_span)
    if start >= end:  # the range lies wholly before what is kept, or after now: nothing to read
        start = end = max(earliest, min(end, latest))
    return start, end
