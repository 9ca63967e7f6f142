"""`/api/v1/spot_policy`, `/api/v1/costs`, `/api/v1/quota/readings`: the deployment's quota posture,
and the policy dry-run (operator only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, status
from pydantic import ConfigDict

from zimmer_common.contracts import policy_dry_run as d
from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import QuotaReadingIn
from zimmer_gateway.auth import Realm, operator_only
from zimmer_gateway.routes.common import BusDep, problem_responses

router = APIRouter(prefix="/api/v1")


class SetPolicyBody(p.SetPolicy):
    """Only the fields given change; a refused change changes nothing."""

    model_config = ConfigDict(extra="forbid")


class GenesisActionBody(p.GenesisAction):
    """promote_genesis / demote_genesis (for kinds no trigger produces), or reset_genesis_classes."""

    model_config = ConfigDict(extra="forbid")


class QuotaReadingBody(QuotaReadingIn):
    model_config = ConfigDict(extra="forbid")


@router.get("/spot_policy", tags=["spot policy"], summary="The spot policy, the windows and the gate's decision now",
            response_model=p.PolicyView, responses=problem_responses())
async def get_policy(bus: BusDep) -> p.PolicyView:
    """Windows in dollars once calibrated (`calibrated: false` means every figure is a fraction of
    the window; `calibrated_at` says when, since every dollar figure is an estimate), the reserves,
    running and held counts, the decision a new spot session would get, when the pool comes back,
    and every account of the pool (`accounts`: status, each window as read and as averaged, its
    reset, the reading's age and whether it is stale)."""
    return await bus.request(p.GET_POLICY, p.PolicyQuery())


@router.patch("/spot_policy", tags=["spot policy"], summary="Toggle gating, set the reserves and the max sessions",
              response_model=p.PolicyView, responses=problem_responses(422))
async def set_policy(body: SetPolicyBody, bus: BusDep) -> p.PolicyView:
    return await bus.request(p.SET_POLICY, body)


class DryRunBody(d.PolicyDryRun):
    """PATCH /api/v1/spot_policy's fields, each optional (one not given keeps what each recorded
    decision had; none given replays the recorded settings), and the span: `since` before `until`,
    at most 7 days apart; `until` defaults to now (or 7 days after `since`, if earlier), `since` to
    7 days before `until`."""

    model_config = ConfigDict(extra="forbid")


@router.post("/spot_policy/dry_run", tags=["spot policy"],
             summary="Replay recorded days at other settings, per hour beside what happened (operator only)",
             response_model=d.PolicyDryRunView, responses=problem_responses(403, 422))
async def dry_run(body: DryRunBody, bus: BusDep, _realm: Annotated[Realm, Depends(operator_only)]) -> d.PolicyDryRunView:
    """The recorded readings, spend and arrivals of the span, replayed through the gate's own
    functions at these settings: per hour, the gate decisions made differently, the minutes spot
    work was held (by ceiling) and paused, the most sessions running at once, and each window's
    spot budget left (at each hour's last reading and at each reset), beside what happened.
    Changes nothing. `missing` names what the record lacks; `truncated` says the replay stopped
    at `replayed_until` (at most 20,000 decisions are read at once)."""
    return await bus.request(d.DRY_RUN, body)


@router.post("/spot_policy/genesis", tags=["spot policy"], summary="Promote, demote or reset genesis classes",
             response_model=p.PolicyView, responses=problem_responses(422))
async def genesis_action(body: GenesisActionBody, bus: BusDep) -> p.PolicyView:
    """A changed default moves every session that derives its class from that genesis."""
    return await bus.request(p.GENESIS_ACTION, body)


@router.get("/costs", tags=["costs"], summary="Burn rates per harness and model, spend per window, prices",
            response_model=p.CostsView, responses=problem_responses())
async def get_costs(bus: BusDep) -> p.CostsView:
    return await bus.request(p.GET_COSTS, p.CostsQuery())


@router.post("/quota/readings", tags=["quota"], summary="Record a quota reading for one account",
             response_model=c.Ok, status_code=status.HTTP_202_ACCEPTED, responses=problem_responses(422))
async def record_reading(body: QuotaReadingBody, bus: BusDep) -> c.Ok:
    """Utilization per window is 0–1 of the window; `read_at` defaults to now."""
    return await bus.request(c.RECORD_READING, body)
