"""Issue 27 #13 end to end (httpx and the MCP SDK → gateway → NATS → backlog; nothing mocked): an
item's payload is bounded (64 KB as compact JSON, a 422 naming the limit), and a list pages by
bytes as well as by count: rows too large together for one bus message come back as fewer rows and
a `next_offset`, and following it reads every row exactly once. Before, two 600,000-character
payloads made the listing a 413 ("more than the bus carries")."""

from __future__ import annotations

from typing import Any

import httpx
from mcp_client import call, mcp_session, tool_error
from problems import refused

from zimmer_common.contracts.fields import PAYLOAD_MAX_BYTES

ITEMS = "/api/v1/work_backlog_items"
ROWS = 30
BIG = 60_000  # characters of each row's payload: 30 of them are 1.8 MB, past one bus message


def item(n: int, note: str = "") -> dict[str, Any]:
    return {"key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}",
            "estimated_cost": "small", "payload": {"note": note}}


async def pages(fetch: Any) -> tuple[list[str], list[int]]:
    """Every key, following `next_offset` from 0; and how many rows each page carried."""
    keys: list[str] = []
    sizes: list[int] = []
    offset: int | None = 0
    while offset is not None:
        page = await fetch(offset)
        assert page["total"] == ROWS
        keys += [i["key"] for i in page["items"]]
        sizes.append(len(page["items"]))
        offset = page["next_offset"]
        assert len(sizes) <= ROWS, "next_offset never ended"
    return keys, sizes


async def test_a_payload_over_64_kb_is_refused_naming_the_limit(http: httpx.AsyncClient, stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    problem = refused(await http.post(ITEMS, json=item(1, "x" * 600_000)), 422)
    text = str(problem)
    assert "payload" in text and f"{PAYLOAD_MAX_BYTES:,}" in text and "64 KB" in text, text
    fits = await http.post(ITEMS, json=item(2, "x" * (PAYLOAD_MAX_BYTES - 100)))
    assert fits.status_code == 201, fits.text
    _services, url = stack
    async with mcp_session(url, "work_backlog") as session:
        said = await tool_error(session, "append_work_backlog_item", item(3, "x" * 600_000))
        assert f"{PAYLOAD_MAX_BYTES:,}" in said and "64 KB" in said, said
    listed = (await http.get(ITEMS, params={"status": "all"})).json()
    assert [i["key"] for i in listed["items"]] == ["zimmer#2"] and listed["next_offset"] is None


async def test_a_list_too_large_for_one_message_pages_by_bytes(http: httpx.AsyncClient, stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    for n in range(1, ROWS + 1):
        r = await http.post(ITEMS, json=item(n, f"{n:02d}" + "x" * BIG))
        assert r.status_code == 201, r.text
    expected = [f"zimmer#{n}" for n in range(1, ROWS + 1)]  # one band, first in first out

    first = await http.get(ITEMS, params={"limit": 1000})
    assert first.status_code == 200, first.text  # was 413: "more than the bus carries"
    body = first.json()
    assert 1 <= len(body["items"]) < ROWS and body["next_offset"] == len(body["items"]), (
        len(body["items"]), body["next_offset"])

    async def rest(offset: int) -> dict[str, Any]:
        r = await http.get(ITEMS, params={"limit": 1000, "offset": offset})
        assert r.status_code == 200, r.text
        return r.json()

    keys, sizes = await pages(rest)
    assert keys == expected and len(sizes) > 1  # every row exactly once, in rank order
    # A count smaller than what fits is still the count.
    small = (await http.get(ITEMS, params={"limit": 2})).json()
    assert [i["key"] for i in small["items"]] == expected[:2] and small["next_offset"] == 2

    _services, url = stack
    async with mcp_session(url, "work_backlog") as session:
        async def mcp(offset: int) -> dict[str, Any]:
            return await call(session, "get_work_backlog", {"limit": 1000, "offset": offset})

        keys, sizes = await pages(mcp)
    assert keys == expected and len(sizes) > 1
