"""Issue 27 #13 at the seams: a bulk write's answer must fit one bus message whenever its request
did, or the work is done and the caller told it failed. `append_items` (the gateway's coalesced
REST appends) and `pull_items` answer with items without their payloads (`payload_omitted`); the
gateway puts each append's own payload back. Against the running stack; nothing mocked."""

from __future__ import annotations

import httpx

from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c

ITEMS = "/api/v1/work_backlog_items"
NOTE = "y" * 9_700  # 100 of these fit one request; echoed back with each row's other fields they did not


def issue(n: int, note: str = NOTE) -> c.AppendItem:
    return c.AppendItem(key=f"zimmer#{n}", issue_url=f"https://github.com/acme/zimmer/issues/{n}",
                        estimated_cost="large", payload={"notes": note})


async def test_a_batch_that_fits_the_bus_is_answered_whole(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    bus = await Bus.connect([services["backlog"].settings.nats_url], service="probe", instance_id="p",
                            rpc_timeout=20)
    try:
        request = c.AppendMany(appends=[c.CallerAppend(item=issue(n), caller="fleet") for n in range(1, 101)])
        assert len(request.model_dump_json()) <= bus.payload_room()
        answer = await bus.request(c.APPEND_MANY, request)
        assert [o.result is not None for o in answer.outcomes] == [True] * 100
        assert all(o.result and o.result.item.payload_omitted and o.result.item.payload == {} for o in answer.outcomes)
        listed = await bus.request(c.GET_ITEMS, c.ItemQuery(limit=5))
        assert listed.items[0].payload == {"notes": NOTE} and not listed.items[0].payload_omitted
    finally:
        await bus.close()


async def test_a_rest_append_still_answers_with_its_payload(http: httpx.AsyncClient) -> None:
    made = await http.post(ITEMS, json=issue(500, "kept").model_dump(mode="json", exclude_none=True))
    assert made.status_code == 201, made.text
    assert made.json()["item"]["payload"] == {"notes": "kept"} and made.json()["item"]["payload_omitted"] is False


async def test_a_pull_of_large_items_answers_instead_of_failing_after_its_work(http: httpx.AsyncClient) -> None:
    big = "z" * 63_000
    for n in range(1, 31):
        made = await http.post(ITEMS, json=issue(n, big).model_dump(mode="json", exclude_none=True))
        assert made.status_code == 201, made.text
    pulled = await http.post(f"{ITEMS}/pull", json={
        "count": 10, "removals": [{"key": f"zimmer#{n}", "reason": "issue_closed"} for n in range(11, 31)]})
    assert pulled.status_code == 200, pulled.text[:300]
    body = pulled.json()
    assert len(body["removed"]) == 20 and len(body["started"]) == 10
    assert all(i["payload_omitted"] and i["payload"] == {} for i in [*body["removed"],
                                                                      *(s["item"] for s in body["started"])])
