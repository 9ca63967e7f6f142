"""`get_system_health` (issue 15), in the `health` group: the report behind GET /api/v1/health,
printed as prose above the JSON. Agents are the first responders to a page and have no browser
on the host, so every number the page names is here, live."""

from __future__ import annotations

from mcp_types import CallToolResult, TextContent

from zimmer_common.contracts import health as h
from zimmer_common.service import Service
from zimmer_gateway.health_report import prose_then_json, system_health
from zimmer_gateway.mcp.registry import tool


@tool(group="health", read_only=True, destructive=False, idempotent=True)
async def get_system_health(service: Service) -> h.HealthReport:
    """The system health report, live: overall status and why (nothing executing, a wedged lane,
    a starved lane, a cross-lane stall), ready and claimed work per lane with the oldest waiting
    ages and what they are made of, cron freshness per scheduled job (each key behind with its
    reason), workers (N active / M registered) and queue recovery mode. Prose first, then JSON."""
    report = await system_health(service.bus, service.clock)
    return CallToolResult(content=[TextContent(type="text", text=prose_then_json(report))],  # type: ignore[return-value]  # the MCP server passes a CallToolResult through as is
                          structured_content=report.model_dump(mode="json"))
