"""The work backlog's MCP tools end to end: the SDK's own client over HTTP → gateway → NATS →
backlog → spot-gate. All five services in-process; nothing is mocked.

Also the seed's "enforced by absence" rule: no tool of any group pins, unpins, places, removes
by judgement or starts an item now, and the unscoped server carries no backlog tool.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
from mcp_client import call, mcp_session, tool_error

from zimmer_gateway.mcp.registry import KNOWN_GROUPS

FLEET = {"Authorization": "Bearer test-fleet-key"}
BACKLOG_TOOLS = {"get_work_backlog", "append_work_backlog_item", "pull_work_backlog_items",
                 "hold_work_backlog_item_for_decision"}
# A discretionary operation, by name (snake_case words) and by description (whole words; an
# underscore joins a word, so spot policy's `promote_genesis` action is not a backlog promotion).
DISCRETIONARY_NAME_WORDS = {"pin", "unpin", "place", "placement", "remove", "promote", "now", "prioritize"}
DISCRETIONARY_TEXT = re.compile(
    r"\b(pin|pins|unpin|unpins|hand-place|hand-places|place|places|remove|removes|promote|promotes|"
    r"start now|starts now|start_now|remove by judgement|removal by judgement)\b", re.IGNORECASE)


def issue(n: int, **extra: Any) -> dict[str, Any]:
    return {"key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}", "title": f"Fix {n}",
            "estimated_cost": "small", **extra}


async def test_backlog_tools_are_opt_in_and_no_discretionary_tool_exists(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(url) as unscoped:
        core = {t.name for t in (await unscoped.list_tools()).tools}
        assert not core & BACKLOG_TOOLS and not [n for n in core if "backlog" in n]
        hidden = await unscoped.call_tool("append_work_backlog_item", issue(1))
        assert hidden.is_error and "Unknown tool" in hidden.content[0].text
    async with mcp_session(url, "work_backlog") as scoped:
        tools = {t.name: t for t in (await scoped.list_tools()).tools}
    assert set(tools) - core == BACKLOG_TOOLS
    assert tools["get_work_backlog"].annotations.read_only_hint is True
    assert tools["append_work_backlog_item"].annotations.read_only_hint is False
    schema = tools["append_work_backlog_item"].input_schema
    assert "issue_url" in schema["required"] and "prompt" not in schema["properties"]
    assert {"payload", "estimated_cost"} <= set(schema["properties"])
    # Issue 9 #7: the writing session is stamped from the connection, never self-declared.
    assert "acting_session_id" not in schema["properties"] and "acting_session" not in schema["properties"]
    assert not {"added_via", "added_by", "precedence", "pinned"} & set(schema["properties"])
    pull_text = " ".join(tools["pull_work_backlog_items"].description.lower().split())
    assert "a pull by keys is safe to retry" in pull_text
    assert "a pull by count is safe to retry only with an idempotency_key" in pull_text

    for group in KNOWN_GROUPS:  # each group alone (core is always in), then all at once
        async with mcp_session(url, None if group == "core" else group) as session:
            assert not [n for n in (t.name for t in (await session.list_tools()).tools)
                        if n in BACKLOG_TOOLS and group != "work_backlog"], group
    async with mcp_session(url, ",".join(KNOWN_GROUPS)) as everything:
        every = (await everything.list_tools()).tools
    assert BACKLOG_TOOLS <= {t.name for t in every} and len(every) > len(BACKLOG_TOOLS)
    for t in every:
        assert not DISCRETIONARY_NAME_WORDS & set(t.name.split("_")), t.name
        assert not re.search(r"(^|_)(un)?pin(s|ned)?(_|$)|promot|start_?now|hand_?place|remov", t.name), t.name
        text = f"{t.title or ''} {t.description or ''}"
        if t.name in BACKLOG_TOOLS or "backlog" in text.lower():
            # A session's own start now (action_session, seed 004's parity table) is not the backlog's
            # start-now of an item, which stays operator-only (issue 13).
            hit = DISCRETIONARY_TEXT.search(text)
            assert hit is None, (t.name, hit.group(0) if hit else None)


async def test_append_refuses_issueless_items_and_prompts(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(url, "work_backlog") as session:
        without = issue(1)
        del without["issue_url"]
        assert "issue_url" in await tool_error(session, "append_work_backlog_item", without)
        assert "issue_url" in await tool_error(session, "append_work_backlog_item", {**without, "issue_url": None})
        assert "issue_url" in await tool_error(session, "append_work_backlog_item", {**without, "issue_url": ""})
        text = await tool_error(session, "append_work_backlog_item",
                                issue(2, payload={"notes": "n", "prompt": "do something ungated"}))
        assert "invalid:" in text and "field: payload.prompt" in text
        # A top-level prompt is refused outright, not dropped: tools refuse arguments they do not declare.
        assert "prompt" in await tool_error(session, "append_work_backlog_item",
                                            {**issue(5), "prompt": "do something ungated"})
        text = await tool_error(session, "append_work_backlog_item", issue(3, payload={"Prompt": "x"}))
        assert "field: payload.Prompt" in text
        assert "estimated_cost" in await tool_error(session, "append_work_backlog_item",
                                                    issue(4, estimated_cost="huge"))
        listing = await call(session, "get_work_backlog", {"status": "all"})
        assert listing["items"] == [] and listing["total"] == 0  # nothing refused was written


async def test_append_get_and_pull_end_to_end(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as http:
        made = await http.post("/api/v1/sessions", json={"genesis": "schedule", "precedence": 10, "start": False})
        assert made.status_code == 201, made.text
        groomer = made.json()["session"]["id"]

        async with mcp_session(url, "work_backlog") as anonymous:
            refused = await tool_error(anonymous, "append_work_backlog_item", issue(9, acting_session_id=777))
            assert "acting_session_id" in refused  # not an argument at all
        async with mcp_session(url, "work_backlog", session_id=groomer) as session:
            first = await call(session, "append_work_backlog_item",
                               issue(1, payload={"ratings": {"value": 5}},
                                     decided_at="2026-09-01T04:00:00Z", gate_verdict="cleared"))
            assert (first["item"]["precedence"], first["item"]["added_via"], first["item"]["writing_session_id"]) == (
                6000, "mcp", groomer)
            assert first["item"]["payload"] == {"ratings": {"value": 5}}
            second = await call(session, "append_work_backlog_item", issue(2))
            assert second["item"]["precedence"] == 5990
            await call(session, "append_work_backlog_item", issue(3))
            dup = await tool_error(session, "append_work_backlog_item", issue(1))
            assert "conflict:" in dup and f"item {first['item']['id']}" in dup

            got = await call(session, "get_work_backlog")
            assert [i["key"] for i in got["items"]] == ["zimmer#1", "zimmer#2", "zimmer#3"]
            assert got["counts"]["queued"] == 3 and got["counts"]["in_flight"] == 0
            assert got["summary"].startswith("3 queued; 0 in flight")
            assert "count" in await tool_error(session, "pull_work_backlog_items", {"count": 11})
            assert "reason" in await tool_error(session, "pull_work_backlog_items", {
                "count": 1, "removals": [{"key": "zimmer#3", "reason": "not worth it"}]})

            args = {"keys": ["zimmer#1", "zimmer#2"],
                    "removals": [{"key": "zimmer#3", "reason": "issue_has_open_pr"}]}
            pulled = await call(session, "pull_work_backlog_items", args)
            assert [(r["key"], r["removal_reason"]) for r in pulled["removed"]] == [("zimmer#3", "issue_has_open_pr")]
            if pulled["failed"]:
                # A start that missed its deadline (a loaded machine) is reported, retry-safe: a
                # client pulls the same keys again, and gets the earlier start back beside the new one.
                assert all(f["retry_safe"] for f in pulled["failed"]), pulled["failed"]
                pulled = await call(session, "pull_work_backlog_items", args)
            else:
                assert pulled["sentence"].startswith("pulled 2"), pulled["sentence"]
            assert [s["item"]["key"] for s in pulled["started"]] == ["zimmer#1", "zimmer#2"], pulled
            assert not pulled["failed"], pulled["failed"]
            assert [s["precedence"] for s in pulled["started"]] == [12, 11]
            assert pulled["counts"]["queued"] == 0
            again = await call(session, "pull_work_backlog_items", args)  # a pull by keys is safe to retry
            assert [(s["item"]["key"], s["session_id"]) for s in again["started"]] == [
                (s["item"]["key"], s["session_id"]) for s in pulled["started"]]
            assert again["removed"] == []

            for started in pulled["started"]:
                s = (await http.get(f"/api/v1/sessions/{started['session_id']}")).json()
                assert (s["parent_session_id"], s["priority_class"]) == (groomer, "spot")
            children = (await http.get("/api/v1/sessions", params={"parent_session_id": groomer})).json()
            assert children["total"] == 2  # none doubled by the retry

            in_flight = await call(session, "get_work_backlog", {"status": "in_flight"})
            assert {i["key"] for i in in_flight["items"]} == {"zimmer#1", "zimmer#2"}
            assert in_flight["counts"]["in_flight"] == 2
