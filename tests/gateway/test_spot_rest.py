"""The spot-gate REST API end to end: httpx → gateway → NATS → spot-gate → PostgreSQL.

All five services in-process on embedded PostgreSQL and NATS; nothing is mocked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from problems import invalid_fields, refused

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}




async def test_spawn_read_search_and_patch_sessions(http: httpx.AsyncClient) -> None:
    created = await http.post("/api/v1/sessions", json={"title": "human", "genesis": "web_ui",
                                                        "idempotency_key": "key-1", "start": False})
    assert created.status_code == 201, created.text
    first = created.json()
    assert first["created"] is True and first["turn"] is None
    sid = first["session"]["id"]
    again = await http.post("/api/v1/sessions", json={"title": "human", "genesis": "web_ui",
                                                      "idempotency_key": "key-1", "start": False})
    assert again.status_code == 201 and again.json() == first  # the first answer, whole

    got = (await http.get(f"/api/v1/sessions/{sid}")).json()
    assert (got["genesis"], got["scheduling_class"], got["priority_class"], got["precedence"], got["status"]) == (
        "web_ui", None, "priority", 0, "waiting")

    spot = {}
    for prec in (5, 1, 9):
        r = await http.post("/api/v1/sessions", json={"genesis": "api", "precedence": prec, "start": False})
        assert r.status_code == 201
        spot[prec] = r.json()["session"]["id"]

    async def ids(**params: Any) -> list[int]:
        r = await http.get("/api/v1/sessions", params=params)
        assert r.status_code == 200, r.text
        return [s["id"] for s in r.json()["sessions"]]

    assert await ids(priority_class="spot", order="precedence") == [spot[9], spot[5], spot[1]]
    assert await ids(priority_class="priority") == [sid]
    assert set(await ids(status=["waiting", "running"])) == {sid, *spot.values()}
    assert await ids(status="running") == []
    assert await ids(genesis=["web_ui", "unknown"]) == [sid]
    listing = (await http.get("/api/v1/sessions", params={"order": "precedence", "limit": 2, "offset": 1})).json()
    assert listing["total"] == 4 and [s["id"] for s in listing["sessions"]] == [spot[5], spot[1]]

    patched = await http.patch(f"/api/v1/sessions/{sid}", json={"scheduling_class": "spot", "precedence": 7})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["scheduling_class"], patched.json()["priority_class"], patched.json()["precedence"]) == (
        "spot", "spot", 7)
    assert await ids(priority_class="spot", order="precedence") == [spot[9], sid, spot[5], spot[1]]
    derived = (await http.patch(f"/api/v1/sessions/{sid}", json={"scheduling_class": "derive"})).json()
    assert (derived["scheduling_class"], derived["priority_class"], derived["precedence"]) == (None, "priority", 7)

    # Refused PATCHes change nothing, and each names its field.
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}", json={"precedence": "high"})) == ["precedence"]
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}",
                                          json={"scheduling_class": "spot", "precedence": "high"})) == ["precedence"]
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}",
                                          json={"scheduling_class": "urgent"})) == ["scheduling_class"]
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}", json={"precendence": 3})) == ["precendence"]
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}", json={"precedence": 2**40})) == ["precedence"]
    assert invalid_fields(await http.patch(f"/api/v1/sessions/{sid}", json={})) == ["scheduling_class"]  # service
    assert (await http.get(f"/api/v1/sessions/{sid}")).json() == derived

    # Unknown ids are 404 problems; ids that are not positive integers are 422 naming the path field.
    for method, path, body in (("GET", "/api/v1/sessions/999999", None),
                               ("PATCH", "/api/v1/sessions/999999", {"precedence": 1}),
                               ("POST", "/api/v1/sessions/999999/turns", {"kind": "follow_up"}),
                               ("POST", "/api/v1/sessions/999999/status", {"status": "running"}),
                               ("GET", "/api/v1/sessions/999999/gate_decisions", None)):
        problem = refused(await http.request(method, path, json=body), 404)
        assert problem["code"] == "not_found" and problem["details"] == {"session_id": 999999}
    assert invalid_fields(await http.get("/api/v1/sessions/abc")) == ["session_id"]
    assert invalid_fields(await http.get("/api/v1/sessions/0")) == ["session_id"]
    assert invalid_fields(await http.get(f"/api/v1/sessions/{2**64}")) == ["session_id"]

    # Spawn and search refusals name the field too.
    assert invalid_fields(await http.post("/api/v1/sessions", json={"scheduling_class": "urgent"})) == [
        "scheduling_class"]
    assert invalid_fields(await http.post("/api/v1/sessions", json={"genesis": "email"})) == ["genesis"]
    assert invalid_fields(await http.post("/api/v1/sessions", json={"parent_session_id": 999999})) == [
        "parent_session_id"]  # the service's check: details.field
    assert invalid_fields(await http.get("/api/v1/sessions", params={"order": "rank"})) == ["order"]
    assert invalid_fields(await http.get("/api/v1/sessions", params={"limit": 0})) == ["limit"]
    assert invalid_fields(await http.get("/api/v1/sessions", params={"status": "asleep"})) == ["status"]
    assert (await http.get("/api/v1/sessions")).json()["total"] == 4  # no refused spawn wrote a row

    # A child inherits genesis and class, and lands one above its parent.
    child = (await http.post("/api/v1/sessions", json={"parent_session_id": spot[9], "start": False})).json()
    assert (child["session"]["genesis"], child["session"]["precedence"]) == ("api", 10)
    assert await ids(parent_session_id=spot[9]) == [child["session"]["id"]]

    # Status for scripts.
    running = await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "running"})
    assert running.status_code == 200 and running.json()["status"] == "running"
    assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "asleep"})) == ["status"]


async def test_held_turn_then_priority_starts_it(http: httpx.AsyncClient) -> None:
    now = datetime.now(UTC)
    reading = {"account": "acct-1", "status": "active",
               "five_hour": {"utilization": 0.99, "resets_at": (now + timedelta(hours=2)).isoformat()},
               "seven_day": {"utilization": 0.5, "resets_at": (now + timedelta(days=3)).isoformat()}}
    recorded = await http.post("/api/v1/quota/readings", json=reading)
    assert recorded.status_code == 202 and recorded.json() == {"ok": True}
    bad = {**reading, "five_hour": {"utilization": 11}}
    assert invalid_fields(await http.post("/api/v1/quota/readings", json=bad)) == ["five_hour.utilization"]
    assert invalid_fields(await http.post("/api/v1/quota/readings", json={**reading, "status": "tired"})) == ["status"]

    spawned = await http.post("/api/v1/sessions", json={"genesis": "api", "title": "spot work", "prompt": "do it"})
    assert spawned.status_code == 201, spawned.text
    body = spawned.json()
    assert body["turn"]["outcome"] == "held"
    assert body["turn"]["decision"]["reason"] == "at_utilization_limit"
    session = body["session"]
    sid = session["id"]
    assert (session["status"], session["priority_class"], session["spot_hold_reason"], session["spot_hold_count"],
            session["queued_prompt_coming"]) == ("waiting", "spot", "at_utilization_limit", 1, True)
    assert session["spot_hold_retry_at"] is not None

    queued = await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "follow_up", "prompt": "and this"})
    assert queued.status_code == 202 and queued.json()["outcome"] == "queued"
    assert queued.json()["session"]["enqueued_messages"] == 1
    assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "nap"})) == ["kind"]
    assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/turns", json={})) == ["kind"]

    decisions = await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"limit": 10})
    assert decisions.status_code == 200
    [held] = decisions.json()["decisions"]
    assert (held["allowed"], held["reason"], held["ceiling"], held["turn_kind"]) == (
        False, "at_utilization_limit", "spot_budget", "first_start")
    five = next(w for w in held["numbers"]["windows"] if w["window"] == "five_hour")
    assert five["utilization"] == pytest.approx(0.99) and five["calibrated"] is False
    assert held["sentence"]
    assert invalid_fields(await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"limit": 0})) == ["limit"]

    promoted = await http.patch(f"/api/v1/sessions/{sid}", json={"scheduling_class": "priority"})
    assert promoted.status_code == 200, promoted.text
    assert (promoted.json()["status"], promoted.json()["priority_class"], promoted.json()["spot_hold_reason"]) == (
        "running", "priority", None)
    assert (await http.get(f"/api/v1/sessions/{sid}")).json()["status"] == "running"

    # Running now: a further turn waits behind the one in flight (issue 8 #2), priority or not.
    behind = await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "heartbeat"})
    assert behind.status_code == 202 and behind.json()["outcome"] == "queued"
    assert behind.json()["session"]["status"] == "running"

    await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "archived"})
    ended = refused(await http.post(f"/api/v1/sessions/{sid}/turns", json={"kind": "follow_up"}), 409)
    assert ended["code"] == "refused"


async def test_spot_policy_and_genesis_actions(http: httpx.AsyncClient) -> None:
    view = await http.get("/api/v1/spot_policy")
    assert view.status_code == 200
    assert view.json()["gating_enabled"] is True and view.json()["decision"]["reason"] == "no_snapshot"
    await http.post("/api/v1/quota/readings", json={"account": "a", "status": "active",
                                                    "five_hour": {"utilization": 0.5}, "seven_day": {"utilization": 0.2}})

    changed = await http.patch("/api/v1/spot_policy", json={"gating_enabled": False, "reserve_five_hour_percent": 35,
                                                             "max_sessions": 4})
    assert changed.status_code == 200, changed.text

    def posture(v: dict[str, Any]) -> tuple[Any, ...]:
        reserves = {w["window"]: w["reserve_percent"] for w in v["windows"]}
        return v["gating_enabled"], v["max_sessions"], reserves["five_hour"], reserves["seven_day"]

    assert posture(changed.json()) == (False, 4, 35, 10)
    for body, field in (({"reserve_seven_day_percent": 140}, "reserve_seven_day_percent"),
                        ({"max_sessions": 5, "reserve_five_hour_percent": -1}, "reserve_five_hour_percent"),
                        ({"gating_enabled": "maybe"}, "gating_enabled"),
                        ({"max_session": 3}, "max_session"),
                        ({}, "gating_enabled")):  # the service's own refusal: nothing to change
        assert invalid_fields(await http.patch("/api/v1/spot_policy", json=body)) == [field]
    assert posture((await http.get("/api/v1/spot_policy")).json()) == (False, 4, 35, 10)  # nothing half-written

    derived = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]
    promoted = await http.post("/api/v1/spot_policy/genesis", json={"action": "promote_genesis", "genesis": "api"})
    assert promoted.status_code == 200, promoted.text
    assert {g["genesis"]: g["effective"] for g in promoted.json()["genesis_classes"]}["api"] == "priority"
    assert (await http.get(f"/api/v1/sessions/{derived['id']}")).json()["priority_class"] == "priority"
    assert invalid_fields(await http.post("/api/v1/spot_policy/genesis",
                                         json={"action": "promote_genesis", "genesis": "slack"})) == ["genesis"]
    assert invalid_fields(await http.post("/api/v1/spot_policy/genesis", json={"action": "demote_genesis"})) == [
        "genesis"]
    assert invalid_fields(await http.post("/api/v1/spot_policy/genesis", json={"action": "explode"})) == ["action"]
    reset = (await http.post("/api/v1/spot_policy/genesis", json={"action": "reset_genesis_classes"})).json()
    assert {g["genesis"]: g["effective"] for g in reset["genesis_classes"]}["api"] == "spot"
    assert (await http.get(f"/api/v1/sessions/{derived['id']}")).json()["priority_class"] == "spot"


async def test_triggers_costs_credentials_and_openapi(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    created = await http.post("/api/v1/triggers", json={"kind": "schedule", "name": "nightly", "precedence": 5,
                                                        "prompt": "sweep"})
    assert created.status_code == 201, created.text
    tid = created.json()["id"]
    assert invalid_fields(await http.post("/api/v1/triggers", json={"kind": "email", "name": "x"})) == ["kind"]
    assert invalid_fields(await http.post("/api/v1/triggers", json={"kind": "slack", "name": ""})) == ["name"]

    fired = await http.post(f"/api/v1/triggers/{tid}/fire", json={"idempotency_key": "fire-1"})
    assert fired.status_code == 201, fired.text
    s1 = fired.json()["session"]
    assert (s1["genesis"], s1["scheduling_class"], s1["priority_class"], s1["precedence"], s1["trigger_id"],
            s1["prompt"]) == ("schedule", None, "spot", 5, tid, "sweep")
    replay = await http.post(f"/api/v1/triggers/{tid}/fire", json={"idempotency_key": "fire-1"})
    assert replay.status_code == 201 and replay.json() == fired.json()  # the first answer, whole

    patched = await http.patch(f"/api/v1/triggers/{tid}", json={"scheduling_class": "priority"})
    assert patched.status_code == 200 and patched.json()["scheduling_class"] == "priority"
    assert invalid_fields(await http.patch(f"/api/v1/triggers/{tid}", json={"scheduling_class": "urgent"})) == [
        "scheduling_class"]
    assert invalid_fields(await http.patch(f"/api/v1/triggers/{tid}", json={})) == ["scheduling_class"]
    s2 = (await http.post(f"/api/v1/triggers/{tid}/fire")).json()["session"]
    assert (s2["scheduling_class"], s2["priority_class"]) == ("priority", "priority")
    assert (await http.get(f"/api/v1/sessions/{s1['id']}")).json()["priority_class"] == "spot"  # stamped once

    invoked = await http.post(f"/api/v1/triggers/{tid}/invoke", json={"title": "by hand"})
    assert invoked.status_code == 201 and invoked.json()["session"]["genesis"] == "api"
    assert invoked.json()["session"]["title"] == "by hand"
    found = (await http.get("/api/v1/triggers", params={"name_contains": "nigh", "kind": "schedule"})).json()
    assert [t["id"] for t in found["triggers"]] == [tid]
    assert (await http.get("/api/v1/triggers", params={"kind": "slack"})).json()["triggers"] == []
    assert invalid_fields(await http.get("/api/v1/triggers", params={"kind": "email"})) == ["kind"]
    for path in ("/api/v1/triggers/999999/fire", "/api/v1/triggers/999999/invoke"):
        assert refused(await http.post(path), 404)["details"] == {"trigger_id": 999999}
    refused(await http.patch("/api/v1/triggers/999999", json={"name": "x"}), 404)
    assert invalid_fields(await http.post("/api/v1/triggers/x/fire")) == ["trigger_id"]
    await http.patch(f"/api/v1/triggers/{tid}", json={"enabled": False})
    assert refused(await http.post(f"/api/v1/triggers/{tid}/fire"), 409)["code"] == "refused"

    costs = await http.get("/api/v1/costs")
    assert costs.status_code == 200
    assert costs.json()["burn_rates"] == [] and "claude-opus-4" in costs.json()["prices_per_million_tokens"]

    _services, url = stack
    async with httpx.AsyncClient(base_url=url, timeout=10) as anonymous:
        for method, path in (("GET", "/api/v1/sessions"), ("POST", "/api/v1/sessions"), ("GET", "/api/v1/sessions/1"),
                             ("GET", "/api/v1/spot_policy"), ("PATCH", "/api/v1/spot_policy"),
                             ("GET", "/api/v1/costs"), ("POST", "/api/v1/quota/readings"),
                             ("POST", "/api/v1/triggers"), ("POST", f"/api/v1/triggers/{tid}/invoke")):
            denied = refused(await anonymous.request(method, path, json={}), 401)
            assert denied["title"] == "Unauthorized", path
        wrong = await anonymous.get("/api/v1/sessions", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert (await anonymous.get("/api/v1/costs", headers=OPERATOR)).status_code == 200

        spec = (await anonymous.get("/openapi.json")).json()
    routes = {("post", "/api/v1/sessions"), ("get", "/api/v1/sessions"), ("get", "/api/v1/sessions/{session_id}"),
              ("patch", "/api/v1/sessions/{session_id}"), ("post", "/api/v1/sessions/{session_id}/turns"),
              ("post", "/api/v1/sessions/{session_id}/status"), ("get", "/api/v1/sessions/{session_id}/gate_decisions"),
              ("post", "/api/v1/triggers"), ("get", "/api/v1/triggers"), ("patch", "/api/v1/triggers/{trigger_id}"),
              ("post", "/api/v1/triggers/{trigger_id}/invoke"), ("post", "/api/v1/triggers/{trigger_id}/fire"),
              ("get", "/api/v1/spot_policy"), ("patch", "/api/v1/spot_policy"), ("post", "/api/v1/spot_policy/genesis"),
              ("get", "/api/v1/costs"), ("post", "/api/v1/quota/readings")}
    for method, path in routes:
        op = spec["paths"][path][method]
        assert op["tags"] and op["summary"], (method, path)
        ok = next(s for s in ("200", "201", "202") if s in op["responses"])
        assert "$ref" in str(op["responses"][ok]["content"]["application/json"]["schema"]), (method, path)
        assert "401" in op["responses"]


async def test_concurrent_spawns_over_rest_are_all_answered_and_hold_the_cap(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 8 #1 through the gateway: 20 spawns at once against 7 slots, every one 201 inside its
    deadline, exactly 7 admitted, none admitted because the gate was congested."""
    import asyncio

    _services, url = stack
    async with httpx.AsyncClient(base_url=url, timeout=30) as operator, \
            httpx.AsyncClient(base_url=url, headers=FLEET, timeout=30) as http:
        now = datetime.now(UTC)
        await http.post("/api/v1/quota/readings", json={
            "account": "a", "status": "active",
            "five_hour": {"utilization": 0.1, "resets_at": (now + timedelta(hours=3)).isoformat()},
            "seven_day": {"utilization": 0.1, "resets_at": (now + timedelta(days=3)).isoformat()}})
        assert (await operator.patch("/api/v1/spot_policy", json={"max_sessions": 7}, headers=OPERATOR)).status_code == 200
        async def spawn(i: int) -> httpx.Response:
            # As a client does: a 503 says nothing was done and is retried with the same key (the
            # tests' 2 s deadline can pass on a loaded machine); anything else is the answer.
            for _ in range(5):
                answer = await http.post("/api/v1/sessions", json={"genesis": "api", "title": f"c{i}"},
                                         headers={"Idempotency-Key": f"burst-{i}"})
                if answer.status_code != 503:
                    return answer
                assert answer.json()["retry_safe"] is True, answer.text
            return answer

        answers = await asyncio.gather(*(spawn(i) for i in range(20)))
        listed = (await http.get("/api/v1/sessions", params={"limit": 100})).json()
    assert [a.status_code for a in answers] == [201] * 20, [a.text for a in answers if a.status_code != 201][:2]
    assert listed["total"] == 20  # nothing a refused attempt did survived it
    turns = [a.json()["turn"] for a in answers]
    assert sum(t["outcome"] == "admitted" for t in turns) == 7
    assert {t["decision"]["reason"] for t in turns} == {"within_limits", "fleet_at_cap"}
