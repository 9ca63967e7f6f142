"""Issue 25 through the surfaces, end to end (httpx and the MCP SDK's client → gateway → NATS →
spot-gate, and on to the sweeper for the session's log): REST and MCP carry the fixes, and an
operator sees them where they look."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
from mcp_client import call, mcp_session
from pool_readings import readings
from problems import invalid_fields

from zimmer_common.contracts.runtime import SessionStatusReport


async def test_a_ceiling_pause_reaches_the_sessions_log_over_rest(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "What a pause does": "The session log — A warning line naming the window, what it
    ran out of, and what brings the session back." #7: `GET /api/v1/sessions/51/logs` was empty
    after the pause."""
    services, _url = stack
    await readings(services, 0.1)
    sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "prompt": "go"})).json()["session"]["id"]
    await readings(services, 0.95)
    await services["spot-gate"].app.ceiling.run()
    lines: list[dict] = []  # type: ignore[type-arg]  # JSON of any shape
    for _ in range(100):  # the outbox relays it; the sweeper's ingest writes it
        lines = (await http.get(f"/api/v1/sessions/{sid}/logs", params={"levels": ["warning"]})).json()["lines"]
        if lines:
            break
        await asyncio.sleep(0.1)
    [line] = lines
    assert "Paused mid-run for quota headroom: the 5-hour window ran out of its spot budget" in line["message"]
    assert "It resumes when the windows have 5 points more headroom" in line["message"]


async def test_decisions_at_an_instant_and_the_replayed_spawn_over_rest(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#8 and #14 on REST: `?at=` gives the decision in force then; a replayed keyed spawn is the
    first answer whole, turn included (it was 200 with `turn: null`)."""
    services, _url = stack
    await readings(services, 0.1)
    body = {"genesis": "api", "prompt": "go", "idempotency_key": "rest-14"}
    first = await http.post("/api/v1/sessions", json=body)
    again = await http.post("/api/v1/sessions", json=body)
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    assert first.json()["turn"]["outcome"] == "admitted"
    sid = first.json()["session"]["id"]
    later = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    at = await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"at": later})
    assert at.status_code == 200 and [(d["event"], d["reason"]) for d in at.json()["decisions"]] == [
        ("turn", "within_limits")]
    early = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert (await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"at": early})).json()["decisions"] == []
    assert invalid_fields(await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"at": "yesterday"})) == [
        "at"]
    both = await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"at": later, "since": early})
    assert both.status_code == 422 and "give at alone" in both.text


async def test_mcp_promote_starts_a_paused_session_and_tells_the_truth(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#12: `change_scheduling_class` → priority on a paused session starts it now ("as a side
    effect of change_scheduling_class to priority"). #13: get_session no longer says a prompt
    queued behind a running turn "is delivered when the turn is admitted". #10: start_session
    takes the fork."""
    services, url = stack
    await readings(services, 0.1)
    async with mcp_session(url, "sessions,gate_decisions") as session:
        started = await call(session, "start_session", {"prompt": "go", "genesis": "api"})
        sid = started["session"]["id"]
        await call(session, "action_session", {"session_id": sid, "action": "pause_into_spot_queue", "halt": True})
        await services["spot-gate"].app.report_status(SessionStatusReport(session_id=sid, status="needs_input"))
        promoted = await call(session, "action_session", {"session_id": sid, "action": "change_scheduling_class",
                                                          "scheduling_class": "priority"})
        assert (promoted["status"], promoted["paused_by"]) == ("running", None)
        log = await call(session, "get_gate_decisions", {"session_id": sid, "limit": 1})
        assert log["decisions"][0]["event"] == "promote"

        await call(session, "action_session", {"session_id": sid, "action": "start_now"})
        got = await call(session, "get_session", {"session_id": sid})
        assert "when the turn is admitted" not in got["summary"]  # nothing queued: nothing said
        # A follow-up queued behind the running turn: delivered at its turn boundary.
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer test-fleet-key"}) as http:
            r = await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "follow_up", "prompt": "next"})
            assert r.json()["outcome"] == "queued"
        got = await call(session, "get_session", {"session_id": sid})
        assert "turn boundary" in got["summary"] and "when the turn is admitted" not in got["summary"]

        fork = await call(session, "start_session", {"prompt": "fork", "forked_from_session_id": sid})
        assert fork["session"]["forked_from_session_id"] == sid and fork["session"]["genesis"] == "api"
