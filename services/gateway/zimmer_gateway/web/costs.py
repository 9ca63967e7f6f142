"""The Costs page (seed 004): the burn-rate table ($/min per harness and model, from finished
sessions) and the spend totals per window, from the same `get_costs` answer REST and MCP give."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from zimmer_common.contracts import spot_policy as p
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.web.charts import spend_charts
from zimmer_gateway.web.pages import bus_of, refusal, render, signed_in


def create_costs(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/costs")
    async def costs(request: Request) -> Response:
        signed_in(request)
        try:
            view = await bus_of(service).request(p.GET_COSTS, p.CostsQuery())
        except ZimmerError as exc:
            return refusal(request, exc)
        return render(request, "costs.html", title="Costs", costs=view, **await spend_charts(service))

    return router
