"""Stranded rows and holds over REST and MCP, end to end: httpx and the MCP SDK's client →
gateway → NATS → backlog, whose liveness sweep reads a fake GitHub server."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from mcp_client import call, mcp_session, tool_error

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, GithubForTheStack, world_in_stack

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
ITEMS = "/api/v1/work_backlog_items"
DAY = timedelta(days=1)


@pytest.fixture
def stack_setup(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    with GithubForTheStack(monkeypatch) as gh:
        yield gh


async def test_stranded_rows_and_holds_over_rest(stack, stack_setup) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    world = world_in_stack(services, stack_setup)
    for n in (1, 2, 3):
        world.gh.issue(REPO, n)
        await world.left_queue(n, ago=(10 - n) * DAY)
    await world.sweep()
    async with httpx.AsyncClient(base_url=url, headers=FLEET) as http:
        listed = (await http.get(ITEMS, params={"status": "stranded"})).json()
        assert [i["key"] for i in listed["items"]] == ["zimmer#1", "zimmer#2", "zimmer#3"]  # oldest first
        assert listed["counts"]["stranded"] == 3 and listed["items"][0]["liveness_state"] == "no_pr"
        first, second = listed["items"][0]["id"], listed["items"][1]["id"]

        r = await http.post(f"{ITEMS}/{first}/hold", json={"reason": "pick #1 or #2: ops owes it; see #9",
                                                           "acting_session_id": 77})
        assert r.status_code == 200, r.text
        assert (r.json()["held_by"], r.json()["held_by_session_id"], r.json()["status"]) == ("session 77", 77, "started")
        r = await http.post(f"{ITEMS}/{second}/hold", json={"reason": "rule on the declined PR"}, headers=OPERATOR)
        assert r.status_code == 200 and r.json()["held_by"] == "operator"
        again = await http.post(f"{ITEMS}/{first}/hold", json={"reason": "again"})
        assert again.status_code == 409 and again.json()["code"] == "refused"
        assert again.json()["details"]["refusal"] == "already_held"
        for bad in (b'{"reason": ""}', b'{"reason": "   "}', b"{}", b'{"reason": "x", "extra": 1}', b'{"reason": 5}',
                    b'{"reason": "nul\\u0000"}', b'{"reason": "lone \\ud800"}', b'{"reason": "' + b"x" * 200_000 + b'"}',
                    b'{"reason": ', b"[]"):
            r = await http.post(f"{ITEMS}/{first + 2}/hold", content=bad, headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (bad[:60], r.text[:300])
        assert (await http.post(f"{ITEMS}/999999/hold", json={"reason": "x"})).status_code == 404
        assert (await http.post(f"{ITEMS}/0/hold", json={"reason": "x"})).status_code == 422
        counts = (await http.get(ITEMS, params={"status": "awaiting_decision"})).json()
        assert counts["total"] == 2 and (counts["counts"]["stranded"], counts["counts"]["awaiting_decision"]) == (1, 2)
    assert (await world.row(first + 2)).held_at is None  # nothing half-written by the refused calls


async def test_hold_over_mcp_stamps_the_connections_session(stack, stack_setup) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    world = world_in_stack(services, stack_setup)
    world.gh.issue(REPO, 5)
    item = await world.left_queue(5, ago=9 * DAY)
    unread = await world.left_queue(6, ago=9 * DAY, key="zimmer#6")
    async with mcp_session(url, "work_backlog", session_id=41) as mcp:
        refused = await tool_error(mcp, "hold_work_backlog_item_for_decision", {"item_id": item, "reason": "x"})
        assert "not_read" in refused or "has not read" in refused
        await world.sweep()
        listed = await call(mcp, "get_work_backlog", {"status": "stranded"})
        assert [i["key"] for i in listed["items"]] == ["zimmer#5", "zimmer#6"]
        assert "2 stranded" in listed["summary"]
        held = await call(mcp, "hold_work_backlog_item_for_decision",
                          {"item_id": item, "reason": "seed the secret only a human holds: ops, see #12"})
        assert (held["held_by"], held["held_by_session_id"], held["held_liveness_state"]) == ("session 41", 41, "no_pr")
        gone = await tool_error(mcp, "hold_work_backlog_item_for_decision", {"item_id": unread, "reason": "x"})
        # #6 reads unknown: the sweep read it and GitHub did not show it (issue 32 #7: not "not read yet").
        assert "could not be read at its last liveness check" in gone and "not_read" in gone
