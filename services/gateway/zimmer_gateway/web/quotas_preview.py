"""The Quotas page's "Preview these settings against the last 7 days" (issue 32 #5): a form beside
the settings form that asks the policy dry-run (the same RPC as POST /api/v1/spot_policy/dry_run)
and shows its answer on the page: the sentence, the totals beside what happened, the hours in
which anything differed as a table, the resets, the sessions decided differently, and the replayed
series drawn on the 7-day utilization chart. A refused preview shows the page again with what was
typed and the refusal beside its field. The markup is `quotas_preview.html`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.responses import Response

from zimmer_common.contracts import policy_dry_run as d
from zimmer_common.contracts import spot_policy as p
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.web.chart_specs import Chart
from zimmer_gateway.web.pages import as_operator, bus_of, checked_form, decimal_number, refusal, whole_number

FIELDS = ("reserve_five_hour_percent", "reserve_seven_day_percent", "max_sessions")
WORDS = {"five_hour": "5-hour", "seven_day": "7-day"}
SEVEN_DAY_CHART = "pool-seven_day"
REPLAYED = "#7a3ea0"


@dataclass
class Preview:
    """A preview asked: what was typed (shown again), and its answer or why there is none."""

    typed: dict[str, str]
    view: d.PolicyDryRunView | None = None
    error: str | None = None
    about: str | None = None  # the form field the refusal is about
    status: int = 200
    rows: list[dict[str, Any]] = field(default_factory=list)


def typed_now(policy: p.PolicyView) -> dict[str, str]:
    """The form as the page first shows it: the settings in force."""
    return {"reserve_five_hour_percent": f"{policy.reserve_percent.get('five_hour', 0):g}",
            "reserve_seven_day_percent": f"{policy.reserve_percent.get('seven_day', 0):g}",
            "max_sessions": str(policy.max_sessions), "gating_enabled": "on" if policy.gating_enabled else "off"}


async def ask(request: Request, service: Service) -> Preview | Response:
    """The posted preview (signed in, CSRF checked), asked as the operator: its answer, or the
    refusal to show beside the field. A forged form gets the refusal page, as every form does."""
    try:
        form = await checked_form(request)
    except ZimmerError as exc:
        return refusal(request, exc)
    typed = {name: str(form.get(name) or "").strip()[:40] for name in FIELDS}
    typed["gating_enabled"] = "on" if form.get("gating_enabled") == "on" else "off"
    try:
        req = d.PolicyDryRun(reserve_five_hour_percent=decimal_number(form, FIELDS[0]),
                             reserve_seven_day_percent=decimal_number(form, FIELDS[1]),
                             max_sessions=whole_number(form, FIELDS[2]), gating_enabled=typed["gating_enabled"] == "on")
        with as_operator():
            view = await bus_of(service).request(d.DRY_RUN, req)
    except ZimmerError as exc:
        where = (exc.details or {}).get("field")
        # The page's number parsing and the service name what they refuse in their own words.
        return _refused(typed, where, exc.message.removeprefix(f"{where}: "), exc.http_status, named=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        return _refused(typed, ".".join(str(x) for x in first["loc"]), first["msg"], 422)
    return Preview(typed, view=view, rows=hour_rows(view))


FIELD_WORDS = {"reserve_five_hour_percent": "the 5-hour reserve", "reserve_seven_day_percent": "the 7-day reserve",
               "max_sessions": "max sessions"}


def _refused(typed: dict[str, str], where: str | None, message: str, status: int, *, named: bool = False) -> Preview:
    """The refusal in words, beside the field it is about (at the form's top when none); `named`:
    the words already say which setting."""
    about = where if where in FIELDS else None
    what = f"{FIELD_WORDS[about]}: " if about and not named else ""
    return Preview(typed, error=f"Not previewed: {what}{message.rstrip('.')}.", about=about, status=status)


def left_words(left: d.DryRunLeft | None, value: float | None) -> str:
    """A spot budget left: an estimate in dollars once calibrated, else a share of the window; below
    zero, how far into the priority reserve the spend went (never a bare negative figure)."""
    if left is None or value is None:
        return "—"
    amount = f"${abs(value):,.2f} (estimate)" if left.unit == "dollars" else f"{abs(value) * 100:.1f}% of the window"
    return f"{amount} into the priority reserve" if value < 0 else amount


def _change(recorded: float, replayed: float, unit: str = "") -> str:
    r, p_ = f"{recorded:,.0f}{unit}", f"{replayed:,.0f}{unit}"
    return r if r == p_ else f"{r} → {p_}"


def hour_rows(view: d.PolicyDryRunView) -> list[dict[str, Any]]:
    """The hours in which anything was decided, waited or decided differently, oldest first."""
    rows = []
    for h in view.hours:
        rec, rep = h.recorded, h.replayed
        if not (h.decisions or h.held_instead or h.admitted_instead or rec.held_minutes or rep.held_minutes
                or rec.paused_minutes or rep.paused_minutes):
            continue
        five = next((x for x in h.spot_budget_left if x.window == "five_hour"), None)
        rows.append({"at": h.hour, "decisions": h.decisions,
                     "differently": f"{h.held_instead} held, {h.admitted_instead} let run",
                     "held": _change(rec.held_minutes, rep.held_minutes, " min"),
                     "paused": _change(rec.paused_minutes, rep.paused_minutes, " min"),
                     "running": _change(rec.peak_running, rep.peak_running),
                     "left": (left_words(five, five and five.recorded) if five is None or five.recorded == five.replayed
                              else f"{left_words(five, five.recorded)} → {left_words(five, five.replayed)}"),
                     "changed": bool(h.held_instead or h.admitted_instead)})
    return rows


def _epoch(at: datetime) -> int:
    return int(at.timestamp())


def draw_on(charts: list[Chart], view: d.PolicyDryRunView) -> bool:
    """The replay on the 7-day utilization chart (its buckets are hours): the 7-day window's
    utilization at these settings and the most sessions running at once, dashed, beside what the
    chart draws of what happened. False when there is no such chart to draw on (no history yet)."""
    chart = next((c for c in charts if c.id == SEVEN_DAY_CHART and c.spec is not None), None)
    if chart is None or chart.spec is None:
        return False
    by_hour = {_epoch(h.hour): h for h in view.hours}
    used, running = [], []
    for x in chart.spec["x"]:
        h = by_hour.get(x - x % 3600)
        seven = next((w for w in h.spot_budget_left if w.window == "seven_day"), None) if h else None
        used.append(seven.utilization_replayed if seven else None)
        running.append(h.replayed.peak_running if h else None)
    chart.spec["series"] += [
        {"label": "Utilization at the previewed settings", "values": used, "color": REPLAYED, "dash": [3, 3],
         "width": 2},
        {"label": "Most running at the previewed settings", "values": running, "color": REPLAYED, "dash": [8, 3],
         "axis": "right", "step": True}]
    chart.summary += (" Dashed purple: the same days replayed at the previewed settings (the preview below the "
                      "settings).")
    return True


def waiting_chart(view: d.PolicyDryRunView) -> Chart:
    """Minutes spot work waited (held at the gate or paused mid-run), hour by hour, as it happened
    and at the previewed settings: its own chart, drawn by the same chart module."""
    xs = [_epoch(h.hour) for h in view.hours]
    rec = [h.recorded.held_minutes + h.recorded.paused_minutes for h in view.hours]
    rep = [h.replayed.held_minutes + h.replayed.paused_minutes for h in view.hours]
    total_rec, total_rep = sum(rec), sum(rep)
    summary = (f"Spot work waited {total_rec:,.0f} minutes over these days (held at the gate or paused mid-run); at "
               f"the previewed settings it would have waited {total_rep:,.0f}.")
    spec = {"kind": "dry_run", "x": xs, "left": "count", "series": [
        {"label": "Minutes waited, as it happened", "values": rec, "color": "#1f5fa8", "step": True},
        {"label": "Minutes waited, at the previewed settings", "values": rep, "color": REPLAYED, "dash": [3, 3],
         "step": True, "width": 2}]}
    return Chart("preview-waiting", "Minutes spot work waited per hour: as it happened and previewed", summary,
                 spec if xs else None)


def page_context(preview: Preview | None, policy: p.PolicyView, charts: dict[str, Any]) -> dict[str, Any]:
    """What `quotas_preview.html` reads; the replay is drawn on the page's 7-day chart."""
    view = preview.view if preview else None
    drawn = draw_on(charts.get("pool_charts") or [], view) if view else False
    return {"preview": preview, "preview_typed": preview.typed if preview else typed_now(policy),
            "preview_drawn": drawn, "preview_chart": waiting_chart(view) if view else None,
            "preview_unit_words": WORDS, "preview_left": left_words}

