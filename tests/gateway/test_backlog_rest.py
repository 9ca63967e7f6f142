"""The work backlog's REST API end to end: httpx → gateway → NATS → backlog → spot-gate.

All five services in-process on embedded PostgreSQL and NATS; nothing is mocked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from problems import invalid_fields, refused

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
ITEMS = "/api/v1/work_backlog_items"


def item(n: int, cost: str = "small", **extra: Any) -> dict[str, Any]:
    return {"key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}", "title": f"Fix {n}",
            "estimated_cost": cost, "repo": "acme/zimmer", "gate_verdict": "cleared", **extra}


async def append(http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = await http.post(ITEMS, json=body, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


async def listed(http: httpx.AsyncClient, status: str) -> dict[str, Any]:
    r = await http.get(ITEMS, params={"status": status})
    assert r.status_code == 200, r.text
    return r.json()


async def keys_become(http: httpx.AsyncClient, status: str, expected: set[str]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for _ in range(200):  # bounded: 10 s for spot-gate's session events to arrive
        body = await listed(http, status)
        if {i["key"] for i in body["items"]} == expected:
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"{status} stayed {[i['key'] for i in body.get('items', [])]}, wanted {sorted(expected)}")


async def test_append_list_and_pull_with_spot_gate_running(http: httpx.AsyncClient) -> None:
    groomer = await http.post("/api/v1/sessions", json={"genesis": "schedule", "precedence": 5, "start": False})
    assert groomer.status_code == 201, groomer.text
    groomer_id = groomer.json()["session"]["id"]

    first = await append(http, item(1, acting_session_id=groomer_id, payload={"ratings": {"value": 4}}))
    assert first["item"]["precedence"] == 6000 and first["counts"]["queued"] == 1
    assert (first["item"]["added_via"], first["item"]["writing_session_id"]) == ("rest", groomer_id)
    second = await append(http, item(2))
    assert second["item"]["precedence"] == 5990  # 10 below the lowest in-band peer: FIFO within a cost
    await append(http, item(3))

    duplicate = refused(await http.post(ITEMS, json=item(1)), 409)
    assert duplicate["code"] == "conflict" and duplicate["details"]["item_id"] == first["item"]["id"]
    assert f"item {first['item']['id']}" in duplicate["detail"]

    issueless = {"key": "manual-tidy-readme", "title": "Tidy the README", "estimated_cost": "small",
                 "payload": {"prompt": "Tidy the README"}}
    assert invalid_fields(await http.post(ITEMS, json=issueless)) == ["issue_url"]
    # The fleet key cannot claim to be the operator: added_via is forced to "rest".
    assert invalid_fields(await http.post(ITEMS, json={**issueless, "added_via": "operator"})) == ["issue_url"]
    assert "added_via" in invalid_fields(await http.post(ITEMS, json={**item(9), "added_via": "import"}))
    assert "surprise" in invalid_fields(await http.post(ITEMS, json={**item(9), "surprise": 1}))
    manual = (await append(http, issueless, OPERATOR))["item"]
    assert (manual["added_via"], manual["added_by"], manual["issue_url"], manual["precedence"]) == (
        "operator", "operator", None, 5970)

    queued = await listed(http, "queued")
    assert [i["key"] for i in queued["items"]] == ["zimmer#1", "zimmer#2", "zimmer#3", "manual-tidy-readme"]
    assert queued["total"] == 4
    assert queued["counts"] == {"queued": 4, "in_flight": 0, "spot_held": 0, "parked": 0, "claimed": 0,
                                "stranded": 0, "awaiting_decision": 0, "held": 0}
    page = (await http.get(ITEMS, params={"status": "all", "limit": 2, "offset": 1})).json()
    assert [i["key"] for i in page["items"]] == ["zimmer#2", "zimmer#3"] and page["total"] == 4
    assert "status" in invalid_fields(await http.get(ITEMS, params={"status": "busy"}))
    assert "limit" in invalid_fields(await http.get(ITEMS, params={"limit": 0}))

    assert "count" in invalid_fields(await http.post(f"{ITEMS}/pull", json={"count": 11}))
    free_text = {"count": 1, "removals": [{"key": "zimmer#3", "reason": "looks stale to me"}]}
    assert "removals.reason" in invalid_fields(await http.post(f"{ITEMS}/pull", json=free_text))
    assert "count" in invalid_fields(await http.post(f"{ITEMS}/pull", json={"count": 1, "keys": ["zimmer#1"]}))
    assert (await listed(http, "queued"))["total"] == 4  # every refused pull changed nothing

    r = await http.post(f"{ITEMS}/pull", json={"count": 2, "acting_session_id": groomer_id,
                                               "removals": [{"key": "zimmer#3", "reason": "issue_closed"}]})
    assert r.status_code == 200, r.text
    pulled = r.json()
    assert [s["item"]["key"] for s in pulled["started"]] == ["zimmer#1", "zimmer#2"] and not pulled["failed"]
    assert [s["precedence"] for s in pulled["started"]] == [7, 6]  # the puller's 5 + (count − n + 1)
    assert [(x["key"], x["removal_reason"], x["status"]) for x in pulled["removed"]] == [
        ("zimmer#3", "issue_closed", "removed")]
    assert pulled["sentence"].startswith("pulled 2") and pulled["counts"]["queued"] == 1
    for started in pulled["started"]:
        session = await http.get(f"/api/v1/sessions/{started['session_id']}")
        assert session.status_code == 200, session.text
        s = session.json()
        assert (s["parent_session_id"], s["priority_class"], s["goal"]) == (groomer_id, "spot", "open-reviewed-green-pr")
        assert s["metadata"]["spawned_by"] == "work-backlog" and s["metadata"]["work_backlog_key"] == started["item"]["key"]
        assert (started["item"]["status"], started["item"]["started_by_session_id"]) == ("started", groomer_id)

    in_flight = await keys_become(http, "in_flight", {"zimmer#1", "zimmer#2"})
    assert in_flight["counts"]["in_flight"] == 2 and in_flight["counts"]["queued"] == 1
    assert {i["key"] for i in (await listed(http, "claimed"))["items"]} == {"zimmer#1", "zimmer#2"}
    assert {i["key"] for i in (await listed(http, "started"))["items"]} == {"zimmer#1", "zimmer#2"}
    assert [i["key"] for i in (await listed(http, "removed"))["items"]] == ["zimmer#3"]
    assert (await listed(http, "parked"))["items"] == []


async def test_operator_routes_refuse_the_fleet_key_and_work_with_the_operator_token(http: httpx.AsyncClient) -> None:
    a = (await append(http, item(20)))["item"]
    b = (await append(http, item(21)))["item"]
    big = (await append(http, item(22, "large")))["item"]
    assert big["precedence"] == 1000

    fleet_attempts = [
        ("PATCH", f"{ITEMS}/{big['id']}/pin", {"precedence": 9000}),
        ("PATCH", f"{ITEMS}/{big['id']}/unpin", None),
        ("POST", f"{ITEMS}/{a['id']}/remove", {"reason": "duplicate of #12"}),
        ("POST", f"{ITEMS}/{b['id']}/start_now", None),
    ]
    for method, path, body in fleet_attempts:
        problem = refused(await http.request(method, path, json=body), 403)
        assert "operator" in problem["detail"], path
    assert (await listed(http, "queued"))["total"] == 3  # the fleet key changed nothing
    refused(await http.request("PATCH", f"{ITEMS}/{big['id']}/pin", headers={"Authorization": "Bearer nope"}), 401)

    pinned = await http.patch(f"{ITEMS}/{big['id']}/pin", json={"precedence": 9000}, headers=OPERATOR)
    assert pinned.status_code == 200, pinned.text
    assert (pinned.json()["pinned"], pinned.json()["precedence"]) == (True, 9000)
    assert [i["key"] for i in (await listed(http, "queued"))["items"]][0] == "zimmer#22"
    assert (await append(http, item(23)))["item"]["precedence"] == 5980  # a pinned item is nobody's peer
    unpinned = await http.patch(f"{ITEMS}/{big['id']}/unpin", headers=OPERATOR)
    assert unpinned.status_code == 200, unpinned.text
    assert not unpinned.json()["pinned"] and 500 <= unpinned.json()["precedence"] <= 1999  # back in its band
    where = await http.patch(f"{ITEMS}/{b['id']}/pin", headers=OPERATOR)  # no body: pinned where it sits
    assert (where.json()["pinned"], where.json()["precedence"]) == (True, b["precedence"])
    assert "precedence" in invalid_fields(await http.patch(f"{ITEMS}/{a['id']}/pin", json={"precedence": 2**31},
                                                           headers=OPERATOR))
    refused(await http.patch(f"{ITEMS}/999999/pin", json={}, headers=OPERATOR), 404)

    assert "reason" in invalid_fields(await http.post(f"{ITEMS}/{a['id']}/remove", json={"reason": ""},
                                                      headers=OPERATOR))
    removed = await http.post(f"{ITEMS}/{a['id']}/remove", json={"reason": "duplicate of #12"}, headers=OPERATOR)
    assert removed.status_code == 200, removed.text
    assert (removed.json()["status"], removed.json()["removal_reason"], removed.json()["removed_by"]) == (
        "removed", "duplicate of #12", "operator")
    refused(await http.post(f"{ITEMS}/{a['id']}/remove", json={"reason": "again"}, headers=OPERATOR), 409)

    # As a client does: a 503 says nothing was done (the tests' 2 s deadline can pass on a loaded box).
    for _ in range(5):
        now = await http.post(f"{ITEMS}/{b['id']}/start_now", headers=OPERATOR)
        if now.status_code != 503:
            break
        assert now.json()["retry_safe"] is True, now.text
    assert now.status_code == 200, now.text
    assert now.json()["item"]["status"] == "started"
    session = (await http.get(f"/api/v1/sessions/{now.json()['session_id']}")).json()
    assert session["priority_class"] == "priority" and session["title"] == "Implement zimmer#21 (Fix 21)"
    assert refused(await http.post(f"{ITEMS}/{b['id']}/start_now", headers=OPERATOR), 409)["code"] == "conflict"


async def test_the_openapi_document_lists_the_backlog_routes(http: httpx.AsyncClient) -> None:
    paths = (await http.get("/openapi.json")).json()["paths"]
    assert set(paths[ITEMS]) == {"get", "post"}
    assert set(paths[f"{ITEMS}/pull"]) == {"post"}
    assert set(paths[f"{ITEMS}/{{item_id}}/pin"]) == {"patch"}
    assert set(paths[f"{ITEMS}/{{item_id}}/unpin"]) == {"patch"}
    assert set(paths[f"{ITEMS}/{{item_id}}/remove"]) == {"post"}
    assert set(paths[f"{ITEMS}/{{item_id}}/start_now"]) == {"post"}
    assert "403" in paths[f"{ITEMS}/{{item_id}}/start_now"]["post"]["responses"]
