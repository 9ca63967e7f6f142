"""The Quotas and Costs charts' history in spot-gate against real PostgreSQL + NATS (issue 32 #4;
DESIGN §9 "History for charts"): the minute's point holds what the policy view reads and the events
since the point before; a year of minutes is kept in a bounded, flat number of rows; the SQL folds
as the pure rule does; the reads aggregate to a step and refuse what one answer cannot carry."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from zimmer_common.contracts import charts as ch
from zimmer_common.contracts.runtime import SpendReport
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.history import COARSE, FINE, Point, floor_to, most_points, retain
from zimmer_common.history_store import PointsGauge, count_points
from zimmer_spot_gate.handlers.history import PoolHistoryOps
from zimmer_spot_gate.store.history_tables import POOL_HISTORY

MONTH = timedelta(days=30)


def ops(spot) -> PoolHistoryOps:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    from prometheus_client import CollectorRegistry

    return PoolHistoryOps(spot.app.units, spot.clock.now, PointsGauge(CollectorRegistry(), "spot_pool"))


async def rows(spot, window: str = "five_hour") -> list:  # type: ignore[no-untyped-def, type-arg]  # fixture values are untyped; SQL rows
    return await spot.sql("SELECT * FROM spot_gate.pool_history WHERE window_name = :w ORDER BY resolution_minutes, at",
                          w=window)


async def test_a_minute_holds_the_pool_the_policy_view_reads_and_the_events_since_the_point_before(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    history = ops(spot)
    await spot.readings((0.5, 0.3), (0.7, 0.3), resets_in_minutes=120)  # 3 h of the 5 elapsed
    assert await history.record() == 2  # one row per window
    assert await history.record() == 0  # a second tick (another replica) in the same minute adds nothing
    [five] = await rows(spot)
    assert five.utilization == pytest.approx(0.6) and five.reserve == pytest.approx(0.2)
    assert five.pacing == pytest.approx(0.8 * 180 / 300)  # (1 - reserve) x elapsed / length
    assert (five.capacity_dollars, five.running, five.held, five.paused) == (None, 0, 0, 0)
    assert (five.holds, five.pauses, five.resumes, five.samples) == (0, 0, 0, 1)

    await spot.sql("INSERT INTO spot_gate.sessions (genesis) VALUES ('api')")
    [[session_id]] = await spot.sql("SELECT max(id) FROM spot_gate.sessions")
    now = spot.clock.now()
    for event, allowed, seconds in (("turn", False, 5), ("turn", False, 30), ("turn", True, 31),
                                    ("ceiling_pause", False, 40), ("ceiling_resume", True, 50),
                                    ("ceiling_resume", False, 55)):
        await spot.sql("INSERT INTO spot_gate.gate_decisions (session_id, allowed, reason, sentence, numbers, "
                       "decided_at, event) VALUES (:s, :a, 'at_utilization_limit', '', '{}', :at, :e)",
                       s=session_id, a=allowed, at=now + timedelta(seconds=seconds), e=event)
    spot.clock.advance(timedelta(minutes=1))
    assert await history.record() == 2
    newest = (await rows(spot))[-1]
    assert (newest.holds, newest.pauses, newest.resumes) == (2, 1, 1)  # counted once, on the point after them
    spot.clock.advance(timedelta(minutes=3))  # a late tick: the events between are still counted once
    await history.record()
    assert [(r.holds, r.pauses) for r in await rows(spot)] == [(0, 0), (2, 1), (0, 0)]
    answer = await spot.bus.request(ch.GET_POOL_HISTORY, ch.PoolHistoryQuery(window="five_hour"))
    assert answer.step_minutes == 1 and [p.holds for p in answer.points] == [0, 2, 0]
    assert answer.points[0].spot_budget == pytest.approx(0.8) and answer.points[0].utilization == pytest.approx(0.6)


async def test_a_year_of_minutes_stays_bounded_and_flat(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Twelve months of a point a minute, retention after each: the rows never pass the bound, and
    once the oldest are 90 days gone the count stops growing."""
    history = ops(spot)
    start = floor_to(spot.clock.now(), COARSE)
    counts = []
    for month in range(12):
        await spot.sql(
            "INSERT INTO spot_gate.pool_history (resolution_minutes, window_name, at, samples, utilization, pacing, "
            "reserve, capacity_dollars, running, held, paused, holds, pauses, resumes) "
            "SELECT 1, 'five_hour', t, 1, 0.5, 0.4, 0.2, NULL, 3, 1, 0, 1, 0, 0 "
            "FROM generate_series(CAST(:a AS timestamptz), CAST(:b AS timestamptz) - interval '1 minute', "
            "interval '1 minute') AS t", a=start + month * MONTH, b=start + (month + 1) * MONTH)
        spot.clock.advance(start + (month + 1) * MONTH - spot.clock.now())
        done = await history.retain()
        assert not done.more
        async with spot.service.engine.connect() as conn:
            counts.append(sum((await count_points(conn, POOL_HISTORY)).values()))
    assert max(counts) <= most_points(1)
    assert len(set(counts[4:])) == 1, counts  # past 90 days: flat
    kept = await rows(spot)
    coarse = [r for r in kept if r.resolution_minutes == COARSE]
    assert coarse and all(r.samples == 15 and r.holds == 15 and r.utilization == pytest.approx(0.5) for r in coarse)
    assert min(r.at for r in kept) >= spot.clock.now() - timedelta(days=90, minutes=15)
    assert history.gauge is not None
    assert history.gauge.gauge.labels("spot_pool", "1m")._value.get() == 7 * 1440  # the metric says the same


async def test_the_sql_folds_as_the_rule_does(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    history = ops(spot)
    now = spot.clock.now()
    draw = random.Random(32)
    minutes = sorted(draw.sample(range(1, 200 * 24 * 60), 600))
    points = []
    for m in minutes:
        at = floor_to(now, FINE) - timedelta(minutes=m)
        values = {"utilization": draw.choice([None, draw.random()]), "pacing": draw.random(), "reserve": 0.2,
                  "capacity_dollars": None, "running": draw.randint(0, 9), "held": draw.randint(0, 4), "paused": 0,
                  "holds": draw.randint(0, 3), "pauses": draw.randint(0, 1), "resumes": 0}
        points.append(Point("five_hour", at, FINE, 1, values))
        await spot.sql("INSERT INTO spot_gate.pool_history VALUES (1, 'five_hour', :at, 1, :utilization, :pacing, "
                       ":reserve, NULL, :running, :held, :paused, :holds, :pauses, :resumes)", at=at,
                       **{k: v for k, v in values.items() if k != "capacity_dollars"})
    await history.retain()
    expected = sorted(retain(points, now, POOL_HISTORY.values), key=lambda p: (p.resolution, p.at))
    got = await rows(spot)
    assert [(r.at, r.resolution_minutes, r.samples) for r in got] == [(p.at, p.resolution, p.samples) for p in expected]
    for r, p in zip(got, expected, strict=True):
        for name in POOL_HISTORY.values:
            want = p.values[name]
            assert getattr(r, name) == (None if want is None else pytest.approx(want)), (name, r, p)


async def test_reads_aggregate_to_a_step_and_refuse_what_one_answer_cannot_carry(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    history = ops(spot)
    await spot.readings((0.4, 0.2))
    for _ in range(30):
        await history.record()
        spot.clock.advance(timedelta(minutes=1))
    hourly = await spot.bus.request(ch.GET_POOL_HISTORY, ch.PoolHistoryQuery(window="seven_day", step_minutes=60))
    assert hourly.step_minutes == 60 and sum(p.samples for p in hourly.points) == 30
    week = await spot.bus.request(ch.GET_POOL_HISTORY, ch.PoolHistoryQuery(window="seven_day"))
    assert week.step_minutes == 15 and week.until - week.since <= timedelta(days=7, minutes=16)
    with pytest.raises(ZimmerError) as refused:
        await spot.bus.request(ch.GET_POOL_HISTORY, ch.PoolHistoryQuery(window="seven_day", step_minutes=1))
    assert refused.value.code is ErrorCode.INVALID and refused.value.details["field"] == "step_minutes"
    assert "step_minutes=15" in refused.value.message

    # Spend per model, from the spend ledger: buckets with spend, the burn rate over each.
    for i, (model, minutes_ago) in enumerate([("claude-opus-4", 10), ("claude-opus-4", 70), ("gpt-5-codex", 20)]):
        await spot.spend(SpendReport(request_id=f"h{i}", session_id=None, harness="codex" if "gpt" in model else
                                     "claude_code", model=model, output_tokens=100_000,
                                     at=spot.clock.now() - timedelta(minutes=minutes_ago)))
    costs = await spot.bus.request(ch.GET_COSTS_HISTORY, ch.CostsHistoryQuery(step_minutes=60))
    assert [(m.model, m.spends_against, len(m.points)) for m in costs.models] == [
        ("claude-opus-4", "claude", 2), ("gpt-5-codex", "codex", 1)]
    opus = costs.models[0]
    assert opus.dollars == pytest.approx(sum(p.dollars for p in opus.points)) and opus.dollars > 0
    assert all(p.dollars_per_minute == pytest.approx(p.dollars / 60) for p in opus.points)



async def test_a_model_first_spent_on_during_a_read_does_not_overflow_its_step(spot, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The step is chosen from how many models spent; the buckets read after it must be of those
    models only, or one answer carries more points than it may (a spend committed between the count
    and the buckets)."""
    from zimmer_spot_gate.store import history

    await spot.spend(SpendReport(request_id="m0", session_id=None, harness="claude_code", model="claude-opus-4",
                                 output_tokens=1_000, at=spot.clock.now() - timedelta(minutes=5)))
    counted = history.spend_models

    async def a_model_spends_after_the_count(*args, **kwargs):  # type: ignore[no-untyped-def]  # wraps the store's query
        found = await counted(*args, **kwargs)
        await spot.spend(SpendReport(request_id="m1", session_id=None, harness="codex", model="gpt-5-codex",
                                     output_tokens=1_000, at=spot.clock.now() - timedelta(minutes=5)))
        return found

    monkeypatch.setattr(history, "spend_models", a_model_spends_after_the_count)
    costs = await ops(spot).costs_history(ch.CostsHistoryQuery())
    buckets = -(-7 * 24 * 60 // costs.step_minutes) + 1
    assert len(costs.models) * buckets <= ch.SERIES_MAX_POINTS, (costs.step_minutes, [m.model for m in costs.models])
    assert [m.model for m in costs.models] == ["claude-opus-4"]

async def test_the_retention_job_folds_what_is_past_a_week(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The scheduled job (pool_history_retention, as its schedule would tick it) applies the rule."""
    old = floor_to(spot.clock.now() - timedelta(days=8), COARSE)
    await spot.sql("INSERT INTO spot_gate.pool_history SELECT 1, 'five_hour', t, 1, 0.5, 0.4, 0.2, NULL, 1, 0, 0, 1, "
                   "0, 0 FROM generate_series(CAST(:a AS timestamptz), CAST(:a AS timestamptz) + interval '29 minutes', "
                   "interval '1 minute') AS t", a=old)

    async def folded() -> bool:
        return [tuple(r) for r in await spot.sql("SELECT resolution_minutes, samples, holds FROM spot_gate.pool_history "
                                                 "ORDER BY at")] == [(15, 15, 15), (15, 15, 15)]

    await spot.run_job("pool_history_retention", folded)
