"""The gateway's coalesced appends (issue 9): appends that arrive at once go to the backlog as one
`append_items` request, and each keeps its own answer, its own caller's idempotency key and its
own deadline. Real NATS, PostgreSQL and backlog service; the appends are made as the REST route
makes them, under the caller and deadline the edge sets."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from zimmer_backlog.service import build
from zimmer_common import deadline
from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_gateway.appends import Appends


@pytest.fixture
async def appends(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    service = build(settings_factory())
    await service.start()
    bus = await Bus.connect([service.settings.nats_url], service="gateway", instance_id="t", rpc_timeout=5)
    try:
        yield Appends(lambda: bus), bus, service
    finally:
        await bus.close()
        await service.stop()


def item(n: int, **extra: Any) -> c.AppendItem:
    return c.AppendItem(key=f"zimmer#{n}", issue_url=f"https://github.com/acme/zimmer/issues/{n}",
                        estimated_cost="small", **extra)


async def append_as(appends: Appends, caller: str, append: c.AppendItem, seconds: float = 5.0) -> Any:
    """One append as the REST route makes it: under the caller and the deadline the edge sets
    (production's 5 s unless a test is about the deadline)."""
    with deadline.use(time.time() + seconds), deadline.as_caller(caller):
        try:
            return await appends.append(append)
        except ZimmerError as exc:
            return exc


async def test_appends_at_once_go_together_and_each_gets_its_own_answer(appends) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    coalesced, bus, _service = appends
    answers = await asyncio.gather(*(append_as(coalesced, "fleet", item(n)) for n in (1, 2, 3)),
                                   append_as(coalesced, "fleet", item(2)))
    first, second, third, again = answers
    assert [a.item.key for a in (first, second, third)] == ["zimmer#1", "zimmer#2", "zimmer#3"]
    assert [a.item.precedence for a in (first, second, third)] == [6000, 5990, 5980]  # in arrival order
    assert isinstance(again, ZimmerError) and again.code is ErrorCode.CONFLICT
    assert "just before, in this batch" in again.message
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery())
    assert listed.total == 3


async def test_the_same_key_from_two_callers_in_one_batch_is_two_keys(appends) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    coalesced, bus, _service = appends
    fleet, operator, session = await asyncio.gather(
        append_as(coalesced, "fleet", item(10, idempotency_key="k")),
        append_as(coalesced, "operator", item(11, idempotency_key="k")),
        append_as(coalesced, "fleet/session:7", item(12, idempotency_key="k")))
    assert [a.item.key for a in (fleet, operator, session)] == ["zimmer#10", "zimmer#11", "zimmer#12"]
    retries = await asyncio.gather(
        append_as(coalesced, "fleet/session:7", item(12, idempotency_key="k")),
        append_as(coalesced, "fleet", item(10, idempotency_key="k")))
    assert [r.model_dump() for r in retries] == [session.model_dump(), fleet.model_dump()]  # the first answers
    other = await append_as(coalesced, "operator", item(13, idempotency_key="k"))
    assert isinstance(other, ZimmerError) and other.details["field"] == "idempotency_key"
    assert (await bus.request(c.GET_ITEMS, c.ItemQuery())).total == 3


async def test_an_append_out_of_time_is_refused_before_its_batch_leaves(appends) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Its deadline leaves no time to ask the backlog: refused retry-safe, `sent: false`, nothing
    appended; the appends beside it go, under the earliest deadline among them."""
    coalesced, bus, _service = appends
    late, on_time = await asyncio.gather(append_as(coalesced, "fleet", item(20), seconds=0.3),
                                         append_as(coalesced, "fleet", item(21)))
    assert isinstance(late, ZimmerError) and late.code is ErrorCode.UNAVAILABLE
    assert late.retry_safe and late.details["sent"] is False
    assert on_time.item.key == "zimmer#21"
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery())
    assert [i.key for i in listed.items] == ["zimmer#21"]


async def test_a_batch_the_backlog_cannot_answer_is_a_503_for_each_append(appends) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Nothing serves `append_items` (the backlog stopped taking requests): each append of the
    batch is told so, retry-safe, and none waits for an answer that will not come."""
    coalesced, _bus, service = appends
    await service.bus.stop_serving(grace=1.0)
    answers = await asyncio.gather(*(append_as(coalesced, "fleet", item(n)) for n in (30, 31)))
    assert all(isinstance(a, ZimmerError) and a.code is ErrorCode.UNAVAILABLE and a.retry_safe for a in answers)
    assert {a.details.get("dependency") for a in answers} == {c.CTX}
