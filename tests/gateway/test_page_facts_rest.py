"""What the operator pages read that the API now carries too (issue 32 #6): a session's spend on
get_session (the spend ledger's reports naming it), and each alert issue's condition and whether it
still pages (the alerts ledger), before and after a Resolve."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx

from zimmer_common.contracts.runtime import INGEST_SPEND, SpendReport

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}


async def test_get_session_carries_what_it_spent(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    bus = services["gateway"].bus
    now = datetime.now(UTC)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]["id"]
        other = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]["id"]
        assert (await http.get(f"/api/v1/sessions/{sid}")).json()["spend"] is None  # nothing reported yet
        reports = [(sid, "claude-opus-4", 1_000_000, now - timedelta(minutes=30)),  # $75 at list price
                   (sid, "claude-opus-4", 1_000_000, now),
                   (sid, "gpt-5-codex", 1_000_000, now - timedelta(minutes=10)),  # $10
                   (other, "claude-opus-4", 1_000_000, now)]
        for i, (session, model, tokens, at) in enumerate(reports):
            harness = "codex" if "codex" in model else "claude_code"
            await bus.publish_event(INGEST_SPEND, "spend", SpendReport(
                request_id=f"page-facts-{i}", session_id=session, harness=harness, model=model,
                output_tokens=tokens, at=at), event_id=f"page-facts-{i}")
        for _ in range(100):
            spend = (await http.get(f"/api/v1/sessions/{sid}")).json()["spend"]
            if spend and spend["reports"] == 3:
                break
            await asyncio.sleep(0.1)
        listed = (await http.get("/api/v1/sessions", params={"limit": 5})).json()["sessions"]
    assert spend["dollars"] == 160.0 and spend["output_tokens"] == 3_000_000
    assert spend["models"] == ["claude_code/claude-opus-4", "codex/gpt-5-codex"]  # dearest first
    assert datetime.fromisoformat(spend["last_at"]) - datetime.fromisoformat(spend["first_at"]) == timedelta(minutes=30)
    assert all(s["spend"] is None for s in listed)  # get_session's, not every list's


async def test_each_alert_says_whether_it_still_pages_and_resolve_ends_it(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    pager = services["backlog"].pager
    await pager.report(title="Disk nearly full", fingerprint=["disk", "host-a"], message="3 GB left on host-a",
                       condition_key="disk:host-a", snippet_source=RuntimeError("df says 97%"))
    await pager.report(title="Sweep crashed", fingerprint=["sweep"], message="it raised")
    await pager.report(title="Slow answer", fingerprint=["slow"], message="GitHub took 9 s", level="warning")
    async with httpx.AsyncClient(base_url=base, headers=OPERATOR) as http:
        for _ in range(100):
            issues = {i["title"]: i for i in (await http.get("/api/v1/alerts")).json()["issues"]}
            if len(issues) == 3:
                break
            await asyncio.sleep(0.1)
        disk, crash, slow = issues["Disk nearly full"], issues["Sweep crashed"], issues["Slow answer"]
        assert (disk["condition_key"], disk["still_firing"], disk["firing_until"]) == ("disk:host-a", True, None)
        assert disk["last_message"] == "3 GB left on host-a" and "df says 97%" in disk["last_snippet"]
        assert crash["condition_key"] is None and crash["still_firing"] is True
        assert datetime.fromisoformat(crash["firing_until"]) - datetime.fromisoformat(crash["last_seen"]) == \
            timedelta(hours=4)  # one repeat interval after its newest event
        assert (slow["still_firing"], slow["firing_until"]) == (False, None)  # a warning pages once
        resolved = await http.post("/api/v1/alerts/conditions/disk:host-a/resolve")
        assert resolved.status_code == 200, resolved.text
        disk = next(i for i in (await http.get("/api/v1/alerts")).json()["issues"] if i["title"] == "Disk nearly full")
    assert disk["still_firing"] is False and disk["resolved_at"] is not None
