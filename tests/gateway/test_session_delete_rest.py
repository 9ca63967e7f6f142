"""DELETE /api/v1/sessions/{id} end to end (issue 16): httpx → gateway → NATS → spot-gate →
PostgreSQL, all five services in-process; and the warnings a sweeper leaves, on GET."""

from __future__ import annotations

import asyncio

import httpx
from problems import invalid_fields, refused

from zimmer_common.contracts import clones as k

OPERATOR = {"Authorization": "Bearer test-operator-token"}


async def spawn(http: httpx.AsyncClient) -> int:
    created = await http.post("/api/v1/sessions", json={"title": "doomed", "genesis": "schedule", "start": False})
    assert created.status_code == 201, created.text
    return int(created.json()["session"]["id"])


async def test_only_the_operator_deletes_and_a_second_delete_is_404(http: httpx.AsyncClient) -> None:
    """Deleting one (DELETE /api/v1/sessions/:id) is a different door: the row goes immediately."""
    sid = await spawn(http)
    problem = refused(await http.delete(f"/api/v1/sessions/{sid}"), 403)  # the fleet key
    assert "operator" in problem["detail"]
    refused(await http.delete(f"/api/v1/sessions/{sid}", headers={"Authorization": "Bearer nope"}), 401)
    async with httpx.AsyncClient(base_url=str(http.base_url), timeout=15) as anonymous:
        refused(await anonymous.delete(f"/api/v1/sessions/{sid}"), 401)
    assert (await http.get(f"/api/v1/sessions/{sid}")).status_code == 200  # nothing was done

    gone = await http.delete(f"/api/v1/sessions/{sid}", headers=OPERATOR)
    assert gone.status_code == 200, gone.text
    assert (gone.json()["session_id"], gone.json()["stopped_turn"]) == (sid, False) and gone.json()["deleted_at"]
    refused(await http.get(f"/api/v1/sessions/{sid}"), 404)
    again = refused(await http.delete(f"/api/v1/sessions/{sid}", headers=OPERATOR), 404)
    assert again["code"] == "not_found"


async def test_hostile_ids_are_refused_before_any_rpc(http: httpx.AsyncClient) -> None:
    for bad in ("9223372036854775808", "99999999999999999999999", "-1", "0", "abc", "1.5", "%00", "1e3"):
        response = await http.delete(f"/api/v1/sessions/{bad}", headers=OPERATOR)
        assert invalid_fields(response) == ["session_id"], (bad, response.text)
    refused(await http.delete("/api/v1/sessions/9223372036854775807", headers=OPERATOR), 404)  # bigint's max: asked
    # The credential is checked before anything else: a hostile id with the fleet key is 403.
    refused(await http.delete("/api/v1/sessions/-1"), 403)


async def delete_as_a_client_does(http: httpx.AsyncClient, sid: int) -> httpx.Response:
    """A 503 says nothing was done and the request may be retried (on a loaded machine ten deletes
    queued behind one admission lock can outlast the gateway's 2 s deadline): a client asks again."""
    for _ in range(20):
        response = await http.delete(f"/api/v1/sessions/{sid}", headers=OPERATOR)
        if response.status_code != 503 or not response.json().get("retry_safe"):
            return response
    return response


async def test_ten_concurrent_deletes_one_succeeds(http: httpx.AsyncClient) -> None:
    sid = await spawn(http)
    answers = await asyncio.gather(*(delete_as_a_client_does(http, sid) for _ in range(10)))
    assert sorted(a.status_code for a in answers) == [200] + [404] * 9, [a.text for a in answers]


async def test_a_sweepers_warning_shows_on_the_session(stack, http: httpx.AsyncClient) -> None:
    services, _url = stack
    sid = await spawn(http)
    assert (await http.get(f"/api/v1/sessions/{sid}")).json()["warnings"] == []
    await services["gateway"].bus.request(k.RECORD_SESSION_WARNING, k.SessionWarningIn(
        session_id=sid, kind="clone_reap_refused", message="the guard refused: session 7 is live",
        source="sweeper/orphan_clone_sweep"))
    [warning] = (await http.get(f"/api/v1/sessions/{sid}")).json()["warnings"]
    assert (warning["kind"], warning["source"]) == ("clone_reap_refused", "sweeper/orphan_clone_sweep")
