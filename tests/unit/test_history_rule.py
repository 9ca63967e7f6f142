"""The chart history's rule (DESIGN §9 "History for charts"; zimmer_common.history), pure: one point a
minute for 7 days, then one per 15 minutes for 90 days, so the kept size is bounded whatever the
history's age; folding loses no sample and no event; a pass is idempotent and passes compose; and
a read's range and step always fit one answer."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zimmer_common.contracts.charts import StepMinutes
from zimmer_common.history import (
    COARSE,
    FINE,
    KEEP_COARSE,
    KEEP_FINE,
    STEPS,
    HistoryRangeError,
    Point,
    buckets_between,
    drop_before,
    floor_to,
    fold_before,
    most_points,
    read_range,
    retain,
)

NOW = datetime(2027, 3, 1, 12, 7, 30, tzinfo=UTC)
AGG = {"level": "mean", "peak": "max", "events": "sum"}
YEAR_MINUTES = 366 * 24 * 60


def minute_point(key: str, minutes_ago: int, level: float | None, peak: float, events: float) -> Point:
    return Point(key, floor_to(NOW, FINE) - timedelta(minutes=minutes_ago), FINE, 1,
                 {"level": level, "peak": peak, "events": events})


points = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, YEAR_MINUTES),
              st.one_of(st.none(), st.floats(0, 1)), st.floats(0, 50), st.integers(0, 5).map(float)),
    max_size=120, unique_by=lambda t: (t[0], t[1]),
).map(lambda rows: [minute_point(*r) for r in rows])


def weighted(ps: list[Point], name: str) -> float:
    return sum((p.values[name] or 0.0) * p.samples for p in ps if p.values.get(name) is not None)


@given(points)
def test_what_a_pass_keeps_is_fine_for_a_week_coarse_for_90_days_and_nothing_older(ps: list[Point]) -> None:
    kept = retain(ps, NOW, AGG)
    for p in kept:
        if p.resolution == FINE:
            assert p.at >= fold_before(NOW), p
        else:
            assert p.resolution == COARSE and drop_before(NOW) <= p.at < fold_before(NOW), p
            assert p.at == floor_to(p.at, COARSE) and 1 <= p.samples <= COARSE
    # What is inside the week is untouched, point for point.
    recent = sorted((p for p in ps if p.at >= fold_before(NOW)), key=lambda p: (p.key, p.at))
    assert sorted((p for p in kept if p.resolution == FINE), key=lambda p: (p.key, p.at)) == recent
    assert len([p for p in kept if p.key == "a"]) <= most_points(1)


@given(points)
@example([minute_point("b", 46 * 24 * 60, 1.0, 0.0, 0.0), minute_point("b", 46 * 24 * 60 + 1, None, 0.0, 0.0)])
def test_folding_loses_no_sample_event_or_level_of_what_it_keeps(ps: list[Point]) -> None:
    kept = retain(ps, NOW, AGG)
    survivors = [p for p in ps if floor_to(p.at, COARSE) >= drop_before(NOW)]
    for key in ("a", "b"):
        before = [p for p in survivors if p.key == key]
        after = [p for p in kept if p.key == key]
        assert sum(p.samples for p in after) == len(before)
        assert sum(p.values["events"] or 0 for p in after) == sum(p.values["events"] or 0 for p in before)
        if all(p.values["level"] is not None for p in before):  # every sample has a level: its weighted sum stays
            assert math.isclose(weighted(after, "level"), weighted(before, "level"), rel_tol=1e-9, abs_tol=1e-9)
        for q in after:
            if q.resolution == COARSE:
                bucket = [p for p in before if floor_to(p.at, COARSE) == q.at]
                assert q.values["peak"] == max(p.values["peak"] for p in bucket)
                # A level is averaged over the samples that have one; a sample without is left out,
                # never read as zero (hypothesis found the weighted sum wrong for those: 1 and None
                # fold to a level of 1 over 2 samples, as the rule says).
                levels = [p.values["level"] for p in bucket if p.values["level"] is not None]
                assert (q.values["level"] is None) == (not levels)
                if levels:
                    assert math.isclose(q.values["level"], sum(levels) / len(levels), rel_tol=1e-9, abs_tol=1e-9)


@given(points, st.integers(0, 200 * 24 * 60))
def test_a_pass_is_idempotent_and_passes_at_two_moments_make_one(ps: list[Point], later_minutes: int) -> None:
    once = retain(ps, NOW, AGG)
    assert retain(once, NOW, AGG) == once
    later = NOW + timedelta(minutes=later_minutes)
    stepwise, direct = retain(once, later, AGG), retain(ps, later, AGG)
    assert [(p.key, p.at, p.resolution, p.samples) for p in stepwise] == \
        [(p.key, p.at, p.resolution, p.samples) for p in direct]
    for a, b in zip(stepwise, direct, strict=True):
        assert a.values["events"] == b.values["events"] and a.values["peak"] == b.values["peak"]
        assert (a.values["level"] is None) == (b.values["level"] is None)
        if a.values["level"] is not None:
            assert math.isclose(a.values["level"], b.values["level"], rel_tol=1e-9, abs_tol=1e-12)


def test_a_year_of_minutes_is_kept_in_a_bounded_number_of_points() -> None:
    ps = [minute_point("a", m, 0.5, 1.0, 1.0) for m in range(0, YEAR_MINUTES, 7)]  # one a week's worth sparse
    dense = [minute_point("a", m, 0.5, 1.0, 1.0) for m in range(0, 8 * 24 * 60)]  # and the newest 8 days whole
    sparse = {p.at for p in ps}
    kept = retain(ps + [p for p in dense if p.at not in sparse], NOW, AGG)
    fine = [p for p in kept if p.resolution == FINE]
    coarse = [p for p in kept if p.resolution == COARSE]
    assert len(fine) <= KEEP_FINE // timedelta(minutes=1) + COARSE
    assert len(coarse) <= (KEEP_COARSE - KEEP_FINE) // timedelta(minutes=COARSE) + 2
    assert len(kept) <= most_points(1) == 7 * 1440 + 16 + 83 * 96 + 2


spans = st.tuples(st.integers(-200 * 24 * 60, 24 * 60), st.integers(1, 400 * 24 * 60))


@given(spans, st.one_of(st.none(), st.sampled_from(STEPS)), st.integers(1, 12), st.sampled_from([1500, 3000]))
@settings(max_examples=300)
def test_a_read_range_always_fits_one_answer_or_says_which_step_would(span: tuple[int, int], step: int | None,
                                                                      series: int, max_points: int) -> None:
    end_offset, length = span
    until = NOW + timedelta(minutes=end_offset)
    since = until - timedelta(minutes=length)
    try:
        r = read_range(since, until, step, now=NOW, default_span=timedelta(hours=5), series=series,
                       max_points=max_points)
    except HistoryRangeError as exc:
        assert step is not None and exc.field == "step_minutes"
        assert "step_minutes=" in str(exc) or "shorter range" in str(exc)
        return
    assert r.step_minutes in STEPS and (step is None or r.step_minutes == step)
    assert r.since <= r.until <= floor_to(NOW, 1) + timedelta(minutes=1)
    assert r.since >= floor_to(NOW - KEEP_COARSE, COARSE) - timedelta(minutes=r.step_minutes)
    assert r.since == floor_to(r.since, r.step_minutes)
    assert series * r.buckets <= max_points


def test_read_range_defaults_and_refusals() -> None:
    five = read_range(None, None, None, now=NOW, default_span=timedelta(hours=5), max_points=1500)
    assert (five.step_minutes, five.buckets) == (1, 300)  # five hours of minutes, the last the one holding now
    week = read_range(None, None, None, now=NOW, default_span=timedelta(days=7), max_points=1500)
    assert week.step_minutes == 15 and week.buckets <= 1500
    with pytest.raises(HistoryRangeError) as refused:
        read_range(None, None, 1, now=NOW, default_span=timedelta(days=7), max_points=1500)
    assert refused.value.field == "step_minutes" and "step_minutes=15 or more" in str(refused.value)
    with pytest.raises(HistoryRangeError) as backwards:
        read_range(NOW, NOW - timedelta(hours=1), None, now=NOW, default_span=timedelta(hours=5), max_points=10)
    assert backwards.value.field == "since"
    with pytest.raises(HistoryRangeError):
        read_range(None, None, 7, now=NOW, default_span=timedelta(hours=5), max_points=10)
    # Before anything is kept, or after now: an empty range, never an error.
    old = read_range(datetime(1971, 1, 1, tzinfo=UTC), datetime(1971, 1, 2, tzinfo=UTC), None, now=NOW,
                     default_span=timedelta(hours=5), max_points=1500)
    assert old.since >= floor_to(NOW - KEEP_COARSE, COARSE) - timedelta(minutes=old.step_minutes)
    assert buckets_between(old.since, old.until, old.step_minutes) <= 1
    future = read_range(datetime(9000, 1, 1, tzinfo=UTC), datetime(9998, 1, 1, tzinfo=UTC), 1, now=NOW,
                        default_span=timedelta(hours=5), max_points=10)
    assert future.buckets <= 1


def test_the_contract_states_the_steps_the_rule_takes() -> None:
    assert get_args(StepMinutes) == STEPS
