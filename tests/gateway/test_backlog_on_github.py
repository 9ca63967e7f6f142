"""Each row's issue as GitHub last showed it on the REST index and get_work_backlog (issue 27 #2):
the same `github` field the Issues page shows, read by the backlog's snapshot job from a fake
GitHub server, passed through every surface unchanged."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
from mcp_client import call, mcp_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, stack_setup, world_in_stack  # noqa: F401 - stack_setup: the fixture

FLEET = {"Authorization": "Bearer test-fleet-key"}


def by_key(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["key"]: i for i in items}


async def test_rest_and_mcp_carry_each_rows_issue_state(stack, stack_setup) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    world = world_in_stack(services, stack_setup)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for n in (1, 2):
            world.gh.issue(REPO, n)
            r = await http.post("/api/v1/work_backlog_items", json={
                "key": f"zimmer#{n}", "issue_url": f"https://github.com/{REPO}/issues/{n}", "estimated_cost": "small"})
            assert r.status_code == 201, r.text
            assert r.json()["item"]["github"] is None  # a write's own row: the append read no GitHub
        await world.app.snapshot.run()
        world.gh.issues[(REPO, 2)].state = "CLOSED"
        await world.app.snapshot.run()
        rest = by_key((await http.get("/api/v1/work_backlog_items")).json()["items"])
        schema = (await http.get("/openapi.json")).json()
    closed, still_open = rest["zimmer#2"]["github"], rest["zimmer#1"]["github"]
    assert (closed["state"], closed["read_by"], closed["leaves_as"]) == ("closed", "snapshot", "issue_closed")
    assert closed["read_at"] is not None
    assert (still_open["state"], still_open["leaves_as"]) == ("open", None)
    assert "IssueState" in schema["components"]["schemas"]  # documented at /docs with its words

    async with mcp_session(base, groups="work_backlog") as session:
        mcp = by_key((await call(session, "get_work_backlog", {}))["items"])
    assert mcp["zimmer#2"]["github"] == closed and mcp["zimmer#1"]["github"] == still_open
