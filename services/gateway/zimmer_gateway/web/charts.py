"""The charts on Quotas, Costs and Health (issue 32 #4): each page module adds what one of these
returns to its template's context (one line there), and includes the matching template
(`quotas_charts.html`, `costs_charts.html`, `health_charts.html`; one line there). The history comes
from the same RPCs the REST history routes make (`routes/charts.py`), asked concurrently; a history
that cannot be read leaves its chart saying why, never the page failing."""

from __future__ import annotations

import asyncio
from typing import Any

from zimmer_common.contracts import charts as ch
from zimmer_common.contracts.envelope import RpcSpec
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.web.chart_specs import Chart, costs_charts, lane_charts, pool_chart, unavailable

# The step each page asks for: a chart a screen wide, its points a few hundred at most.
POOL_STEPS = {"five_hour": 1, "seven_day": 60}
COSTS_STEP = 60
LANES_STEP = 15


async def _ask(service: Service, spec: RpcSpec[Any, Any], query: Any) -> Any:
    """The answer, or why there is none (words for the chart's place)."""
    if service.bus is None:
        return "the gateway is not connected to the bus yet"
    try:
        return await service.bus.request(spec, query)
    except ZimmerError as exc:
        return f"{exc.code.value}: {exc.message}"


async def quota_charts(service: Service) -> dict[str, Any]:
    """`pool_charts`: each window's pooled utilization over that window."""
    answers = await asyncio.gather(*(_ask(service, ch.GET_POOL_HISTORY, ch.PoolHistoryQuery(
        window=window, step_minutes=step)) for window, step in POOL_STEPS.items()))  # type: ignore[arg-type]  # the keys are the windows, the values steps of the literal
    charts: list[Chart] = []
    for window, answer in zip(POOL_STEPS, answers, strict=True):
        charts.append(pool_chart(answer) if isinstance(answer, ch.PoolHistory) else
                      unavailable(f"pool-{window}", f"Pooled utilization, the {window.replace('_', '-')} window",
                                  str(answer)))
    return {"pool_charts": charts}


async def spend_charts(service: Service) -> dict[str, Any]:
    """`costs_charts`: burn rate and spend per model over 7 days."""
    answer = await _ask(service, ch.GET_COSTS_HISTORY, ch.CostsHistoryQuery(step_minutes=COSTS_STEP))
    if isinstance(answer, ch.CostsHistory):
        return {"costs_charts": costs_charts(answer)}
    return {"costs_charts": [unavailable("costs-rate", "Burn rate per model, last 7 days", str(answer))]}


async def health_charts(service: Service) -> dict[str, Any]:
    """`lane_charts`: each lane's depth and oldest-ready age over 24 hours, with its thresholds (an
    empty list: no history yet), and `lane_charts_problem` when it could not be read."""
    answer = await _ask(service, ch.GET_HEALTH_HISTORY, ch.HealthHistoryQuery(step_minutes=LANES_STEP))
    if isinstance(answer, ch.HealthHistory):
        return {"lane_charts": lane_charts(answer), "lane_charts_problem": None}
    return {"lane_charts": [], "lane_charts_problem": str(answer)}
