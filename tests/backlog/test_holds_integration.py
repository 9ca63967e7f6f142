"""Holds for a human decision (seed 000 "Held for a human decision") against the fake GitHub server,
real PostgreSQL and NATS, with a frozen clock. #1420 and zimmer#79 are here."""

from __future__ import annotations

from datetime import timedelta

import pytest
from liveness_world import REPO, World, github_world
from sqlalchemy import text

from zimmer_common.contracts import backlog as c
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_sim.fake_github import FakePR

DAY = timedelta(days=1)
REASON = "Pick one of #80, #81, #82: owed by the maintainers, laid out in #83"


@pytest.fixture
async def world(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    async with github_world(settings_factory) as w:
        yield w


async def refusal(world: World, item_id: int) -> str:
    with pytest.raises(ZimmerError) as info:
        await world.hold(item_id)
    assert info.value.code == ErrorCode.REFUSED, info.value
    return str(info.value.details["refusal"])


async def stranded_no_pr(world: World, n: int, ago: timedelta = 10 * DAY) -> int:
    world.gh.issue(REPO, n)
    return await world.left_queue(n, ago=ago)


async def test_a_hold_moves_a_stranded_row_to_awaiting_decision_without_touching_its_status(world: World) -> None:
    item = await stranded_no_pr(world, 79)
    await world.sweep()
    assert (await world.counts()).stranded == 1
    assert len(await world.new_pages()) == 1  # ten days old: the band page
    held = await world.hold(item, REASON, by="operator")
    assert (held.status, held.hold_reason, held.held_by, held.held_liveness_state) == (
        "started", REASON, "operator", "no_pr")
    assert held.held_at == world.now and held.held_until == world.now + 14 * DAY
    counts = await world.counts()
    assert (counts.stranded, counts.awaiting_decision, counts.held) == (0, 1, 1)
    awaiting = await world.bus.request(c.GET_ITEMS, c.ItemQuery(status="awaiting_decision"))
    assert [i.id for i in awaiting.items] == [item]
    # Out of both halves of the alert's band: 10 days old and nothing pages.
    await world.sweep()
    assert await world.new_pages() == []


async def test_the_five_refusals(world: World) -> None:
    queued = (await world.bus.request(c.APPEND, c.AppendItem(
        key="zimmer#1", issue_url=f"https://github.com/{REPO}/issues/1", estimated_cost="small"))).item.id
    running = await world.left_queue(2, ago=3 * DAY, session_status="running")
    parked = await world.left_queue(3, ago=3 * DAY, session_status="needs_input")
    unread = await world.left_queue(4, ago=3 * DAY)
    world.gh.issue(REPO, 5, state="CLOSED")
    resolved = await world.left_queue(5, ago=3 * DAY)
    unknown = await world.left_queue(6, ago=3 * DAY)  # GitHub does not show #6
    world.gh.issue(REPO, 7)
    superseded = await world.left_queue(7, ago=5 * DAY, key="zimmer#7")
    await world.left_queue(7, ago=4 * DAY, key="zimmer#7")
    held = await stranded_no_pr(world, 8)
    lapsing = await stranded_no_pr(world, 9)
    assert await refusal(world, unread) == "not_read"  # before any pass
    await world.sweep()
    await world.hold(held)
    await world.hold(lapsing)
    assert await refusal(world, queued) == "not_stranded"
    assert await refusal(world, running) == "not_stranded"
    assert await refusal(world, parked) == "not_stranded"
    assert await refusal(world, resolved) == "not_stranded"
    assert await refusal(world, unknown) == "not_read"
    assert await refusal(world, superseded) == "superseded"
    assert await refusal(world, held) == "already_held"  # no extension while in force
    world.clock.advance(14 * DAY)
    assert await refusal(world, lapsing) == "lapse_not_paged"  # no renewal before the lapse has paged
    with pytest.raises(ZimmerError) as missing:
        await world.hold(999_999)
    assert missing.value.code == ErrorCode.NOT_FOUND
    # A reason is required, in words.
    reply = await world.bus.nc.request(c.HOLD.subject, b'{"item_id": 1, "reason": "   "}', timeout=5)
    assert b'"invalid"' in reply.data


async def test_a_row_re_appended_since_the_last_pass_is_refused_as_superseded(world: World) -> None:
    """Issue 27 #3: `bulk#41` re-appended as item 541 and a hold on item 45 answered 200, because
    the stored verdict still read no_pr until the next pass. The newer row is checked at the moment
    of the hold."""
    stranded = await stranded_no_pr(world, 41)
    await world.sweep()
    assert (await world.row(stranded)).liveness_state == "no_pr"
    again = (await world.bus.request(c.APPEND, c.AppendItem(
        key="zimmer#41", issue_url=f"https://github.com/{REPO}/issues/41", estimated_cost="small"))).item.id
    with pytest.raises(ZimmerError) as info:
        await world.hold(stranded)
    assert info.value.details["refusal"] == "superseded" and f"item {again}" in str(info.value)
    assert (await world.row(stranded)).held_at is None


async def test_a_lapsed_hold_pages_once_at_its_original_age_then_may_be_held_again(world: World) -> None:
    """zimmer#79 re-paged three times as a stranded row; held, it is silent for 14 days, then the
    lapse is the reminder that the decision is still owed, once per hold."""
    item = await stranded_no_pr(world, 79, ago=20 * DAY)
    await world.sweep()
    assert [p["title"] for p in await world.new_pages()] == [
        "Work backlog: stranded rows unresolved for 2 weeks, 1+ row"]
    await world.hold(item, REASON)
    for _ in range(13):
        world.clock.advance(DAY)
        await world.sweep()
    assert await world.new_pages() == []
    assert (await world.counts()).awaiting_decision == 1
    world.clock.advance(DAY + timedelta(minutes=1))  # lapsed: stranded again at its original age
    counts = await world.counts()
    assert (counts.stranded, counts.awaiting_decision) == (1, 0)
    world.gh.fail_next(503)  # a pass that cannot read GitHub does not page the lapse
    await world.sweep()
    assert await world.new_pages() == []
    assert (await world.row(item)).held_at is not None
    await world.sweep()
    [lapse] = await world.new_pages()  # one page: the lapse, inside the band it re-enters
    assert "lapsed" in lapse["title"] and "zimmer#79" in lapse["message"] and REASON in lapse["message"]
    assert lapse["level"] == "error" and lapse["context"]["band"] == "4 weeks, 1+ row"
    row = await world.row(item)
    assert row.held_at is None and row.hold_reason is None  # only then is the spent hold cleared
    world.clock.advance(timedelta(hours=1))
    await world.sweep()
    assert not [p for p in await world.new_pages() if "lapsed" in p["title"]]  # once per hold
    assert (await world.hold(item)).held_until == world.now + 14 * DAY  # after the page, held again


async def test_a_different_verdict_voids_the_hold_in_the_same_write_and_unknown_does_not(world: World) -> None:
    item = await stranded_no_pr(world, 50)
    stalled = await stranded_no_pr(world, 51)
    await world.sweep()
    await world.hold(item)
    await world.hold(stalled)
    world.gh.fail_next(502)  # an outage reads unknown: no hold is voided (or every held row would re-page)
    await world.sweep()
    assert (await world.row(item)).held_at is not None and (await world.row(item)).liveness_state == "unknown"
    world.gh.issues[(REPO, 50)].state = "CLOSED"
    world.gh.issues[(REPO, 51)].prs.append(FakePR(REPO, 151, "OPEN", world.now - 20 * DAY))
    await world.sweep()
    closed, quiet = await world.row(item), await world.row(stalled)
    assert (closed.liveness_state, closed.held_at, closed.hold_reason) == ("issue_closed", None, None)
    # pr_stalled is not a suspension: a stalled row is unresolved, and a hold kept across it would
    # be a silenced row with nothing moving.
    assert (quiet.liveness_state, quiet.held_at) == ("pr_stalled", None)
    assert (await world.counts()).stranded == 1


async def test_a_moving_pr_suspends_a_hold_and_the_verdict_after_it_decides(world: World) -> None:
    """#1420: a PR that only mentions the issue read pr_open while open and voided two holds; when
    it merged it re-paged both rows at 48 days. A moving PR now suspends the hold instead."""
    merged_before = FakePR(REPO, 300, "MERGED", world.now - 60 * DAY)
    rows = []
    for n in (60, 61):
        world.gh.issue(REPO, n, prs=[merged_before])
        rows.append(await world.left_queue(n, ago=48 * DAY))
    await world.sweep()
    await world.new_pages()  # the band page for the two rows as they were
    for item in rows:
        await world.hold(item)
    mention = FakePR(REPO, 420, "OPEN", world.now)
    for n in (60, 61):
        world.gh.issues[(REPO, n)].prs.append(mention)
    await world.sweep()
    counts = await world.counts()
    assert (counts.stranded, counts.awaiting_decision, counts.held) == (0, 0, 2)  # in neither section
    assert all([(await world.row(i)).held_at is not None for i in rows])
    world.clock.advance(2 * DAY)
    mention.state, mention.updated_at = "MERGED", world.now
    await world.sweep()
    counts = await world.counts()
    assert (counts.stranded, counts.awaiting_decision) == (0, 2)  # the same verdict keeps the hold
    assert await world.new_pages() == []


async def test_a_mention_that_changes_the_verdict_voids_the_hold(world: World) -> None:
    """The limitation the seed accepts: a row held at no_pr reads pr_merged_issue_open once a
    mentioning PR merges, and that is a different verdict."""
    item = await stranded_no_pr(world, 70)
    await world.sweep()
    await world.hold(item)
    world.gh.issues[(REPO, 70)].prs.append(FakePR(REPO, 700, "MERGED", world.now))
    await world.sweep()
    row = await world.row(item)
    assert (row.liveness_state, row.held_at) == ("pr_merged_issue_open", None)


async def test_a_hold_that_lapses_while_a_pr_is_open_pages_after_the_row_is_stranded_again(world: World) -> None:
    merged = FakePR(REPO, 800, "MERGED", world.now - 30 * DAY)
    world.gh.issue(REPO, 80, prs=[merged])
    item = await world.left_queue(80, ago=10 * DAY)
    await world.sweep()
    await world.new_pages()
    await world.hold(item)
    moving = FakePR(REPO, 801, "OPEN", world.now)
    world.gh.issues[(REPO, 80)].prs.append(moving)
    for _ in range(15):  # the hold's own clock runs throughout
        world.clock.advance(DAY)
        moving.updated_at = world.now
        await world.sweep()
    assert await world.new_pages() == []  # lapsed, but the moving PR resolves the row for now
    moving.state = "CLOSED"
    await world.sweep()
    assert [p for p in await world.new_pages() if "lapsed" in p["title"]]
    assert (await world.row(item)).held_at is None


async def test_the_sweep_judges_a_hold_placed_while_github_was_being_read(world: World) -> None:
    item = await stranded_no_pr(world, 90)
    await world.sweep()
    async with world.engine.begin() as conn:  # as if placed mid-pass, against no_pr
        await conn.execute(text("UPDATE backlog.work_backlog_items SET held_at = now(), held_until = now() + "
                                "interval '14 days', held_by = 'x', hold_reason = 'r', held_liveness_state = 'no_pr' "
                                "WHERE id = :id"), {"id": item})
    world.gh.issues[(REPO, 90)].state = "CLOSED"
    await world.sweep()
    assert (await world.row(item)).held_at is None


async def test_ten_concurrent_holds_of_one_row_place_exactly_one(world: World) -> None:
    import asyncio

    item = await stranded_no_pr(world, 95)
    await world.sweep()
    outcomes = await asyncio.gather(*(world.hold(item, f"reason {i}") for i in range(10)), return_exceptions=True)
    placed = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, ZimmerError)]
    assert len(placed) == 1 and len(refused) == 9
    assert {e.details["refusal"] for e in refused} == {"already_held"}
    assert (await world.row(item)).hold_reason == placed[0].hold_reason
    async with world.engine.connect() as conn:
        held_events = (await conn.execute(text("SELECT count(*) FROM backlog.outbox WHERE event_type = 'item_held'"))
                       ).scalar_one()
    assert held_events == 1
