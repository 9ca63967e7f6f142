"""Pause into the spot queue and start now over REST and MCP (action_session), end to end:
httpx and the MCP SDK's client → gateway → NATS → spot-gate. Seed 004's parity table lists both
for agents; start now stays gated for spot sessions, so it is not a queue jump."""

from __future__ import annotations

import httpx
from mcp_client import call, mcp_session, tool_error
from pool_readings import readings
from problems import invalid_fields, refused


async def test_park_and_start_now_over_rest(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    await readings(services, 0.1)
    sid = (await http.post("/api/v1/sessions", json={"genesis": "web_ui", "prompt": "go"})).json()["session"]["id"]
    r = await http.post(f"/api/v1/sessions/{sid}/pause_into_spot_queue", json={"resume_with": "pick up", "halt": True})
    assert r.status_code == 200, r.text
    assert (r.json()["paused_by"], r.json()["spot_pause_reason"], r.json()["priority_class"]) == (
        "spot_quota", "user_spot_queue", "spot")
    assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/pause_into_spot_queue", json={"halt": "x"})) == [
        "halt"]
    assert (await http.post("/api/v1/sessions/999999/start_now")).status_code == 404
    early = await http.post(f"/api/v1/sessions/{sid}/start_now")  # the stop is not acknowledged yet
    assert early.status_code == 409 and "being stopped" in refused(early, 409)["detail"]
    await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "needs_input"})
    assert (await http.get(f"/api/v1/sessions/{sid}")).json()["status"] == "waiting"
    started = await http.post(f"/api/v1/sessions/{sid}/start_now")
    assert started.status_code == 200 and started.json()["did"] == "resumed", started.text
    assert started.json()["session"]["status"] == "running"


async def test_park_and_start_now_over_mcp(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    await readings(services, 0.1)
    async with mcp_session(url, "sessions") as mcp:
        spawned = await call(mcp, "start_session", {"prompt": "go", "title": "t"})
        sid = spawned["session"]["id"]
        parked = await call(mcp, "action_session", {"session_id": sid, "action": "pause_into_spot_queue"})
        assert parked["paused_by"] == "spot_quota"
        wrong = await tool_error(mcp, "action_session", {"session_id": sid, "action": "start_now", "precedence": 5})
        assert "precedence does not apply to start_now" in wrong
        await readings(services, 0.95)
        await services["spot-gate"].app.report_status(
            __import__("zimmer_common.contracts.runtime", fromlist=["x"]).SessionStatusReport(
                session_id=sid, status="needs_input"))
        held = await call(mcp, "action_session", {"session_id": sid, "action": "start_now"})
        assert held["did"] == "held" and "5-hour" in held["sentence"]


async def test_reorder_demote_and_run_as_spot_over_rest_and_mcp(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack

    async def spawn(**body: object) -> dict:  # type: ignore[type-arg]  # JSON of any shape
        r = await http.post("/api/v1/sessions", json={"genesis": "api", "start": False, **body})
        assert r.status_code == 201, r.text
        return r.json()["session"]

    upper, lower, moved = await spawn(precedence=21), await spawn(precedence=20), await spawn(precedence=0)
    r = await http.patch(f"/api/v1/sessions/{moved['id']}/reorder_precedence",
                         json={"above_session_id": upper["id"], "below_session_id": lower["id"]})
    assert r.status_code == 200, r.text
    assert r.json()["session"]["precedence"] == 20 and len(r.json()["nudged"]) == 2
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{moved['id']}/reorder_precedence", json={})) != []
    assert (await http.patch(f"/api/v1/sessions/{moved['id']}/reorder_precedence",
                             json={"above_session_id": 999999})).status_code == 404
    boss = await spawn(genesis="web_ui", precedence=3)
    r = await http.patch(f"/api/v1/sessions/{boss['id']}", json={"scheduling_class": "spot", "place": "top_of_spot"})
    assert r.status_code == 200 and r.json()["precedence"] == 27, r.text  # 22 (nudged) + 5
    assert (await http.patch(f"/api/v1/sessions/{boss['id']}", json={"place": "top_of_spot"})).status_code == 422
    async with mcp_session(url, "sessions") as mcp:
        spawned = await call(mcp, "start_session", {"prompt": "go", "scheduling_class": "spot", "genesis": "web_ui",
                                                    "precedence_above_top_spot": True})
        assert spawned["session"]["precedence"] == 32
        both = await tool_error(mcp, "start_session", {"precedence": 1, "precedence_above_top_spot": True})
        assert "not both" in both
        other = await call(mcp, "start_session", {"prompt": "x", "genesis": "web_ui"})
        demoted = await call(mcp, "action_session", {"session_id": other["session"]["id"],
                                                     "action": "change_scheduling_class", "scheduling_class": "spot",
                                                     "place": "top_of_spot"})
        assert demoted["precedence"] == 37


async def test_archive_and_unarchive_over_rest(http: httpx.AsyncClient) -> None:
    sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]["id"]
    r = await http.post(f"/api/v1/sessions/{sid}/archive")
    assert r.status_code == 200 and r.json()["status"] == "archived" and r.json()["archived_at"], r.text
    assert (await http.post(f"/api/v1/sessions/{sid}/archive")).status_code == 200  # nothing changes
    r = await http.post(f"/api/v1/sessions/{sid}/unarchive")
    assert r.status_code == 200 and r.json()["status"] == "waiting"
    again = await http.post(f"/api/v1/sessions/{sid}/unarchive")
    assert again.status_code == 409 and refused(again, 409)["code"] == "refused"
    assert (await http.post("/api/v1/sessions/999999/archive")).status_code == 404


async def test_pause_until_restart_and_wake_me_up_later_over_rest_and_mcp(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    from datetime import UTC, datetime, timedelta

    services, url = stack
    await readings(services, 0.1)
    sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "prompt": "go"})).json()["session"]["id"]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    r = await http.post(f"/api/v1/sessions/{sid}/pause_until", json={"until": later, "prompt": "wake"})
    assert r.status_code == 200 and r.json()["next_wake_at"], r.text
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/pause_until", json={"until": past})) == ["until"]
    await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "needs_input"})
    no = await http.post(f"/api/v1/sessions/{sid}/restart")
    assert no.status_code == 409 and "Take the next candidate" in refused(no, 409)["detail"]
    listed = (await http.get("/api/v1/sessions", params={"status": "waiting"})).json()["sessions"]
    assert [s["paused_until"] is not None for s in listed if s["id"] == sid] == [True]
    async with mcp_session(url, "sessions", session_id=sid) as mcp:
        found = await call(mcp, "quick_search_sessions", {"status": ["waiting"]})
        assert [s["paused_until"] is not None for s in found["sessions"] if s["id"] == sid] == [True]
        report = await call(mcp, "get_session", {"session_id": sid})
        assert "**Paused:** yes" in report["summary"]
        refusal = await tool_error(mcp, "action_session", {"session_id": sid, "action": "restart"})
        assert "paused until" in refusal
        slept = await call(mcp, "wake_me_up_later", {"minutes": 30, "prompt": "look again"})
        assert slept["id"] == sid and slept["next_wake_at"]  # the connection's own session
        both = await tool_error(mcp, "wake_me_up_later", {"minutes": 5, "at": later})
        assert "not both" in both
