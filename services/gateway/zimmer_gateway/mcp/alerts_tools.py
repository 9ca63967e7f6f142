"""`get_alerts` (issue 11), in the `health` group: the alerts ledger an agent reads when it is
paged. Issues page by bytes as well as by count (issue 27 #13): follow `next_before`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from zimmer_common.contracts import alerts as a
from zimmer_common.contracts.fields import Name, ShortText
from zimmer_common.service import Service
from zimmer_gateway.mcp.registry import tool
from zimmer_gateway.mcp.spot_tools import Limit, _bus


@tool(group="health", read_only=True, destructive=False, idempotent=True)
async def get_alerts(
    service: Service,
    state: Annotated[Literal["open", "notified", "all"], Field(description="open: not yet notified")] = "all",
    source: Annotated[Name | None, Field(description="Only this source (a service, or service/job)")] = None,
    level: Literal["warning", "error"] | None = None,
    limit: Limit = 50,
    before: Annotated[ShortText | None, Field(description="The `next_before` of the page before")] = None,
) -> a.AlertList:
    """The alerts ledger: issues grouped by fingerprint, newest first, with their event counts and
    who was told through which sink and when (failures included; the newest 20, with a count of
    older ones), the conditions still true, and the repeating pages' notifications. A page holds
    fewer than `limit` issues when their messages fill one answer: follow `next_before` (pass it as
    `before`) until it is null."""
    return await _bus(service).request(a.LIST_ALERTS, a.AlertQuery(state=state, source=source, level=level,
                                                                    limit=limit, before=before))
