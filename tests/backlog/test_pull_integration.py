"""Pulls, start-now and the spawn saga with spot-gate running (seed 000; DESIGN §5)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from zimmer_backlog.service import build as build_backlog
from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts import spot as s
from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_spot_gate.service import build as build_spot


@pytest.fixture
async def both(settings_factory):  # type: ignore[no-untyped-def]
    spot = build_spot(settings_factory())
    backlog = build_backlog(settings_factory())
    await spot.start()
    await backlog.start()
    bus = await Bus.connect([spot.settings.nats_url], service="probe", instance_id="p", rpc_timeout=10)
    try:
        yield backlog, spot, bus
    finally:
        await bus.close()
        await backlog.stop()
        await spot.stop()


async def append(bus: Bus, n: int, cost: str = "small") -> c.ItemView:
    return (await bus.request(c.APPEND, c.AppendItem(key=f"zimmer#{n}", estimated_cost=cost, title=f"Fix {n}",
                                                     issue_url=f"https://github.com/acme/zimmer/issues/{n}"))).item


async def counts_become(bus: Bus, **expected: int) -> c.Counts:
    counts = None
    for _ in range(200):
        counts = (await bus.request(c.GET_ITEMS, c.ItemQuery())).counts
        if all(getattr(counts, k) == v for k, v in expected.items()):
            return counts
        await asyncio.sleep(0.05)
    raise AssertionError(f"counts stayed {counts}, wanted {expected}")


async def test_pull_starts_the_top_items_as_spot_children_of_the_puller(both) -> None:  # type: ignore[no-untyped-def]
    _backlog, _spot, bus = both
    groomer = (await bus.request(s.SPAWN, s.SpawnSession(genesis="schedule", precedence=5, start=False))).session
    for n in (1, 2, 3):
        await append(bus, n)
    result = await bus.request(c.PULL, c.PullItems(count=2, acting_session_id=groomer.id))
    assert [x.item.key for x in result.started] == ["zimmer#1", "zimmer#2"] and not result.failed
    assert [x.precedence for x in result.started] == [7, 6]  # the puller's 5 + (count − n + 1)
    first = await bus.request(s.GET_SESSION, s.SessionRef(session_id=result.started[0].session_id))
    assert (first.parent_session_id, first.priority_class, first.goal) == (groomer.id, "spot", "open-reviewed-green-pr")
    assert first.prompt == "https://github.com/acme/zimmer/issues/1\n\nPlease implement this"
    assert first.title == "Implement zimmer#1 (Fix 1)"
    assert first.metadata["spawned_by"] == "work-backlog" and first.metadata["work_backlog_key"] == "zimmer#1"
    item = result.started[0].item
    assert (item.status, item.started_session_id, item.started_by_session_id) == ("started", first.id, groomer.id)
    await counts_become(bus, queued=1, in_flight=2)
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery(status="in_flight"))
    assert sorted(i.key for i in listed.items) == ["zimmer#1", "zimmer#2"]
    assert result.sentence.startswith("pulled 2")


async def test_pull_bounds_and_the_removal_vocabulary(both) -> None:  # type: ignore[no-untyped-def]
    _backlog, _spot, bus = both
    await append(bus, 10)
    await append(bus, 11)
    reply = await bus.nc.request(c.PULL.subject, b'{"count": 11}', timeout=5)
    assert b'"invalid"' in reply.data
    reply = await bus.nc.request(c.PULL.subject, b'{"count": 1, "removals": [{"key": "zimmer#10", "reason": "meh"}]}',
                                 timeout=5)
    assert b'"invalid"' in reply.data  # free text is refused
    result = await bus.request(c.PULL, c.PullItems(count=1, removals=[c.Removal(key="zimmer#10", reason="issue_closed")]))
    assert [r.key for r in result.removed] == ["zimmer#10"] and result.removed[0].removal_reason == "issue_closed"
    assert [x.item.key for x in result.started] == ["zimmer#11"]
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.PULL, c.PullItems(count=1, keys=["zimmer#11"]))
    assert info.value.code is ErrorCode.INVALID


async def test_pull_by_keys_is_safe_to_retry_after_a_lost_answer(both) -> None:  # type: ignore[no-untyped-def]
    backlog, spot, bus = both
    for n in (20, 21):
        await append(bus, n)
    starter = backlog.app.starter
    failures = {"left": 1}

    async def lose_the_answer(item_id: int) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise ZimmerError(ErrorCode.UNAVAILABLE, "spot-gate's answer was lost")

    starter.after_spawn = lose_the_answer
    first = await bus.request(c.PULL, c.PullItems(keys=["zimmer#20", "zimmer#21"]))
    assert len(first.started) == 1 and [f.key for f in first.failed] == ["zimmer#20"] and first.failed[0].retry_safe
    again = await bus.request(c.PULL, c.PullItems(keys=["zimmer#20", "zimmer#21"]))
    assert not again.failed and sorted(x.item.key for x in again.started) == ["zimmer#20", "zimmer#21"]
    assert {x.session_id for x in again.started} >= {x.session_id for x in first.started}  # the same sessions
    async with spot.engine.connect() as conn:
        n = (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions "
                                     "WHERE metadata->>'spawned_by' = 'work-backlog'"))).scalar_one()
    assert n == 2  # none doubled


async def test_an_interrupted_start_is_recovered_with_the_same_key(both) -> None:  # type: ignore[no-untyped-def]
    backlog, spot, bus = both
    item = await append(bus, 30)
    async with backlog.engine.begin() as conn:
        await conn.execute(text("UPDATE backlog.work_backlog_items SET status = 'starting', spawn_key = 'x', "
                                "start_class = 'spot' WHERE id = :i"), {"i": item.id})
    await backlog.runner.enqueue("recover_starting")
    for _ in range(200):
        rows = (await bus.request(c.GET_ITEMS, c.ItemQuery(status="started"))).items
        if rows:
            break
        await asyncio.sleep(0.05)
    assert [r.key for r in rows] == ["zimmer#30"] and rows[0].started_session_id is not None


async def test_start_now_is_priority_and_operator_writes(both) -> None:  # type: ignore[no-untyped-def]
    _backlog, _spot, bus = both
    a, b, low = await append(bus, 40), await append(bus, 41), await append(bus, 42, "large")
    now = await bus.request(c.START_NOW, c.ItemRef(item_id=b.id, by="tadas"))
    session = await bus.request(s.GET_SESSION, s.SessionRef(session_id=now.session_id))
    assert session.priority_class == "priority" and now.item.status == "started"
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.START_NOW, c.ItemRef(item_id=b.id))
    assert info.value.code is ErrorCode.CONFLICT

    pinned = await bus.request(c.PIN, c.PinItem(item_id=low.id, precedence=9000))
    assert (pinned.pinned, pinned.precedence) == (True, 9000)
    assert (await append(bus, 43)).precedence == 5990  # a pinned item is nobody's peer
    unpinned = await bus.request(c.UNPIN, c.ItemRef(item_id=low.id))
    assert not unpinned.pinned and 500 <= unpinned.precedence <= 1999  # drifted out of its band: moved back
    removed = await bus.request(c.REMOVE, c.RemoveItem(item_id=a.id, reason="duplicate of #12", by="tadas"))
    assert (removed.status, removed.removal_reason, removed.removed_by) == ("removed", "duplicate of #12", "tadas")


async def test_a_pull_of_zero_says_which_zero_it_is(both) -> None:  # type: ignore[no-untyped-def]
    _backlog, spot, bus = both
    empty = await bus.request(c.PULL, c.PullItems(count=3))
    assert empty.sentence == "pulled 0 — the queue is empty; 0 in flight"
    await spot.app.record_reading(QuotaReadingIn(account="a", status="active", five_hour=WindowReadingIn(utilization=0.97),
                                                 seven_day=WindowReadingIn(utilization=0.5)))
    for n in (50, 51):
        await append(bus, n)
    pulled = await bus.request(c.PULL, c.PullItems(count=2))
    assert len(pulled.started) == 2
    await counts_become(bus, in_flight=2, spot_held=2)
    zero = await bus.request(c.PULL, c.PullItems(keys=["zimmer#50"]))  # already started: the same session back
    assert len(zero.started) == 1
    none = await bus.request(c.PULL, c.PullItems(keys=["zimmer#404"]))
    assert none.sentence == ("pulled 0 — none of the named keys is queued; 2 in flight, but 2 of those are held at "
                             "the spot gate on spot_budget, so the fleet is idle behind quota rather than busy")
