"""The alerts ledger's surfaces on a running stack: a page sent by one service (through its
outbox) is on `GET /api/v1/alerts` and MCP `get_alerts` (health group); resolving a condition is
operator only; bad filters are 422s."""

from __future__ import annotations

import asyncio

import httpx
from mcp_client import call, mcp_session

OPERATOR = {"Authorization": "Bearer test-operator-token"}


async def test_a_page_reaches_the_ledger_on_rest_and_mcp(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    await services["backlog"].pager.report(title="Liveness sweep failed", fingerprint=["backlog", "liveness"],
                                           message="GitHub answered 502", condition_key="liveness:github",
                                           context={"status": 502})
    for _ in range(100):
        body = (await http.get("/api/v1/alerts")).json()
        if body["issues"]:
            break
        await asyncio.sleep(0.05)
    [issue] = body["issues"]
    assert (issue["title"], issue["source"], issue["events"], issue["level"]) == (
        "Liveness sweep failed", "backlog", 1, "error")
    assert [c["condition_key"] for c in body["conditions"]] == ["liveness:github"]
    assert (await http.get("/api/v1/alerts", params={"source": "sweeper"})).json()["issues"] == []
    assert (await http.get("/api/v1/alerts", params={"level": "info"})).status_code == 422
    assert (await http.get("/api/v1/alerts", params={"limit": 0})).status_code == 422

    async with mcp_session(url, groups="health") as session:
        via_mcp = await call(session, "get_alerts", {"state": "all"})
    assert [i["title"] for i in via_mcp["issues"]] == ["Liveness sweep failed"]

    refused = await http.post("/api/v1/alerts/conditions/liveness:github/resolve")
    assert refused.status_code == 403  # the fleet key cannot resolve
    async with httpx.AsyncClient(base_url=url, headers=OPERATOR) as operator:
        resolved = await operator.post("/api/v1/alerts/conditions/liveness:github/resolve")
        assert resolved.status_code == 200 and resolved.json()["still_true"] is False
        missing = await operator.post("/api/v1/alerts/conditions/nope/resolve")
        assert missing.status_code == 404


async def test_a_page_survives_the_alerts_service_being_down(stack, settings_factory, http) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Sent while the alerts service is stopped, a page waits in JetStream (the sender's outbox
    relayed it) and is recorded once the alerts service is back."""
    from zimmer_alerts.service import build

    services, _url = stack
    await services["alerts"].stop()
    for n in range(5):
        await services["spot-gate"].pager.report(title="Quota sampler failed", fingerprint=["spot", "sampler"],
                                                 message=f"attempt {n}", context={"attempt": n})
    await asyncio.sleep(0.5)
    services["alerts"] = build(settings_factory(http_host="127.0.0.1"))
    await services["alerts"].start()
    for _ in range(100):
        issues = (await http.get("/api/v1/alerts")).json()["issues"]
        if issues and issues[0]["events"] == 5:
            break
        await asyncio.sleep(0.05)
    assert [(i["title"], i["events"]) for i in issues] == [("Quota sampler failed", 5)]
