"""Spot-gate's lists page by bytes as well as by count (issue 27 #13), end to end (httpx and the
MCP SDK → gateway → NATS → spot-gate; nothing mocked). A session carries its prompt (up to 100,000
characters) and an enqueued message its own, so a dozen of either at 90,000 characters pass one
bus message (triggers carry prompts too): the list answers with the rows that fit and where the next page starts, and
following it reads every row exactly once. Before, both listings were a 413 ("more than the bus
carries")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from mcp_client import call, mcp_session
from pool_readings import held_spot_session

SESSIONS = "/api/v1/sessions"
ROWS = 12
BIG = 90_000  # characters of each prompt: 12 of them are 1.08 MB, past one bus message


async def spawn_large(http: httpx.AsyncClient, n: int, **body: Any) -> dict[str, Any]:
    r = await http.post(SESSIONS, json={"start": False, "genesis": "api", "title": f"large {n}",
                                        "prompt": f"{n:02d}" + "x" * BIG, **body})
    assert r.status_code == 201, r.text
    return r.json()["session"]


async def every_row(fetch: Callable[[Any], Awaitable[dict[str, Any]]], rows: str, cursor: str,
                    start: Any) -> tuple[list[int], list[int]]:
    """Every row's id, following `cursor` from `start` until it is null; and each page's size."""
    ids: list[int] = []
    sizes: list[int] = []
    at = start
    while True:
        page = await fetch(at)
        ids += [r["id"] for r in page[rows]]
        sizes.append(len(page[rows]))
        at = page[cursor]
        if at is None:
            return ids, sizes
        assert len(sizes) <= ROWS, f"{cursor} never ended"


async def test_a_session_list_too_large_for_one_message_pages_by_bytes(http: httpx.AsyncClient, stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    made = [(await spawn_large(http, n))["id"] for n in range(1, ROWS + 1)]
    newest_first = list(reversed(made))

    first = await http.get(SESSIONS, params={"limit": 500})
    assert first.status_code == 200, first.text  # was 413: "more than the bus carries"
    body = first.json()
    assert body["total"] == ROWS and 1 <= len(body["sessions"]) < ROWS, len(body["sessions"])
    assert body["next_offset"] == len(body["sessions"]) and body["sessions"][0]["prompt"].startswith("12x")

    async def rest(offset: int) -> dict[str, Any]:
        r = await http.get(SESSIONS, params={"limit": 500, "offset": offset})
        assert r.status_code == 200, r.text
        return r.json()

    ids, sizes = await every_row(rest, "sessions", "next_offset", 0)
    assert ids == newest_first and len(sizes) > 1  # every session exactly once, newest first
    small = (await http.get(SESSIONS, params={"limit": 2})).json()  # a count under what fits is the count
    assert [s["id"] for s in small["sessions"]] == newest_first[:2] and small["next_offset"] == 2
    last = (await http.get(SESSIONS, params={"limit": 500, "offset": ROWS - 1})).json()
    assert [s["id"] for s in last["sessions"]] == newest_first[-1:] and last["next_offset"] is None

    _services, url = stack
    async with mcp_session(url) as session:
        async def mcp(offset: int) -> dict[str, Any]:
            return await call(session, "quick_search_sessions", {"limit": 500, "offset": offset})

        ids, sizes = await every_row(mcp, "sessions", "next_offset", 0)
    assert ids == newest_first and len(sizes) > 1


async def test_enqueued_messages_too_large_for_one_message_page_by_bytes(http: httpx.AsyncClient, stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    session = await held_spot_session(http)
    for n in range(1, ROWS + 1):
        r = await http.post(f"{SESSIONS}/{session['id']}/turns", json={"kind": "follow_up",
                                                                       "prompt": f"{n:02d}" + "y" * BIG})
        assert r.status_code == 202 and r.json()["outcome"] == "queued", r.text
    url = f"{SESSIONS}/{session['id']}/enqueued_messages"

    first = await http.get(url, params={"limit": 500})
    assert first.status_code == 200, first.text  # was 413: "more than the bus carries"
    body = first.json()
    assert 1 <= len(body["messages"]) < ROWS and body["next_before_id"] == body["messages"][-1]["id"], body.keys()

    async def rest(before_id: int | None) -> dict[str, Any]:
        r = await http.get(url, params={"limit": 500, **({"before_id": before_id} if before_id else {})})
        assert r.status_code == 200, r.text
        return r.json()

    ids, sizes = await every_row(rest, "messages", "next_before_id", None)
    assert len(sizes) > 1 and len(ids) == ROWS and ids == sorted(ids, reverse=True)  # each once, newest first
    prompts = [m["prompt"][:2] for m in (await rest(None))["messages"]]
    assert prompts[:2] == ["12", "11"], prompts
    small = (await http.get(url, params={"limit": 2})).json()  # a count under what fits is the count
    assert [m["id"] for m in small["messages"]] == ids[:2] and small["next_before_id"] == ids[1]
    last = (await http.get(url, params={"limit": 500, "before_id": ids[-1] + 1})).json()
    assert [m["id"] for m in last["messages"]] == ids[-1:] and last["next_before_id"] is None


async def test_a_trigger_list_too_large_for_one_message_pages_by_bytes(http: httpx.AsyncClient, stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    made = []
    for n in range(1, ROWS + 1):
        r = await http.post("/api/v1/triggers", json={"kind": "schedule", "name": f"nightly {n}",
                                                      "prompt": f"{n:02d}" + "z" * BIG})
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])

    first = await http.get("/api/v1/triggers", params={"limit": 500})
    assert first.status_code == 200, first.text  # was 413: "more than the bus carries"
    body = first.json()
    assert 1 <= len(body["triggers"]) < ROWS and body["next_offset"] == len(body["triggers"])

    async def rest(offset: int) -> dict[str, Any]:
        r = await http.get("/api/v1/triggers", params={"limit": 500, "offset": offset})
        assert r.status_code == 200, r.text
        return r.json()

    ids, sizes = await every_row(rest, "triggers", "next_offset", 0)
    assert ids == made and len(sizes) > 1  # every trigger exactly once, oldest first

    # The policy view (the Quotas page, the gate's metrics) carries triggers too: those that fit.
    policy = await http.get("/api/v1/spot_policy")
    assert policy.status_code == 200, policy.text  # was 413 as well
    shown = [t["id"] for t in policy.json()["triggers"]]
    assert 1 <= len(shown) < ROWS and shown == made[:len(shown)]
    assert policy.json()["triggers_next_offset"] == len(shown)

    _services, url = stack
    async with mcp_session(url) as session:
        async def mcp(offset: int) -> dict[str, Any]:
            return await call(session, "search_triggers", {"limit": 500, "offset": offset})

        ids, sizes = await every_row(mcp, "triggers", "next_offset", 0)
    assert ids == made and len(sizes) > 1
