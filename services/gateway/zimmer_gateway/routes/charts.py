"""History behind the operator pages' charts, for REST users too (issue 32 #4): the quota pool's
utilization over a window with its pacing curve, reserve and spot budget (`/spot_policy/history`),
spend and burn rate per model (`/costs/history`, from spot-gate), and each queue lane's depth and
oldest-ready age with its thresholds (`/health/history`, from alerts). Each is one RPC to the
service that keeps the history (DESIGN §9 "History for charts"); a range or step it cannot answer
is a 422 naming the parameter."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import AfterValidator

from zimmer_common.contracts import charts as ch
from zimmer_common.contracts.fields import NAME_MAX, Time
from zimmer_common.history import STEPS
from zimmer_gateway.auth import authenticated
from zimmer_gateway.routes.common import BusDep, problem_responses

router = APIRouter(prefix="/api/v1", dependencies=[Depends(authenticated)])


def _a_step(value: int | None) -> int | None:
    if value is not None and value not in STEPS:
        raise ValueError(f"step_minutes must be one of {', '.join(map(str, STEPS))}")
    return value


Since = Annotated[Time | None, Query(description=ch.SINCE)]
Until = Annotated[Time | None, Query(description=ch.UNTIL)]
Step = Annotated[int | None, Query(description=ch.STEP, json_schema_extra={"enum": list(STEPS)}),
                 AfterValidator(_a_step)]


@router.get("/spot_policy/history", tags=["spot policy"], summary="A window's pooled utilization over time, with its "
            "pacing curve, reserve and spot budget", response_model=ch.PoolHistory, responses=problem_responses())
async def pool_history(bus: BusDep, window: Annotated[ch.WindowName, Query(description="The quota window")],
                       since: Since = None, until: Until = None, step_minutes: Step = None) -> ch.PoolHistory:
    """What the Quotas charts draw: per bucket the pooled utilization, the pacing curve (where
    utilization would stand had the spot budget been spent evenly since the window started), the
    reserve and the spot budget line (1 - reserve), the calibrated capacity when there is one, the
    most sessions running, held and asleep, and the holds, ceiling pauses and resumes in it. The
    default range is the window's length before now. Kept one point a minute for 7 days, then one per
    15 minutes for 90 days; a bucket nothing was recorded in is absent."""
    return await bus.request(ch.GET_POOL_HISTORY, ch.PoolHistoryQuery(window=window, since=since, until=until,
                                                                      step_minutes=step_minutes))  # type: ignore[arg-type]  # _a_step checked it is one of the literal's steps


@router.get("/costs/history", tags=["costs"], summary="Spend and burn rate per harness and model over time",
            response_model=ch.CostsHistory, responses=problem_responses())
async def costs_history(bus: BusDep, since: Since = None, until: Until = None,
                        step_minutes: Step = None) -> ch.CostsHistory:
    """From the spend ledger: per harness and model, the list-price dollars spent in each bucket
    and the burn rate over it (dollars / step), most spend first. The default range is 7 days;
    it reads at most 90 days back."""
    return await bus.request(ch.GET_COSTS_HISTORY, ch.CostsHistoryQuery(since=since, until=until,
                                                                        step_minutes=step_minutes))  # type: ignore[arg-type]  # _a_step checked it is one of the literal's steps


@router.get("/health/history", tags=["health"], summary="Each queue lane's depth and oldest-ready age over time, "
            "with its thresholds", response_model=ch.HealthHistory, responses=problem_responses())
async def health_history(bus: BusDep, since: Since = None, until: Until = None, step_minutes: Step = None,
                         lane: Annotated[str | None, Query(min_length=1, max_length=NAME_MAX,
                                                           description="Only this lane")] = None) -> ch.HealthHistory:
    """What the Health charts draw, from the health monitor's checks (one a minute): per lane and
    bucket the most messages waiting (depth) and being worked, the oldest waiting one's age, and
    the lane's depth threshold and stall age then. The default range is 24 hours."""
    return await bus.request(ch.GET_HEALTH_HISTORY, ch.HealthHistoryQuery(since=since, until=until, lane=lane,
                                                                          step_minutes=step_minutes))  # type: ignore[arg-type]  # _a_step checked it is one of the literal's steps
