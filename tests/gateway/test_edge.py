"""Limits before work, bad input and a strict contract, from outside: httpx (or a raw socket)
→ gateway → NATS → services → PostgreSQL, all real.

The RSS figures are printed (run with -s to see them); the assertions bound the growth in MB,
never the time anything took.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import psutil
import pytest
from mcp_client import call, mcp_session, tool_error
from problems import invalid_fields, refused
from rawhttp import stream_body

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
MB = 1024 * 1024
ISSUE = "https://github.com/acme/zimmer/issues/{n}"


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / MB


def item(n: int, **extra: Any) -> dict[str, Any]:
    return {"key": f"zimmer#{n}", "issue_url": ISSUE.format(n=n), "estimated_cost": "small", "title": f"t{n}", **extra}


# ---- limits before work ---------------------------------------------------------------


async def test_a_300_mb_body_without_a_credential_is_refused_before_it_is_read(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    before = rss_mb()
    sent = await stream_body(url, "/api/v1/work_backlog_items", headers={}, total=300 * MB)
    grew = rss_mb() - before
    print(f"\n300 MB body, no credential: 401 after {sent.bytes_sent / MB:.1f} MB sent; RSS grew {grew:.1f} MB")
    assert sent.status == 401 and json.loads(sent.body)["code"] == "unauthorized"
    assert sent.headers["content-type"] == "application/problem+json"
    assert grew < 20


async def test_a_declared_or_streamed_body_over_the_limit_is_413_without_growing(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    before = rss_mb()
    declared = await stream_body(url, "/api/v1/work_backlog_items", headers=FLEET, total=300 * MB)
    streamed = await stream_body(url, "/api/v1/work_backlog_items", headers=FLEET, total=None, chunked=True)
    grew = rss_mb() - before
    print(f"\n300 MB body with a credential: declared → 413 after {declared.bytes_sent / MB:.1f} MB, "
          f"chunked → 413 after {streamed.bytes_sent / MB:.1f} MB; RSS grew {grew:.1f} MB")
    for answer in (declared, streamed):
        assert answer.status == 413 and answer.headers["content-type"] == "application/problem+json"
        assert json.loads(answer.body)["code"] == "too_large"
    assert grew < 20


async def test_mcp_refuses_a_large_body_as_a_problem_document(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        r = await http.post("/mcp?groups=work_backlog", content=b"{" + b" " * (2 * MB) + b"}",
                            headers={**FLEET, "content-type": "application/json",
                                     "accept": "application/json, text/event-stream"})
    assert refused(r, 413)["code"] == "too_large"


async def test_a_prompt_that_cannot_fit_is_refused_before_any_bus_call(http: httpx.AsyncClient) -> None:
    sid = (await http.post("/api/v1/sessions", json={"start": False})).json()["session"]["id"]
    too_long = await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "follow_up", "prompt": "p" * 100_001})
    assert invalid_fields(too_long) == ["prompt"]
    big = await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "follow_up", "prompt": "p" * (2 * MB)})
    assert refused(big, 413)["code"] == "too_large"


# ---- strings the database can store ----------------------------------------------------------


@pytest.mark.parametrize("bad", ["nul\u0000here", "lone\ud800surrogate"])
async def test_unstorable_strings_are_422_naming_the_field_everywhere(stack, bad: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack

    def raw(body: dict[str, Any]) -> bytes:  # json.dumps escapes a lone surrogate as \\ud800, as a client would
        return json.dumps(body).encode()

    async with httpx.AsyncClient(base_url=url, headers={**FLEET, "content-type": "application/json"},
                                 timeout=15) as http:
        cases = {
            "/api/v1/sessions": ({"title": bad, "start": False}, "title"),
            "/api/v1/work_backlog_items": (item(1, payload={"notes": ["ok", {"deep": bad}]}), "payload.notes.deep"),
            "/api/v1/triggers": ({"kind": "schedule", "name": "n", "prompt": bad}, "prompt"),
        }
        for path, (body, field) in cases.items():
            r = await http.post(path, content=raw(body))
            assert invalid_fields(r) == [field], (path, r.text)
        meta = await http.post("/api/v1/sessions", content=raw({"metadata": {bad: 1}, "start": False}))
        assert refused(meta, 422)["errors"][0]["type"] == "unstorable_string"
        query = await http.get("/api/v1/triggers?name_contains=" + quote(bad, errors="surrogatepass"))
        assert invalid_fields(query) == ["name_contains"]
        # MCP, as raw JSON-RPC (the SDK's client cannot even encode a lone surrogate)
        call_tool = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "append_work_backlog_item",
            "arguments": {"key": "k#1", "issue_url": ISSUE.format(n=1), "estimated_cost": "small", "title": bad}}}
        r = await http.post("/mcp?groups=work_backlog", content=raw(call_tool),
                            headers={"accept": "application/json, text/event-stream"})
        assert invalid_fields(r) == ["params.arguments.title"]


# ---- a strict contract ---------------------------------------------------------------------


async def test_no_coercion_of_ints_bools_strings_or_times(http: httpx.AsyncClient) -> None:
    sid = (await http.post("/api/v1/sessions", json={"start": False})).json()["session"]["id"]
    assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "running", "at": 0})) \
        == ["at"]
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}", json={"precedence": False})) == ["precedence"]
    assert invalid_fields(await http.post("/api/v1/work_backlog_items/pull", json={"count": "3"})) == ["count"]
    assert invalid_fields(await http.post("/api/v1/sessions", json={"start": "true"})) == ["start"]
    ok = await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "running", "at": "2026-12-01T10:00:00Z"})
    assert ok.status_code == 200, ok.text


async def test_mcp_nested_objects_refuse_unknown_keys_and_coercion(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(url, "work_backlog") as session:
        text = await tool_error(session, "pull_work_backlog_items",
                                {"count": 1, "removals": [{"key": "k#1", "reason": "issue_closed", "extra": 1}]})
        assert "extra" in text
        assert "count" in await tool_error(session, "pull_work_backlog_items", {"count": "3"})


async def test_405_lists_every_method_and_hosts_are_case_insensitive(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as http:
        r = await http.put("/api/v1/sessions/1")
        assert r.status_code == 405 and set(r.headers["allow"].split(", ")) >= {"GET", "PATCH", "DELETE"}
        r = await http.put("/api/v1/work_backlog_items")
        assert r.status_code == 405 and set(r.headers["allow"].split(", ")) >= {"GET", "POST"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        port = url.rsplit(":", 1)[1]
        upper = await http.post("/mcp", json=init, headers={"accept": "application/json, text/event-stream",
                                                            "host": f"LOCALHOST:{port}"})
        assert upper.status_code == 200, upper.text


# ---- retry-safety ------------------------------------------------------------------------


async def test_idempotency_keys_on_rest_return_the_first_answer(http: httpx.AsyncClient) -> None:
    first = await http.post("/api/v1/work_backlog_items", json=item(7), headers={"Idempotency-Key": "append-7"})
    again = await http.post("/api/v1/work_backlog_items", json=item(7), headers={"Idempotency-Key": "append-7"})
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    other = await http.post("/api/v1/work_backlog_items", json=item(8), headers={"Idempotency-Key": "append-7"})
    assert refused(other, 409)["details"]["field"] == "idempotency_key"

    sid = (await http.post("/api/v1/sessions", json={"start": False, "genesis": "api"})).json()["session"]["id"]
    turn = {"kind": "first_start", "prompt": "go"}
    t1 = await http.post(f"/api/v1/sessions/{sid}/turns", json=turn, headers={"Idempotency-Key": "turn-1"})
    t2 = await http.post(f"/api/v1/sessions/{sid}/turns", json=turn, headers={"Idempotency-Key": "turn-1"})
    assert t1.status_code in (200, 202) and t2.json() == t1.json()
    decisions = (await http.get(f"/api/v1/sessions/{sid}/gate_decisions")).json()["decisions"]
    assert len(decisions) <= 1  # one turn decided, not two

    mismatch = await http.post("/api/v1/sessions", json={"idempotency_key": "a", "start": False},
                               headers={"Idempotency-Key": "b"})
    assert invalid_fields(mismatch) == ["idempotency_key"]
    bad_key = await http.post("/api/v1/work_backlog_items", json=item(9), headers={"Idempotency-Key": "has space"})
    assert refused(bad_key, 422)["code"] == "invalid"


async def test_keys_are_scoped_to_the_caller(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, timeout=15) as http:
        fleet = await http.post("/api/v1/work_backlog_items", json=item(20), headers={**FLEET, "Idempotency-Key": "k"})
        operator = await http.post("/api/v1/work_backlog_items", json=item(21),
                                   headers={**OPERATOR, "Idempotency-Key": "k"})
    assert fleet.status_code == operator.status_code == 201
    assert fleet.json()["item"]["key"] != operator.json()["item"]["key"]


async def test_mcp_append_with_a_key_is_answered_once(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    args = {"key": "zimmer#30", "issue_url": ISSUE.format(n=30), "estimated_cost": "small", "idempotency_key": "m-1"}
    async with mcp_session(url, "work_backlog") as session:
        first = await call(session, "append_work_backlog_item", args)
        again = await call(session, "append_work_backlog_item", args)
    assert again == first


async def test_outage_answers_are_documented_in_openapi(http: httpx.AsyncClient) -> None:
    spec = (await http.get("/openapi.json")).json()
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    for path, methods in spec["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, op in methods.items():
            assert {"401", "413", "422", "503"} <= set(op["responses"]), (method, path)
            assert op.get("security"), (method, path)
    assert "text/plain" in spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]


async def test_mcp_keys_are_scoped_to_the_declared_session(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The caller travels from the MCP connection to the backlog: the same key from two sessions
    is two keys (were it lost on the way, the second append would be a 409 reusing the first's)."""
    _services, url = stack
    answers = []
    async with httpx.AsyncClient(base_url=url, timeout=15) as http:
        for session in (1, 2):
            call_tool = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "append_work_backlog_item", "arguments": {
                    "key": f"zimmer#{40 + session}", "issue_url": ISSUE.format(n=40 + session),
                    "estimated_cost": "small", "idempotency_key": "same-key"}}}
            r = await http.post("/mcp?groups=work_backlog", json=call_tool, headers={
                **FLEET, "accept": "application/json, text/event-stream", "x-zimmer-session-id": str(session)})
            assert r.status_code == 200, r.text
            answers.append(r.json()["result"])
    assert not any(a.get("isError") for a in answers), answers
    assert [a["structuredContent"]["item"]["key"] for a in answers] == ["zimmer#41", "zimmer#42"]


async def test_backlog_strings_have_the_same_maxima_on_rest_as_on_mcp(http: httpx.AsyncClient) -> None:
    """Issue 9 #6: REST took 10,000-character repo, surface, kind, scope_direction, gate_verdict and
    added_by (and pull keys) while MCP capped them: one contract, one set of limits."""
    long = "x" * 10_000
    for field in ("repo", "surface", "kind", "scope_direction", "gate_verdict", "added_by"):
        r = await http.post("/api/v1/work_backlog_items", json=item(50, **{field: long}))
        assert invalid_fields(r) == [field], field
    assert invalid_fields(await http.post("/api/v1/work_backlog_items/pull", json={"keys": [long]})) == ["keys"]
