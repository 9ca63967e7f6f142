"""The policy dry-run on MCP (issue 32 #5): `preview_spot_policy`, in the `gate_decisions` group
beside the decision log it replays. One RPC to spot-gate, the same one REST's
POST /api/v1/spot_policy/dry_run makes; it changes nothing."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from zimmer_common.contracts import policy_dry_run as d
from zimmer_common.contracts.fields import Time
from zimmer_common.service import Service
from zimmer_gateway.mcp.registry import tool
from zimmer_gateway.mcp.spot_tools import Reserve, _bus


class PolicyPreview(d.PolicyDryRunView):
    summary: str = Field(description="The answer in a few sentences: what would have gone differently")


@tool(group="gate_decisions", read_only=True, destructive=False, idempotent=True)
async def preview_spot_policy(
    service: Service,
    reserve_five_hour_percent: Reserve = None,
    reserve_seven_day_percent: Reserve = None,
    max_sessions: Annotated[int | None, Field(ge=0, le=10_000, description="Sessions at once")] = None,
    gating_enabled: Annotated[bool | None, Field(description="The gate on or off")] = None,
    since: Annotated[Time | None, Field(description="The span's start; at most 7 days before until "
                                                    "(default: 7 days before until)")] = None,
    until: Annotated[Time | None, Field(description="The span's end (default: now)")] = None,
) -> PolicyPreview:
    """Replay the recorded readings, spend and arrivals (default: the last 7 days) through the
    gate's own functions at these settings, as action_spot_policy set_gating would set them (a
    setting not given keeps what each recorded decision had), and say per hour what would have
    gone differently beside what happened: gate decisions made the other way, minutes spot work
    was held (by ceiling) and paused, the most sessions running at once, each window's spot budget
    left at each hour and at each reset. Changes nothing. `missing` names what the record lacks."""
    view = await _bus(service).request(d.DRY_RUN, d.PolicyDryRun(
        reserve_five_hour_percent=reserve_five_hour_percent, reserve_seven_day_percent=reserve_seven_day_percent,
        max_sessions=max_sessions, gating_enabled=gating_enabled, since=since, until=until))
    return PolicyPreview(**view.model_dump(), summary=view.sentence)
