"""Issue 27 #5, #9, #10, #11 with spot-gate running: every writer re-ranks (start-now, a failed
start put back on the queue, the recovery job), an issueless row without a prompt is never spawned,
a pull says which "not queued" a key is, and a session's title never ends in "()"."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text
from test_pull_integration import _leave_starting, append, both  # noqa: F401 - `both` is a fixture

from zimmer_backlog.domain.ranking import BANDS
from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts import spot as s
from zimmer_common.errors import ErrorCode, ZimmerError

SMALL = BANDS["small"]


async def drift(backlog, item_id: int) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """Put an unpinned small item far below its band, as an import or an old unpin leaves one."""
    async with backlog.engine.begin() as conn:
        await conn.execute(text("UPDATE backlog.work_backlog_items SET precedence = 100 WHERE id = :i"), {"i": item_id})


async def precedence(bus: Bus, item_id: int) -> int:
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery(status="all", limit=1000))
    return next(i.precedence for i in listed.items if i.id == item_id)


async def test_start_now_re_ranks_after_it_writes(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, _spot, bus = both
    promoted, drifted = await append(bus, 1), await append(bus, 2)
    await drift(backlog, drifted.id)
    await bus.request(c.START_NOW, c.ItemRef(item_id=promoted.id, by="operator"))
    assert SMALL.contains(await precedence(bus, drifted.id))


async def test_a_failed_start_put_back_on_the_queue_re_ranks_and_a_row_without_a_prompt_never_spawns(
        both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, spot, bus = both
    drifted = await append(bus, 3)
    async with backlog.engine.begin() as conn:  # written before the contract required a prompt
        empty = (await conn.execute(text(
            "INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, precedence) "
            "VALUES ('manual-empty', NULL, 'small', 'operator', 5000) RETURNING id"))).scalar_one()
    await drift(backlog, drifted.id)
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.START_NOW, c.ItemRef(item_id=empty, by="operator"))
    assert info.value.code is ErrorCode.REFUSED and "no prompt" in info.value.message
    async with spot.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions"))).scalar_one() == 0
    queued = {i.id: i for i in (await bus.request(c.GET_ITEMS, c.ItemQuery())).items}
    assert queued[empty].status == "queued"  # a definite no: back on the queue
    assert SMALL.contains(queued[drifted.id].precedence)


async def test_the_recovery_job_re_ranks_when_it_puts_a_row_back(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, _spot, bus = both
    stuck, drifted = await append(bus, 4), await append(bus, 5)
    await _leave_starting(backlog, stuck.id, time.time() - 5)
    await drift(backlog, drifted.id)
    assert await backlog.app.starter.recover() == ["requeued"]
    assert SMALL.contains(await precedence(bus, drifted.id))


async def test_a_pull_says_which_not_queued_a_key_is(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _backlog, _spot, bus = both
    started = await append(bus, 6)
    await bus.request(c.START_NOW, c.ItemRef(item_id=started.id, by="operator"))
    result = await bus.request(c.PULL, c.PullItems(count=0, removals=[
        c.Removal(key="zimmer#6", reason="issue_closed"), c.Removal(key="zimmer#999", reason="issue_closed")]))
    why = {n.key: n.why for n in result.not_removed}
    assert f"item {started.id}, is started" in why["zimmer#6"] and "left the queue" in why["zimmer#6"]
    assert why["zimmer#999"] == "not queued: no item has ever had this key"


async def test_a_session_title_never_ends_in_empty_brackets(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, _spot, bus = both

    async def title_of(n: int) -> str:
        item = (await bus.request(c.APPEND, c.AppendItem(
            key=f"zimmer#{n}", issue_url=f"https://github.com/acme/zimmer/issues/{n}", estimated_cost="small"))).item
        started = await bus.request(c.START_NOW, c.ItemRef(item_id=item.id, by="operator"))
        return (await bus.request(s.GET_SESSION, s.SessionRef(session_id=started.session_id))).title

    assert await title_of(7) == "Implement zimmer#7"  # no title anywhere: the key alone
    async with backlog.engine.begin() as conn:  # what the GitHub snapshot last read of #8
        await conn.execute(text("INSERT INTO backlog.github_issues (repo, number, title, state, seen_at) "
                                "VALUES ('acme/zimmer', 8, 'Crash on save', 'open', now())"))
    assert await title_of(8) == "Implement zimmer#8 (Crash on save)"
