"""One GitHub issue, one open row (issue 27 #1, #5, #6), through REST and MCP end to end: every
spelling of an issue's key maps to one canonical key, a second spelling is the same 409 a repeat
is, a pull starts one session for the issue, and an issueless item is `manual-<slug>` with a
prompt. All five services in-process on embedded PostgreSQL and NATS; nothing is mocked."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_client import call, mcp_session, tool_error
from problems import invalid_fields, refused

from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.errors import ErrorCode, ZimmerError

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
ITEMS = "/api/v1/work_backlog_items"


def body(key: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"key": key, "issue_url": url, "title": "Fix it", "estimated_cost": "small", **extra}


async def test_four_spellings_of_one_issue_are_one_row_and_one_session(http: httpx.AsyncClient) -> None:
    first = await http.post(ITEMS, json=body("Zimmer#1", "https://github.com/ACME/Zimmer/issues/1"))
    assert first.status_code == 201, first.text
    item = first.json()["item"]
    assert item["key"] == "zimmer#1"  # the one spelling, from the issue URL
    for key, url in (("zimmer#1", "https://github.com/acme/zimmer/issues/1"),
                     ("acme/zimmer#1", "https://github.com/acme/zimmer/issues/1"),
                     ("ZIMMER#1", "https://github.com/acme/zimmer/issues/1")):
        again = refused(await http.post(ITEMS, json=body(key, url)), 409)
        assert again["details"]["item_id"] == item["id"], key
    queued = (await http.get(ITEMS)).json()
    assert [i["key"] for i in queued["items"]] == ["zimmer#1"] and queued["counts"]["queued"] == 1

    # A pull by any spelling finds the row; a pull by count starts one session for the issue.
    groomer = (await http.post("/api/v1/sessions", json={"genesis": "schedule", "precedence": 5,
                                                         "start": False})).json()["session"]["id"]
    pulled = await http.post(f"{ITEMS}/pull", json={"keys": ["ACME/ZIMMER#1"], "acting_session_id": groomer})
    assert pulled.status_code == 200, pulled.text
    assert [s["item"]["key"] for s in pulled.json()["started"]] == ["zimmer#1"]
    more = await http.post(f"{ITEMS}/pull", json={"count": 3, "acting_session_id": groomer})
    assert more.json()["started"] == []


async def test_mcp_appends_map_spellings_to_the_same_row(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with mcp_session(url, "work_backlog") as session:
        first = await call(session, "append_work_backlog_item",
                           body("Acme/Zimmer#2", "https://github.com/acme/zimmer/issues/2"))
        assert first["item"]["key"] == "zimmer#2"
        dup = await tool_error(session, "append_work_backlog_item",
                               body("zimmer#2", "https://github.com/Acme/ZIMMER/issues/2"))
        assert "conflict:" in dup and f"item {first['item']['id']}" in dup
        got = await call(session, "get_work_backlog")
        assert [i["key"] for i in got["items"]] == ["zimmer#2"]


async def test_an_issueless_item_is_manual_slug_with_a_prompt(http: httpx.AsyncClient) -> None:
    base = {"key": "manual-tidy-readme", "title": "Tidy the README", "estimated_cost": "small"}
    # #5: no prompt (or a blank one) is refused naming payload.prompt; nothing is written.
    assert invalid_fields(await http.post(ITEMS, json=base, headers=OPERATOR)) == ["payload.prompt"]
    assert invalid_fields(await http.post(ITEMS, json={**base, "payload": {"prompt": "  "}},
                                          headers=OPERATOR)) == ["payload.prompt"]
    # #6: an issue-shaped key without its issue would lock the real issue's append out.
    shaped = {**base, "key": "zimmer#500", "payload": {"prompt": "Tidy it"}}
    assert invalid_fields(await http.post(ITEMS, json=shaped, headers=OPERATOR)) == ["key"]
    assert (await http.get(ITEMS)).json()["counts"]["queued"] == 0
    made = await http.post(ITEMS, json={**base, "key": "Manual-Tidy-README", "payload": {"prompt": "Tidy it"}},
                           headers=OPERATOR)
    assert made.status_code == 201, made.text
    assert made.json()["item"]["key"] == "manual-tidy-readme"
    real = await http.post(ITEMS, json=body("zimmer#500", "https://github.com/acme/zimmer/issues/500"))
    assert real.status_code == 201, real.text


# ---- the property: any two spellings of one issue end as one open row ---------------------

OWNERS = ("acme", "Zimmer-Labs")
REPOS = ("zimmer", "Tools.Kit")
numbers = itertools.count(1000)


def recase(word: str, flips: list[bool]) -> str:
    return "".join(ch.swapcase() if flip else ch for ch, flip in zip(word, flips + [False] * len(word), strict=False))


@st.composite
def spelling(draw: st.DrawFn, owner: str, repo: str, number: int) -> tuple[str, str]:
    """A (key, issue URL) pair naming owner/repo#number, in any case, with or without the owner."""
    flips = st.lists(st.booleans(), max_size=12)
    key_repo = recase(repo, draw(flips))
    key = (f"{recase(owner, draw(flips))}/{key_repo}" if draw(st.booleans()) else key_repo) + f"#{number}"
    url = f"https://github.com/{recase(owner, draw(flips))}/{recase(repo, draw(flips))}/issues/{number}"
    return key, url


async def test_any_two_spellings_of_one_issue_end_as_one_open_row(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    loop = asyncio.get_running_loop()
    bus = await Bus.connect([services["backlog"].settings.nats_url], service="probe", instance_id="p", rpc_timeout=10)

    async def append(key: str, url: str) -> c.AppendResult | ZimmerError:
        try:
            return await bus.request(c.APPEND, c.AppendItem(key=key, issue_url=url, estimated_cost="small"))
        except ZimmerError as exc:
            return exc

    async def open_rows(key: str) -> list[c.ItemView]:
        listed = await bus.request(c.GET_ITEMS, c.ItemQuery(limit=1000))
        return [i for i in listed.items if i.key == key]

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data(), owner=st.sampled_from(OWNERS), repo=st.sampled_from(REPOS))
    def two_spellings(data: st.DataObject, owner: str, repo: str) -> None:
        number = next(numbers)
        (key_a, url_a), (key_b, url_b) = (data.draw(spelling(owner, repo, number)) for _ in range(2))
        first = asyncio.run_coroutine_threadsafe(append(key_a, url_a), loop).result(30)
        second = asyncio.run_coroutine_threadsafe(append(key_b, url_b), loop).result(30)
        canonical = f"{repo.lower()}#{number}"
        assert isinstance(first, c.AppendResult) and first.item.key == canonical
        assert isinstance(second, ZimmerError) and second.code is ErrorCode.CONFLICT
        assert second.details["item_id"] == first.item.id
        rows = asyncio.run_coroutine_threadsafe(open_rows(canonical), loop).result(30)
        assert [r.id for r in rows] == [first.item.id]

    try:
        await asyncio.to_thread(two_spellings)
    finally:
        await bus.close()
