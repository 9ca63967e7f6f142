"""The charts' history answers fit one bus message (issue 32 #4; zimmer_common.byte_pages): the largest
answer each read may give (every point it allows, each field at its longest) is under the rows' budget
of one answer, so a read never fails for its size."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES
from zimmer_common.contracts import charts as ch
from zimmer_common.contracts.fields import NAME_MAX

AT = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
LONG = 1 / 3 * 123456  # a float whose JSON takes its full width
BIG = 2**31 - 1


def size(answer: ch.HistoryAnswer) -> int:
    return len(answer.model_dump_json())


def test_the_largest_pool_answer_fits() -> None:
    point = ch.PoolHistoryPoint(at=AT, samples=BIG, utilization=1 / 3, pacing=1 / 7, reserve=1 / 9,
                                spot_budget=1 - 1 / 9, capacity_dollars=LONG, running=BIG, held=BIG, paused=BIG,
                                holds=BIG, pauses=BIG, resumes=BIG)
    answer = ch.PoolHistory(window="seven_day", since=AT, until=AT, step_minutes=1440,
                            points=[point] * ch.POOL_MAX_POINTS)
    assert size(answer) <= ANSWER_ROWS_MAX_BYTES, size(answer)


def test_the_largest_lanes_answer_fits() -> None:
    point = ch.LanePoint(at=AT, samples=BIG, ready=BIG, claimed=BIG, oldest_ready_age_seconds=LONG,
                         depth_threshold=BIG, stall_age_seconds=LONG)
    # As many lanes as points: each lane named at the longest a name may be, with one point.
    answer = ch.HealthHistory(since=AT, until=AT, step_minutes=1440, lanes=[
        ch.LaneHistory(lane="l" * NAME_MAX, points=[point]) for _ in range(ch.SERIES_MAX_POINTS // 25)] + [
        ch.LaneHistory(lane="ingest", points=[point] * (ch.SERIES_MAX_POINTS - ch.SERIES_MAX_POINTS // 25))])
    assert size(answer) <= ANSWER_ROWS_MAX_BYTES, size(answer)


def test_the_largest_costs_answer_fits() -> None:
    point = ch.SpendPoint(at=AT, dollars=LONG, dollars_per_minute=LONG / 7)
    per_model = ch.SERIES_MAX_POINTS // ch.MAX_MODELS
    answer = ch.CostsHistory(since=AT, until=AT + timedelta(days=1), step_minutes=1, models=[
        ch.ModelSpend(harness="h" * NAME_MAX, model="m" * NAME_MAX, spends_against="claude", dollars=LONG,
                      points=[point] * per_model) for _ in range(ch.MAX_MODELS)], models_left_out=BIG)
    assert size(answer) <= ANSWER_ROWS_MAX_BYTES, size(answer)
