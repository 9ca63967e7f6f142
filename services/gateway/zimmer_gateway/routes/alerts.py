"""`/api/v1/alerts`: the alerts ledger (issue 11) — issues with who was told through which sink
and when, conditions, and the repeating pages' notifications; and resolving a condition."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from zimmer_common.contracts import alerts as a
from zimmer_common.contracts.fields import Time
from zimmer_gateway.auth import Realm, authenticated, operator_only
from zimmer_gateway.routes.common import BusDep, problem_responses

router = APIRouter(prefix="/api/v1/alerts", tags=["alerts"])


@router.get("", summary="The alerts ledger: issues, conditions, notifications", response_model=a.AlertList,
            responses=problem_responses())
async def list_alerts(bus: BusDep, _realm: Annotated[Realm, Depends(authenticated)],
                      state: Literal["open", "notified", "all"] = "all",
                      source: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
                      level: Literal["warning", "error"] | None = None,
                      since: Annotated[Time | None, Query(
                          description="Conditions resolved since this instant too (RFC 3339, as every time)")] = None,
                      limit: Annotated[int, Query(ge=1, le=500)] = 50,
                      before: Annotated[str | None, Query(min_length=1, max_length=200)] = None) -> a.AlertList:
    """Issues (grouped by fingerprint; `state=open` is not yet notified), newest first, each with its
    newest notifications (sink, outcome: sent, failed, not_allowed, not_configured; attempts; when)
    and how many older ones it has; the conditions still true (and those resolved since `since`);
    the repeating pages' notifications. Issues page by bytes as well as by count: follow
    `next_before` (pass it as `before`) until it is null."""
    return await bus.request(a.LIST_ALERTS, a.AlertQuery(state=state, source=source, level=level, since=since,
                                                         limit=limit, before=before))


@router.post("/conditions/{condition_key}/resolve", summary="Resolve a condition (operator only)",
             response_model=a.ConditionView, responses=problem_responses(403, 404))
async def resolve_condition(condition_key: Annotated[str, Path(min_length=1, max_length=200)], bus: BusDep,
                            _realm: Annotated[Realm, Depends(operator_only)]) -> a.ConditionView:
    """The condition is no longer true: its page group stops repeating, and Alertmanager is told it
    resolved. A sender says the same by reporting the condition with `still_true: false`."""
    return await bus.request(a.RESOLVE_CONDITION, a.ResolveCondition(condition_key=condition_key))
