"""The MCP SDK's own client over real HTTP, as the gateway's MCP tests use it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

FLEET = {"Authorization": "Bearer test-fleet-key"}


@asynccontextmanager
async def mcp_session(url: str, groups: str | None = None, session_id: int | None = None
                      ) -> AsyncIterator[ClientSession]:
    """A session on the gateway at `url`, with the fleet key, asking for `groups`, speaking for
    `session_id` when given (the X-Zimmer-Session-Id header)."""
    target = f"{url}/mcp" + (f"?groups={groups}" if groups else "")
    headers = {**FLEET, **({"X-Zimmer-Session-Id": str(session_id)} if session_id else {})}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=15) as http,
        streamable_http_client(target, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await session.call_tool(name, args or {})
    assert not result.is_error, result.content
    return result.structured_content


async def tool_error(session: ClientSession, name: str, args: dict[str, Any]) -> str:
    result = await session.call_tool(name, args)
    assert result.is_error, result.structured_content
    return result.content[0].text
