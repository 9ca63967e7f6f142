"""The Health charts' lane history in alerts against real PostgreSQL + NATS (issue 32 #4; DESIGN §9
"History for charts"): the health monitor's check records each lane's minute, a year of minutes is
kept in a bounded and flat number of rows by the health_records_prune job, and the read aggregates
each lane to a step with its thresholds."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.handlers.lane_history import LaneHistory, lane_rows
from zimmer_alerts.service import build
from zimmer_alerts.store.history_tables import LANE_HISTORY
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import charts as ch
from zimmer_common.contracts import health as h
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.history import COARSE, floor_to, most_points
from zimmer_common.history_store import PointsGauge, count_points
from zimmer_common.settings import Environment
from zimmer_common.unit_of_work import UnitsOfWork

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def started(settings_factory: Any, check_seconds: float) -> tuple[Any, FrozenClock, LaneHistory]:
    clock = FrozenClock(T0)
    service = build(settings_factory(env=Environment.TEST), clock=clock,
                    alert_settings=AlertSettings(alert_check_seconds=3600, health_check_seconds=check_seconds))
    await service.start()
    return service, clock, LaneHistory(UnitsOfWork(service, "alerts"), clock,
                                       PointsGauge(CollectorRegistry(), "health_lanes"))


@pytest.fixture
async def alerts(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """The service with its monitor idle (its first check is an hour away): only the test writes."""
    service, clock, history = await started(settings_factory, 3600)
    try:
        yield service, clock, history
    finally:
        await service.stop()


@pytest.fixture
async def watched(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """The service with its monitor checking every 0.2 s."""
    service, clock, history = await started(settings_factory, 0.2)
    try:
        yield service, clock, history
    finally:
        await service.stop()


def lane(name: str, ready: int, age: float | None, depth: int = 50, stall: float = 600.0) -> h.LaneStatistics:
    return h.LaneStatistics(lane=name, consumers=1, ready=ready, claimed=1, pool=2, oldest_ready_age_seconds=age,
                            head_subject=None, oldest_claimed_age_seconds=None, youngest_claimed_age_seconds=None,
                            oldest_claimed_job=None, last_finished_at=None, seconds_since_last_finished=None,
                            processing_rate_per_hour=None, paused=False, depth_threshold=depth,
                            stall_age_seconds=stall, execution_ceiling_seconds=None)


def report(at: datetime, *lanes: h.LaneStatistics, readable: bool = True) -> h.HealthReport:
    return h.HealthReport(
        generated_at=at, overall_status="ok", summary="", verdict=h.QueueVerdict(status="ok", summary=""),
        queue=h.QueueStatistics(readable=readable, lanes=list(lanes)), cron=h.CronHealth(),
        workers=h.WorkerStatistics(active=0, registered=0, instances=[]),
        queue_recovery_mode=h.QueueRecoveryStatus(active=False))


async def sql(service: Any, query: str, **params: Any) -> list[Any]:
    from sqlalchemy import text

    async with service.engine.begin() as conn:
        result = await conn.execute(text(query), params)
        return list(result.all()) if result.returns_rows else []


async def test_the_monitors_check_records_every_lane_it_read(watched) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, _clock, _history = watched
    for _ in range(100):  # the monitor's loop checks every 0.2 s here; its first check records the lanes
        found = await sql(service, "SELECT lane, ready, depth_threshold, stall_age_seconds FROM alerts.lane_history")
        if found:
            break
        await asyncio.sleep(0.1)
    live = await service.bus.request(h.SYSTEM_HEALTH, h.HealthQuery())
    assert {r.lane for r in found} == {lane.lane for lane in live.queue.lanes} != set()
    for r in found:
        same = next(lane for lane in live.queue.lanes if lane.lane == r.lane)
        assert (r.depth_threshold, r.stall_age_seconds) == (same.depth_threshold, same.stall_age_seconds)
    # An unreadable JetStream leaves a gap, never a row of zeros.
    assert lane_rows(report(T0, lane("default", 3, 5.0), readable=False)) == []
    assert lane_rows(report(T0, lane("default", 0, 99.0)))[0]["oldest_ready_age_seconds"] is None


async def test_a_year_of_lane_minutes_stays_bounded_and_flat(alerts) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, clock, history = alerts
    start = floor_to(T0, COARSE)
    month = timedelta(days=30)
    counts = []
    for m in range(12):
        await sql(service, "INSERT INTO alerts.lane_history SELECT 1, 'default', t, 1, 4, 1, 30.0, 50, 600.0 "
                           "FROM generate_series(CAST(:a AS timestamptz), CAST(:b AS timestamptz) - interval '1 minute', "
                           "interval '1 minute') AS t", a=start + m * month, b=start + (m + 1) * month)
        clock.advance(start + (m + 1) * month - clock.now())
        await history.retain()
        async with service.engine.connect() as conn:
            counts.append(sum((await count_points(conn, LANE_HISTORY)).values()))
    assert max(counts) <= most_points(1) and len(set(counts[4:])) == 1, counts
    rows = await sql(service, "SELECT * FROM alerts.lane_history WHERE resolution_minutes = 15")
    assert rows and all((r.samples, r.ready, r.oldest_ready_age_seconds) == (15, 4, 30.0) for r in rows)


async def test_the_read_gives_each_lane_with_its_thresholds_and_refuses_a_step_too_fine(alerts) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, clock, history = alerts
    for minute in range(20):
        at = clock.now()
        await history.record(report(at, lane("default", minute, float(minute * 60) if minute else None),
                                    lane("ingest", 200, 5.0, depth=100, stall=60.0)))
        clock.advance(timedelta(minutes=1))
    answer = await service.bus.request(ch.GET_HEALTH_HISTORY, ch.HealthHistoryQuery(step_minutes=5))
    assert answer.step_minutes == 5 and [x.lane for x in answer.lanes] == ["default", "ingest"]
    default = answer.lanes[0].points
    assert [p.ready for p in default] == [4, 9, 14, 19]  # the peak of each five minutes
    assert default[0].oldest_ready_age_seconds == 240.0 and default[0].samples == 5
    assert {(p.depth_threshold, p.stall_age_seconds) for p in answer.lanes[1].points} == {(100, 60.0)}
    one = await service.bus.request(ch.GET_HEALTH_HISTORY, ch.HealthHistoryQuery(lane="ingest"))
    assert [x.lane for x in one.lanes] == ["ingest"] and one.step_minutes == 1
    with pytest.raises(ZimmerError) as refused:
        await service.bus.request(ch.GET_HEALTH_HISTORY, ch.HealthHistoryQuery(
            step_minutes=1, since=clock.now() - timedelta(days=30)))
    assert refused.value.code is ErrorCode.INVALID and refused.value.details["field"] == "step_minutes"


async def test_health_records_prune_keeps_the_lane_history_flat(alerts) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The job the schedule ticks (health_records_prune) folds the lanes' week-old minutes too."""
    service, _clock, _history = alerts
    old = floor_to(T0 - timedelta(days=8), COARSE)
    await sql(service, "INSERT INTO alerts.lane_history SELECT 1, 'default', t, 1, 2, 0, NULL, 100, 600.0 "
                       "FROM generate_series(CAST(:a AS timestamptz), CAST(:a AS timestamptz) + interval '14 minutes', "
                       "interval '1 minute') AS t", a=old)
    await service.runner.enqueue("health_records_prune")
    for _ in range(200):
        rows = await sql(service, "SELECT resolution_minutes, samples FROM alerts.lane_history")
        if [tuple(r) for r in rows] == [(15, 15)]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not folded: {rows}")


async def test_a_lane_first_recorded_during_a_read_does_not_overflow_its_step(alerts, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The step is chosen from how many lanes there are; the rows read after it must be of those
    lanes only (CI once answered two lanes at a one-minute step that fits one: a lane's first minute
    committed between the count and the rows)."""
    from zimmer_alerts.handlers import lane_history

    service, clock, history = alerts
    await history.record(report(clock.now(), lane("default", 1, 5.0)))
    counted = lane_history.series_in

    async def a_lane_arrives_after_the_count(*args: Any, **kwargs: Any) -> Any:
        found = await counted(*args, **kwargs)
        await history.record(report(clock.now(), lane("ingest", 2, 5.0)))  # its own transaction, committed
        return found

    monkeypatch.setattr(lane_history, "series_in", a_lane_arrives_after_the_count)
    answer = await history.read(ch.HealthHistoryQuery())
    assert len(answer.lanes) * (24 * 60 // answer.step_minutes + 1) <= ch.SERIES_MAX_POINTS, \
        (answer.step_minutes, [x.lane for x in answer.lanes])
    assert [x.lane for x in answer.lanes] == ["default"]
