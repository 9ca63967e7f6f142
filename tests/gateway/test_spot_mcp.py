"""The spot-gate MCP tools end to end: the SDK's own client over HTTP → gateway → NATS → spot-gate.

All five services in-process on embedded PostgreSQL and NATS; nothing is mocked.
"""

from __future__ import annotations

import httpx
from mcp_client import call, mcp_session, tool_error

from zimmer_gateway.mcp.registry import KNOWN_GROUPS

FLEET = {"Authorization": "Bearer test-fleet-key"}

GROUP_TOOLS = {
    "core": {"get_system_ping", "get_session", "quick_search_sessions", "get_costs", "search_triggers"},
    "sessions": {"start_session", "action_session", "action_trigger", "wake_me_up_later", "get_session_logs"},
    "health": {"get_spot_policy", "action_spot_policy", "get_alerts"},
    "gate_decisions": {"get_gate_decisions"},
}
# Discretionary operations have no MCP tool at all (DESIGN §6).
DISCRETIONARY_WORDS = {"pin", "unpin", "place", "remove", "now"}




async def test_tool_listing_per_group(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    for group, extra in GROUP_TOOLS.items():
        async with mcp_session(url, None if group == "core" else group) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            expected = GROUP_TOOLS["core"] | extra
            # Other features may add tools to these groups; the spot tools are exactly where declared.
            spot_names = set().union(*GROUP_TOOLS.values())
            assert {n for n in tools if n in spot_names} == expected, group
            for name in GROUP_TOOLS["core"] - {"get_system_ping"}:
                assert tools[name].annotations.read_only_hint is True, name
    async with mcp_session(url, ",".join(g for g in KNOWN_GROUPS if g != "core")) as session:
        every = {t.name for t in (await session.list_tools()).tools}
    assert set().union(*GROUP_TOOLS.values()) <= every
    assert not [n for n in every if DISCRETIONARY_WORDS & set(n.split("_"))]


async def test_start_get_search_and_reclass(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(url, "sessions") as session:
        started = await call(session, "start_session", {"prompt": "look", "title": "t", "genesis": "web_ui",
                                                        "idempotency_key": "mcp-1"})
        sid = started["session"]["id"]
        assert started["created"] is True and started["turn"]["outcome"] == "passed"  # web_ui is priority
        again = await call(session, "start_session", {"prompt": "look", "idempotency_key": "mcp-1"})
        assert again == started  # the same key: the first answer, whole, its turn included

        got = await call(session, "get_session", {"session_id": sid})
        assert (got["genesis"], got["priority_class"], got["scheduling_class"], got["status"]) == (
            "web_ui", "priority", None, "running")
        assert f"Session {sid} is a priority session" in got["summary"]

        ranks = {}
        for prec in (2, 8, 5):
            made = await call(session, "start_session", {"genesis": "api", "precedence": prec,
                                                         "scheduling_class": "spot", "title": f"p{prec}"})
            ranks[prec] = made["session"]["id"]
        listing = await call(session, "quick_search_sessions", {"priority_class": "spot", "order": "precedence"})
        assert [s["id"] for s in listing["sessions"]] == [ranks[8], ranks[5], ranks[2]] and listing["total"] == 3
        by_genesis = await call(session, "quick_search_sessions", {"genesis": ["web_ui"], "status": ["running"]})
        assert [s["id"] for s in by_genesis["sessions"]] == [sid]

        moved = await call(session, "action_session", {"session_id": sid, "action": "change_scheduling_class",
                                                       "scheduling_class": "spot", "precedence": 6})
        assert (moved["priority_class"], moved["scheduling_class"], moved["precedence"]) == ("spot", "spot", 6)
        listing = await call(session, "quick_search_sessions", {"priority_class": "spot", "order": "precedence"})
        assert [s["id"] for s in listing["sessions"]] == [ranks[8], sid, ranks[5], ranks[2]]
        ranked = await call(session, "action_session", {"session_id": ranks[2], "action": "change_precedence",
                                                        "precedence": 9})
        assert ranked["precedence"] == 9

        # Bad input: a tool error naming the field, and nothing changed.
        text = await tool_error(session, "action_session", {"session_id": sid, "action": "change_precedence"})
        assert "invalid" in text and "field: precedence" in text
        text = await tool_error(session, "action_session", {"session_id": sid, "action": "change_precedence",
                                                            "precedence": 1, "scheduling_class": "priority"})
        assert "field: scheduling_class" in text
        text = await tool_error(session, "action_session", {"session_id": sid, "action": "change_scheduling_class",
                                                            "scheduling_class": "urgent"})
        assert "scheduling_class" in text
        text = await tool_error(session, "action_session", {"session_id": sid, "action": "change_precedence",
                                                            "precedence": "high"})
        assert "precedence" in text
        assert "session_id" in await tool_error(session, "get_session", {"session_id": 0})
        assert "not_found" in await tool_error(session, "get_session", {"session_id": 999999})
        assert "field: parent_session_id" in await tool_error(session, "start_session", {"parent_session_id": 999999})
        unchanged = await call(session, "get_session", {"session_id": sid})
        assert (unchanged["scheduling_class"], unchanged["precedence"]) == ("spot", 6)

        trig = await call(session, "action_trigger", {"action": "create", "kind": "schedule", "name": "nightly",
                                                      "precedence": 4})
        tid = trig["trigger"]["id"]
        assert "field: name" in await tool_error(session, "action_trigger", {"action": "create", "kind": "slack"})
        assert "field: trigger_id" in await tool_error(session, "action_trigger", {"action": "invoke"})
        assert "field: kind" in await tool_error(session, "action_trigger", {"action": "update", "trigger_id": tid,
                                                                             "kind": "slack"})
        updated = await call(session, "action_trigger", {"action": "update", "trigger_id": tid,
                                                         "scheduling_class": "priority"})
        assert updated["trigger"]["scheduling_class"] == "priority"
        invoked = await call(session, "action_trigger", {"action": "invoke", "trigger_id": tid, "title": "by hand"})
        assert (invoked["spawned"]["session"]["genesis"], invoked["spawned"]["session"]["title"]) == ("api", "by hand")
        found = await call(session, "search_triggers", {"name_contains": "night"})
        assert [(t["id"], t["scheduling_class"], t["precedence"]) for t in found["triggers"]] == [(tid, "priority", 4)]
        costs = await call(session, "get_costs")
        assert "claude-opus-4" in costs["prices_per_million_tokens"]

    async with mcp_session(url) as core_only:  # a group the connection did not ask for is not callable
        hidden = await core_only.call_tool("start_session", {"prompt": "x"})
        assert hidden.is_error and "Unknown tool" in hidden.content[0].text
        hidden = await core_only.call_tool("action_spot_policy", {"action": "reset_genesis_classes"})
        assert hidden.is_error and "Unknown tool" in hidden.content[0].text


async def test_spot_policy_and_gate_decisions(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(url, "health,gate_decisions,sessions") as session:
        empty = await call(session, "get_spot_policy")
        assert "not calibrated" in empty["summary"] and "$0.00" not in empty["summary"]

        async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=10) as http:
            r = await http.post("/api/v1/quota/readings", json={
                "account": "acct-1", "status": "active", "five_hour": {"utilization": 0.99},
                "seven_day": {"utilization": 0.4}})
            assert r.status_code == 202
        result = await session.call_tool("get_spot_policy", {})
        assert not result.is_error
        view = result.structured_content
        assert [w["calibrated"] for w in view["windows"]] == [False, False]
        assert all(w["capacity_dollars"] is None and w["reserve_dollars"] is None for w in view["windows"])
        summary = view["summary"]
        assert "5-hour window: not calibrated" in summary and "7-day window: not calibrated" in summary
        assert "reserve 20%" in summary and "99.0% used" in summary
        assert "A new spot session now: held (at_utilization_limit)" in summary
        assert "$0.00" not in summary and "$0.00" not in result.content[0].text

        held = await call(session, "start_session", {"genesis": "api", "prompt": "wait for me"})
        sid = held["session"]["id"]
        assert held["turn"]["outcome"] == "held"
        got = await call(session, "get_session", {"session_id": sid})
        assert (got["status"], got["spot_hold_reason"], got["spot_hold_count"], got["queued_prompt_coming"]) == (
            "waiting", "at_utilization_limit", 1, True)
        assert got["spot_hold_retry_at"] is not None
        assert "queued prompt is still coming" in got["summary"] and "at_utilization_limit" in got["summary"]

        decisions = await call(session, "get_gate_decisions", {"session_id": sid, "limit": 5})
        [row] = decisions["decisions"]
        assert (row["allowed"], row["reason"], row["ceiling"]) == (False, "at_utilization_limit", "spot_budget")
        assert "limit" in await tool_error(session, "get_gate_decisions", {"session_id": sid, "limit": 0})
        assert "not_found" in await tool_error(session, "get_gate_decisions", {"session_id": 999999})
        assert "Held: 1 at_utilization_limit" in (await call(session, "get_spot_policy"))["summary"]

        before = await call(session, "action_spot_policy", {"action": "set_gating", "max_sessions": 6,
                                                            "reserve_seven_day_percent": 15})
        assert before["max_sessions"] == 6 and "reserve 15%" in before["summary"]
        for args, field in (({"reserve_five_hour_percent": 140}, "reserve_five_hour_percent"),
                            ({"max_sessions": -1, "gating_enabled": False}, "max_sessions"),
                            ({"gating_enabled": False, "genesis": "api"}, "field: genesis"),
                            ({}, "field: gating_enabled")):  # the service's refusal: nothing to change
            text = await tool_error(session, "action_spot_policy", {"action": "set_gating", **args})
            assert field in text, (args, text)
        after = await call(session, "get_spot_policy")
        keep = ("gating_enabled", "max_sessions", "windows", "genesis_classes")
        assert {k: after[k] for k in keep} == {k: before[k] for k in keep}  # refused calls changed nothing

        assert "field: genesis" in await tool_error(session, "action_spot_policy", {"action": "promote_genesis"})
        assert "trigger" in await tool_error(session, "action_spot_policy",
                                             {"action": "promote_genesis", "genesis": "slack"})
        promoted = await call(session, "action_spot_policy", {"action": "promote_genesis", "genesis": "api"})
        assert {g["genesis"]: g["effective"] for g in promoted["genesis_classes"]}["api"] == "priority"
        reset = await call(session, "action_spot_policy", {"action": "reset_genesis_classes"})
        assert {g["genesis"]: g["effective"] for g in reset["genesis_classes"]}["api"] == "spot"

        # Making the held session priority starts it now.
        started = await call(session, "action_session", {"session_id": sid, "action": "change_scheduling_class",
                                                         "scheduling_class": "priority"})
        assert (started["status"], started["spot_hold_reason"]) == ("running", None)


def test_policy_summary_speaks_dollars_only_for_calibrated_windows() -> None:
    from zimmer_common.contracts import spot as c
    from zimmer_common.contracts import spot_policy as p
    from zimmer_gateway.mcp.spot_tools import describe_policy

    def window(name: str, calibrated: bool, left: float) -> p.WindowPosture:
        cap = 450.0 if calibrated else None
        return p.WindowPosture(
            window=name, calibrated=calibrated, capacity_dollars=cap, utilization=0.5, accounts_averaged=2,
            reserve_percent=20, reserve_dollars=90.0 if calibrated else None,
            spot_budget_dollars=360.0 if calibrated else None,
            spot_budget_left_dollars=left * 450 if calibrated else None, spot_budget_left_fraction=left,
            minutes_to_reset=150, sustainable_rate=0.9 if calibrated else 0.001, fleet_burn=0.0)

    view = p.PolicyView(
        gating_enabled=True, max_sessions=10, accounts_in_pool=2, running={"priority": 1, "spot": 0},
        held={"fleet_at_cap": 2}, running_slots=1,
        windows=[window("five_hour", True, 0.3), window("seven_day", False, 0.0)],
        reserve_percent={"five_hour": 20, "seven_day": 20},
        decision=c.DecisionView(allowed=True, reason="within_limits", ceiling=None, sentence="Allowed."),
        unblock=p.UnblockView(state="not_blocked", at=None, accounts_out=0, accounts_read=2,
                              sentence="Work is not blocked.", next_weekly_reset_at=None, accounts_week_spent=0),
        genesis_classes=[], triggers=[])
    text = describe_policy(view)
    assert "5-hour window: worth $450.00" in text and "reserve 20% ($90.00)" in text
    assert "spot budget left $135.00 (30.0% of the window)" in text and "sustainable $0.90/min" in text
    assert "7-day window: not calibrated" in text and "spot budget left 0.0% of the window" in text
    assert "resets in 2h 30m" in text and "Running: 1 priority. Held: 2 fleet_at_cap." in text
    seven = text.splitlines()[2]
    assert "$" not in seven  # an uncalibrated window never shows dollars, least of all $0.00
    over = describe_policy(view.model_copy(update={"windows": [window("five_hour", True, -0.1)]}))
    assert "no spot budget left ($45.00 over)" in over and "sustainable none (over budget)" in over
