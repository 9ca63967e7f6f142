"""The MCP surface: tool groups per connection, credentials, tool errors, annotations.

Real services in-process (embedded PostgreSQL and NATS) and the SDK's own client over HTTP.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pydantic import Field

from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.auth import Realm
from zimmer_gateway.mcp.registry import CORE, REGISTRY, ToolDef, parse_groups
from zimmer_gateway.mcp.server import TOOL_MODULES

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
PROBLEM = "application/problem+json"
PEERS = {"backlog", "spot-gate", "sweeper", "alerts"}
PROBE = "probe_gate_decision"

for _module in TOOL_MODULES:  # the declarations the gateway itself loads
    importlib.import_module(_module)


async def probe_gate_decision(service: Service, realm: Realm,
                              text: Annotated[str, Field(description="What to echo")]) -> dict[str, Any]:
    """Test-only tool: echoes its argument, proves the injected service and realm."""
    if not text:
        raise ZimmerError(ErrorCode.INVALID, "text must not be empty", {"field": "text"})
    return {"echo": text, "realm": realm.value, "gateway": service.name}


@pytest.fixture
def stack_setup() -> Any:
    """A tool in `gate_decisions`, declared before the stack starts (the gateway builds servers at start)."""
    tool = REGISTRY.add(ToolDef(name=PROBE, group="gate_decisions", description="Echo (test only).",
                                fn=probe_gate_decision, read_only=False, destructive=True, idempotent=False))
    yield tool
    REGISTRY.remove(PROBE)




@asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers or FLEET, timeout=15) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def tool_names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


def core_names() -> set[str]:
    return {t.name for t in REGISTRY.for_groups([CORE])}


async def test_unscoped_connection_sees_core_and_pings_every_service(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    assert "get_system_ping" in core_names()
    async with mcp_session(f"{url}/mcp") as session:
        assert await tool_names(session) == core_names()
        result = await session.call_tool("get_system_ping", {})
        assert not result.is_error, result.content
        services = result.structured_content["services"]
        assert set(services) == PEERS
        for status in services.values():
            assert status["up"] is True and status["version"] and status["instance_id"]
            assert status["uptime_seconds"] >= 0

        # Outside the connection's groups: not callable either.
        hidden = await session.call_tool(PROBE, {"text": "hi"})
        assert hidden.is_error and "Unknown tool" in hidden.content[0].text

    # The trailing-slash URL is the same surface.
    async with mcp_session(f"{url}/mcp/") as session:
        assert await tool_names(session) == core_names()


async def test_group_by_query_and_header(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    expected = core_names() | {t.name for t in REGISTRY.for_groups(["gate_decisions"])}
    assert PROBE in expected
    for target, headers in ((f"{url}/mcp?groups=gate_decisions", FLEET),
                            (f"{url}/mcp", {**FLEET, "X-Zimmer-Tool-Groups": "gate_decisions"}),
                            (f"{url}/mcp/?groups=core,%20gate_decisions", FLEET)):
        async with mcp_session(target, headers) as session:
            assert await tool_names(session) == expected, target
            echoed = await session.call_tool(PROBE, {"text": "hi"})
            assert not echoed.is_error, echoed.content
            assert echoed.structured_content == {"echo": "hi", "realm": "fleet", "gateway": "gateway"}

    # Another group set is another server: the probe is not there.
    async with mcp_session(f"{url}/mcp?groups=health") as session:
        assert PROBE not in await tool_names(session)
    async with mcp_session(f"{url}/mcp?groups=gate_decisions", OPERATOR) as session:
        echoed = await session.call_tool(PROBE, {"text": "hi"})
        assert echoed.structured_content["realm"] == "operator"


async def test_tool_errors_and_annotations(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(f"{url}/mcp?groups=gate_decisions") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        ping, probe = tools["get_system_ping"].annotations, tools[PROBE].annotations
        assert (ping.read_only_hint, ping.destructive_hint, ping.idempotent_hint) == (True, False, True)
        assert (probe.read_only_hint, probe.destructive_hint, probe.idempotent_hint) == (False, True, False)
        # Injected parameters are not part of the input schema.
        assert set(tools[PROBE].input_schema["properties"]) == {"text"}
        assert set(tools["get_system_ping"].input_schema["properties"]) == {"timeout_seconds"}

        refused = await session.call_tool(PROBE, {"text": ""})
        assert refused.is_error
        text = refused.content[0].text
        assert "invalid" in text and "text must not be empty" in text and "field: text" in text

        bad_args = await session.call_tool("get_system_ping", {"timeout_seconds": 99})
        assert bad_args.is_error and "timeout_seconds" in bad_args.content[0].text


async def test_refusals_are_problem_documents(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        ok = await http.post("/mcp", json=init, headers={**FLEET, **accept})
        assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "zimmer"

        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
            denied = await http.post("/mcp", json=init, headers={**headers, **accept})
            assert denied.status_code == 401 and denied.headers["content-type"] == PROBLEM
            assert denied.headers["www-authenticate"].startswith("Bearer")

        unknown = await http.post("/mcp?groups=gate_decisions,pin_items", json=init, headers={**FLEET, **accept})
        assert unknown.status_code == 422 and unknown.headers["content-type"] == PROBLEM
        body = unknown.json()
        assert body["unknown_groups"] == ["pin_items"] and "pin_items" in body["detail"]
        assert body["code"] == "invalid" and "gate_decisions" in body["known_groups"]
        by_header = await http.post("/mcp", json=init, headers={**FLEET, **accept, "X-Zimmer-Tool-Groups": "nope"})
        assert by_header.status_code == 422 and by_header.json()["unknown_groups"] == ["nope"]

        # DNS-rebinding protection stays on: a foreign Host header is refused by the SDK.
        foreign = await http.post("/mcp", json=init, headers={**FLEET, **accept, "Host": "evil.example"})
        assert foreign.status_code == 421

    # The SDK client fails to connect rather than silently getting a server without the group.
    # (It reads error bodies only when they are JSON-RPC in application/json, so it reports a
    # generic "Server returned an error response"; the problem document is for humans and logs.)
    with pytest.raises(Exception) as refused:  # noqa: PT011 - wrapped in anyio exception groups
        async with mcp_session(f"{url}/mcp?groups=pin_items"):
            pass
    assert "error response" in repr(refused.value)


def test_group_parsing_and_declarations() -> None:
    assert parse_groups(None) == {CORE}
    assert parse_groups(" work_backlog ,", "health") == {CORE, "work_backlog", "health"}
    with pytest.raises(ValueError, match="pin_items"):
        parse_groups("pin_items")
    with pytest.raises(ValueError, match="unknown tool group"):
        ToolDef(name="x", group="nope", description="d", fn=probe_gate_decision,
                read_only=True, destructive=False, idempotent=True)
    with pytest.raises(ValueError, match="both read-only and destructive"):
        ToolDef(name="x", group=CORE, description="d", fn=probe_gate_decision,
                read_only=True, destructive=True, idempotent=True)
    # Every declared tool sits in a known group and names are unique (the registry is keyed by name).
    assert all(t.group in {CORE, "work_backlog", "gate_decisions", "health", "sessions"} for t in REGISTRY.all())
