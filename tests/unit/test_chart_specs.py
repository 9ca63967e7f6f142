"""The charts' specs and words, pure (issue 32 #4; zimmer_gateway.web.chart_specs): every bucket of the
range on the x axis with gaps where nothing was recorded, the series each chart names, the marks on
the time axis, the summary sentences; and each chart's "No history yet" state in its template."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from zimmer_common.contracts import charts as ch
from zimmer_gateway.web.chart_specs import costs_charts, lane_charts, pool_chart
from zimmer_gateway.web.pages import TEMPLATES

T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def pool_point(minute: int, **values: object) -> ch.PoolHistoryPoint:
    base: dict[str, object] = dict(samples=1, utilization=0.5, pacing=0.4, reserve=0.2, spot_budget=0.8,
                                   capacity_dollars=None, running=2, held=0, paused=0, holds=0, pauses=0, resumes=0)
    return ch.PoolHistoryPoint(at=T + timedelta(minutes=minute), **{**base, **values})  # type: ignore[arg-type]  # pydantic validates the test's values


def test_a_pool_chart_has_every_minute_gaps_where_none_was_recorded_and_its_marks() -> None:
    h = ch.PoolHistory(window="five_hour", since=T, until=T + timedelta(minutes=10), step_minutes=1, points=[
        pool_point(0), pool_point(1, utilization=0.9, held=3, holds=2), pool_point(5, pauses=1, resumes=1)])
    chart = pool_chart(h)
    assert chart.spec is not None and len(chart.spec["x"]) == 10
    utilization = chart.spec["series"][0]["values"]
    assert utilization[:3] == [0.5, 0.9, None] and utilization[5] == 0.5  # a gap, never a zero
    assert [s["label"] for s in chart.spec["series"]] == ["Utilization", "Pacing curve", "Spot budget line",
                                                         "Priority reserve", "Running", "Held"]
    assert chart.spec["series"][3]["legend"][0] == 0.2  # the reserve band's legend says the reserve
    assert sorted((m["kind"], m["count"]) for m in chart.spec["marks"]) == [("hold", 2), ("pause", 1), ("resume", 1)]
    assert "above the pacing curve for 3 of 3 minutes" in chart.summary.lower()
    assert "at or above the spot budget line for 1" in chart.summary and "2 turns held" in chart.summary
    assert chart.rows and chart.rows[0]["Holds"] == 2


def test_no_history_and_no_curve_are_said_not_drawn() -> None:
    empty = pool_chart(ch.PoolHistory(window="seven_day", since=T, until=T + timedelta(days=7), step_minutes=60,
                                      points=[]))
    assert empty.spec is None and empty.summary.startswith("No history yet")
    unread = pool_chart(ch.PoolHistory(window="five_hour", since=T, until=T + timedelta(minutes=2), step_minutes=1,
                                       points=[pool_point(0, pacing=None)]))
    assert "No pacing curve: no account recorded when this window resets." in unread.summary
    html = TEMPLATES.get_template("health_charts.html").render(lane_charts=[], lane_charts_problem=None)
    assert "No history yet" in html and "data-chart-spec" not in html
    html = TEMPLATES.get_template("quotas_charts.html").render(pool_charts=[empty])
    assert "data-no-history" in html and "No history yet" in html and "data-chart-spec" not in html


def test_spend_fills_zeros_and_runs_a_total_and_lanes_say_their_thresholds() -> None:
    h = ch.CostsHistory(since=T, until=T + timedelta(hours=3), step_minutes=60, models=[ch.ModelSpend(
        harness="claude_code", model="claude-opus-4", spends_against="claude", dollars=3.0, points=[
            ch.SpendPoint(at=T, dollars=1.0, dollars_per_minute=1 / 60),
            ch.SpendPoint(at=T + timedelta(hours=2), dollars=2.0, dollars_per_minute=2 / 60)])])
    rate, spent = costs_charts(h)
    assert rate.spec and rate.spec["series"][0]["values"] == [1 / 60, 0.0, 2 / 60]
    assert spent.spec and spent.spec["series"][0]["values"] == [1.0, 1.0, 3.0]
    assert "$3.00 spent at list price across 1 model" in rate.summary
    lanes = lane_charts(ch.HealthHistory(since=T, until=T + timedelta(minutes=30), step_minutes=15, lanes=[
        ch.LaneHistory(lane="ingest", points=[
            ch.LanePoint(at=T, samples=15, ready=150, claimed=0, oldest_ready_age_seconds=700.0, depth_threshold=100,
                         stall_age_seconds=600.0),
            ch.LanePoint(at=T + timedelta(minutes=15), samples=15, ready=1, claimed=0, oldest_ready_age_seconds=None,
                         depth_threshold=100, stall_age_seconds=600.0)])]))
    [chart] = lanes
    assert chart.spec and [s["label"] for s in chart.spec["series"]] == [
        "Depth (ready)", "Depth threshold", "Oldest ready age", "Stall age"]
    assert chart.summary == ("Peak depth 150 (threshold 100); oldest waiting 11 min at worst (stall age 10 min); "
                             "at or over a threshold for 15 of 30 minutes recorded.")
