"""What a chart on an operator page is drawn from, and what it says in words (issue 32 #4): each
history answer (zimmer_common.contracts.charts, the same JSON REST serves) turned into a chart
spec `static/charts.js` draws with uPlot, a sentence that sums it up, and a table for readers
without JavaScript or with a screen reader. Pure: the page modules (`web/charts.py`) fetch.

A spec is JSON: `x` (each bucket's start, Unix seconds, every bucket of the range: a pool or lane
bucket with nothing recorded is null, a gap; one without spend is 0), `series` (label, values,
colour, axis `left`/`right`, `dash`, `step`, and `legend` values to show instead when they differ
from what is drawn), `bands` (a fill between two series), `marks` (events on the time axis), and
the axes' units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from zimmer_common.contracts import charts as ch
from zimmer_common.history import Point, combine

WINDOW_TITLES = {"five_hour": "5-hour window, the last 5 hours", "seven_day": "7-day window, the last 7 days"}
PALETTE = ("#1f5fa8", "#b5541b", "#156f2e", "#7a3ea0", "#a4161a", "#5b6570", "#0f7c86", "#8a5a00")
ROWS_IN_TABLE = 12


@dataclass
class Chart:
    """One chart as a template renders it: `spec` is None when there is nothing to draw yet."""

    id: str
    title: str
    summary: str
    spec: dict[str, Any] | None
    columns: list[str] = field(default_factory=list)
    # The table beside the chart: each row's header (`head`, and `at`, a moment shown in the reader's
    # zone, either may be absent) and a text per column.
    rows: list[dict[str, Any]] = field(default_factory=list)
    head_label: str = "From"
    problem: str | None = None

    @property
    def empty(self) -> bool:
        return self.spec is None


def unavailable(id_: str, title: str, problem: str) -> Chart:
    return Chart(id_, title, f"The history could not be read now ({problem}).", None, problem=problem)


def buckets(since: datetime, until: datetime, step_minutes: int) -> list[datetime]:
    step = timedelta(minutes=step_minutes)
    out, at = [], since
    while at < until:
        out.append(at)
        at += step
    return out


def _epoch(at: datetime) -> int:
    return int(at.timestamp())


def _aligned(points: Iterable[Any], xs: Sequence[datetime], value: Callable[[Any], float | None],
             missing: float | None = None) -> list[float | None]:
    by_at = {p.at: value(p) for p in points}
    return [by_at.get(at, missing) for at in xs]


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _groups(points: Sequence[Any], step: timedelta, start: datetime) -> list[tuple[datetime, list[Any]]]:
    """The points in consecutive spans of `step` from `start` (the table's rows), oldest first."""
    groups: dict[datetime, list[Any]] = {}
    for p in points:
        groups.setdefault(start + ((p.at - start) // step) * step, []).append(p)
    return sorted(groups.items())


def _table_step(since: datetime, until: datetime) -> timedelta:
    span = until - since
    for minutes in (5, 15, 30, 60, 120, 240, 360, 720, 1440):
        if span / timedelta(minutes=minutes) <= ROWS_IN_TABLE:
            return timedelta(minutes=minutes)
    return timedelta(days=1)


# ---- the quota pool (Quotas) ------------------------------------------------------------------------

POOL_LEVELS = ("utilization", "pacing", "spot_budget")
POOL_AGG = {"utilization": "mean", "pacing": "mean", "spot_budget": "mean", "reserve": "mean", "running": "max",
            "held": "max", "holds": "sum", "pauses": "sum", "resumes": "sum"}


def pool_chart(h: ch.PoolHistory) -> Chart:
    title = f"Pooled utilization, {WINDOW_TITLES[h.window]}"
    id_ = f"pool-{h.window}"
    columns = ["Utilization", "Pacing curve", "Spot budget line", "Most running", "Most held", "Holds", "Pauses",
               "Resumes"]
    if not h.points:
        return Chart(id_, title, "No history yet: spot-gate records a point a minute (the record_pool_history job), "
                     "and this chart appears after the first.", None, columns)
    xs = buckets(h.since, h.until, h.step_minutes)
    reserve = _aligned(h.points, xs, lambda p: p.reserve)
    spec = {
        "kind": "pool", "x": [_epoch(at) for at in xs], "left": "percent", "right": "count", "leftMax": 1,
        "series": [
            {"label": "Utilization", "values": _aligned(h.points, xs, lambda p: p.utilization), "color": PALETTE[0],
             "width": 2},
            {"label": "Pacing curve", "values": _aligned(h.points, xs, lambda p: p.pacing), "color": "#5b6570",
             "dash": [6, 4]},
            {"label": "Spot budget line", "values": _aligned(h.points, xs, lambda p: p.spot_budget),
             "color": PALETTE[4]},
            {"label": "Priority reserve",
             "values": [None if r is None else 1.0 for r in reserve], "legend": reserve, "color": "rgba(164,22,26,0.35)",
             "width": 0},
            {"label": "Running", "values": _aligned(h.points, xs, lambda p: p.running), "color": PALETTE[2],
             "axis": "right", "step": True, "width": 1},
            {"label": "Held", "values": _aligned(h.points, xs, lambda p: p.held), "color": PALETTE[1], "axis": "right",
             "step": True, "width": 1},
        ],
        "bands": [{"series": [4, 3], "fill": "rgba(164,22,26,0.08)"}],
        "marks": [{"at": _epoch(p.at), "kind": kind, "count": getattr(p, field_)} for p in h.points
                  for kind, field_ in (("hold", "holds"), ("pause", "pauses"), ("resume", "resumes"))
                  if getattr(p, field_)],
    }
    rows = []
    for at, group in _groups(h.points, _table_step(h.since, h.until), h.since):
        folded = combine((Point(h.window, p.at, 1, p.samples, p.model_dump()) for p in group), POOL_AGG,  # type: ignore[arg-type]  # a point's fields are numbers or None
                         key=h.window, at=at, resolution=1).values
        rows.append({"head": "", "at": at, "Utilization": _percent(folded["utilization"]),
                     "Pacing curve": _percent(folded["pacing"]), "Spot budget line": _percent(folded["spot_budget"]),
                     "Most running": int(folded["running"] or 0), "Most held": int(folded["held"] or 0),
                     "Holds": int(folded["holds"] or 0), "Pauses": int(folded["pauses"] or 0),
                     "Resumes": int(folded["resumes"] or 0)})
    return Chart(id_, title, pool_summary(h), spec, columns, rows)


def pool_summary(h: ch.PoolHistory) -> str:
    read = [p for p in h.points if p.utilization is not None]
    minutes = sum(p.samples for p in h.points)
    if not read:
        return f"{minutes} minutes recorded, none with a reading of this window."
    newest, peak = read[-1], max(read, key=lambda p: p.utilization or 0.0)
    paced = [p for p in read if p.pacing is not None]
    ahead = sum(p.samples for p in paced if (p.utilization or 0.0) > (p.pacing or 0.0))
    over = sum(p.samples for p in read if (p.utilization or 0.0) >= p.spot_budget)
    parts = [f"Utilization {_percent(read[0].utilization)} at the start, {_percent(newest.utilization)} now, peak "
             f"{_percent(peak.utilization)}; spot budget line at {_percent(newest.spot_budget)} "
             f"(reserve {_percent(newest.reserve)})."]
    if paced:
        parts.append(f"Above the pacing curve for {ahead} of {sum(p.samples for p in paced)} minutes with a curve;"
                     f" at or above the spot budget line for {over}.")
    else:
        parts.append("No pacing curve: no account recorded when this window resets.")
    holds, pauses, resumes = (sum(getattr(p, f) for p in h.points) for f in ("holds", "pauses", "resumes"))
    parts.append(f"{holds} turn{'s' * (holds != 1)} held, {pauses} session{'s' * (pauses != 1)} paused by the "
                 f"ceiling, {resumes} resumed; at most {max(p.running for p in h.points)} running and "
                 f"{max(p.held for p in h.points)} held at once.")
    return " ".join(parts)


# ---- spend per model (Costs) ------------------------------------------------------------------------------

def costs_charts(h: ch.CostsHistory) -> list[Chart]:
    rate_title = f"Burn rate per model ($/min over each {h.step_minutes}-minute bucket, list price), last 7 days"
    spent_title = "Spend per model over the last 7 days (running total, list price)"
    columns = ["Harness", "Spends against", "Spend", "Peak burn rate", "Newest burn rate"]
    if not h.models:
        empty = "No spend recorded in the last 7 days: the spend ledger fills as the runtime reports model requests."
        return [Chart("costs-rate", rate_title, empty, None, columns), Chart("costs-spent", spent_title, empty, None)]
    xs = buckets(h.since, h.until, h.step_minutes)
    rate_series, spent_series, rows = [], [], []
    for i, m in enumerate(h.models):
        label, color = f"{m.model} ({m.harness})", PALETTE[i % len(PALETTE)]
        rates = _aligned(m.points, xs, lambda p: p.dollars_per_minute, 0.0)
        spent = _aligned(m.points, xs, lambda p: p.dollars, 0.0)
        total, running = 0.0, []
        for d in spent:
            total += d or 0.0
            running.append(round(total, 6))
        rate_series.append({"label": label, "values": rates, "color": color, "step": True, "width": 1.5})
        spent_series.append({"label": label, "values": running, "color": color, "width": 2})
        peak = max(m.points, key=lambda p: p.dollars_per_minute)
        rows.append({"head": m.model, "at": None, "Harness": m.harness, "Spends against": m.spends_against,
                     "Spend": f"${m.dollars:,.2f}", "Peak burn rate": f"${peak.dollars_per_minute:,.4f}/min",
                     "Newest burn rate": f"${m.points[-1].dollars_per_minute:,.4f}/min"})
    x = [_epoch(at) for at in xs]
    total = sum(m.dollars for m in h.models)
    top = h.models[0]
    summary = (f"${total:,.2f} spent at list price across {len(h.models)} model{'s' * (len(h.models) != 1)} in the "
               f"last 7 days; the most by {top.model} ({top.harness}), ${top.dollars:,.2f}."
               + (f" {h.models_left_out} more with less spend are not drawn." if h.models_left_out else ""))
    return [Chart("costs-rate", rate_title, summary, {"kind": "costs-rate", "x": x, "left": "dollars_per_minute",
                                                      "series": rate_series, "marks": []}, columns, rows, "Model"),
            Chart("costs-spent", spent_title, "Spent over the 7 days: " + "; ".join(
                f"{m.model} ({m.harness}) ${m.dollars:,.2f}" for m in h.models) + ".",
                  {"kind": "costs-spent", "x": x, "left": "dollars", "series": spent_series, "marks": []})]


# ---- queue lanes (Health) ---------------------------------------------------------------------------------

def lane_charts(h: ch.HealthHistory) -> list[Chart]:
    charts = []
    xs = buckets(h.since, h.until, h.step_minutes)
    x = [_epoch(at) for at in xs]
    for lane in h.lanes:
        pts = lane.points
        newest = pts[-1]
        spec = {"kind": "lane", "x": x, "left": "count", "right": "seconds", "series": [
            {"label": "Depth (ready)", "values": _aligned(pts, xs, lambda p: p.ready), "color": PALETTE[0], "width": 2,
             "step": True},
            {"label": "Depth threshold", "values": _aligned(pts, xs, lambda p: p.depth_threshold),
             "color": PALETTE[0], "dash": [6, 4], "width": 1},
            {"label": "Oldest ready age", "values": _aligned(pts, xs, lambda p: p.oldest_ready_age_seconds),
             "color": PALETTE[1], "axis": "right", "width": 2},
            {"label": "Stall age", "values": _aligned(pts, xs, lambda p: p.stall_age_seconds), "color": PALETTE[1],
             "axis": "right", "dash": [6, 4], "width": 1},
        ], "marks": []}
        over = sum(p.samples for p in pts if p.ready >= p.depth_threshold
                   or (p.oldest_ready_age_seconds or 0.0) >= p.stall_age_seconds)
        minutes = sum(p.samples for p in pts)
        peak_depth = max(p.ready for p in pts)
        ages = [p.oldest_ready_age_seconds for p in pts if p.oldest_ready_age_seconds is not None]
        waited = f"oldest waiting {_age(max(ages))} at worst" if ages else "nothing waited"
        summary = (f"Peak depth {peak_depth} (threshold {newest.depth_threshold}); {waited} (stall age "
                   f"{_age(newest.stall_age_seconds)}); at or over a threshold for {over} of {minutes} "
                   f"minute{'s' * (minutes != 1)} recorded.")
        rows = [{"head": lane.lane, "at": None, "Peak depth": peak_depth, "Depth threshold": newest.depth_threshold,
                 "Worst oldest-ready age": _age(max(ages)) if ages else "—",
                 "Stall age": _age(newest.stall_age_seconds), "Minutes at or over a threshold": over}]
        charts.append(Chart(f"lane-{lane.lane}", f"Lane {lane.lane}", summary, spec,
                            ["Peak depth", "Depth threshold", "Worst oldest-ready age", "Stall age",
                             "Minutes at or over a threshold"], rows, "Lane"))
    return charts


def _age(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    hours, minutes = divmod(s // 60, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
