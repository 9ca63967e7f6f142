"""The liveness sweep against a fake GitHub server, real PostgreSQL and NATS, with a frozen clock
(seed 000 "When a row leaves the queue and goes nowhere"; seed 003 WorkBacklogLivenessSweepJob)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from liveness_world import REPO, World, eventually, github_world
from sqlalchemy import text

from zimmer_backlog.domain.liveness import MAX_EXAMINED_PER_SWEEP
from zimmer_backlog.jobs.liveness import candidates
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.spot import SESSION_STATUS_CHANGED
from zimmer_sim.fake_github import FakePR

DAY = timedelta(days=1)


@pytest.fixture
async def world(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    async with github_world(settings_factory) as w:
        yield w


async def test_each_verdict_of_the_seed_table(world: World) -> None:
    now, gh = world.now, world.gh
    gh.issue(REPO, 1, state="CLOSED")
    gh.issue(REPO, 2, prs=[FakePR(REPO, 102, "OPEN", now - 13 * DAY)])  # moved within STALE_PR_AFTER
    gh.issue(REPO, 3, prs=[FakePR(REPO, 103, "OPEN", now - 15 * DAY), FakePR(REPO, 113, "CLOSED", now)])
    gh.issue(REPO, 4, prs=[FakePR(REPO, 104, "MERGED", now - 30 * DAY)])  # merged, no closing keyword
    gh.issue(REPO, 5, issue_mentions=3)  # referenced by issues only: no PR has ever referenced it
    gh.issue(REPO, 7, prs=[FakePR("acme/other", 9, "OPEN", now - DAY, connected=True)])  # linked in the sidebar
    gh.issue(REPO, 9, prs=[FakePR(REPO, 109, "CLOSED", now - 20 * DAY)])  # tried and declined (issue 27 #12)
    for n in (1, 2, 3, 4, 5, 7, 9):
        await world.left_queue(n, ago=3 * DAY)
    missing = await world.left_queue(6, ago=3 * DAY)  # GitHub does not show #6: no conclusion
    old = await world.left_queue(8, ago=9 * DAY, key="zimmer#8")
    newer = await world.left_queue(8, ago=2 * DAY, key="zimmer#8")  # re-queued and started again
    gh.issue(REPO, 8)

    report = await world.sweep()
    verdicts = {n: (await world.row(world.ids[f"zimmer#{n}"])).liveness_state for n in (1, 2, 3, 4, 5, 7, 9)}
    assert verdicts == {1: "issue_closed", 2: "pr_open", 3: "pr_stalled", 4: "pr_merged_issue_open", 5: "no_pr",
                        7: "pr_open", 9: "abandoned_pr"}
    assert (await world.row(missing)).liveness_state == "unknown"
    assert (await world.row(old)).liveness_state == "superseded"
    assert (await world.row(newer)).liveness_state == "no_pr"
    assert report.examined == 10 and report.requests == 1  # ten rows, one GraphQL request
    # It changes no status and puts nothing back.
    statuses = {(await world.row(i)).status for i in world.ids.values()}
    assert statuses == {"started"}
    counts = await world.counts()
    # pr_stalled, pr_merged_issue_open, no_pr ×2, abandoned_pr, unknown
    assert (counts.stranded, counts.queued) == (6, 0)
    stranded = await world.bus.request(c.GET_ITEMS, c.ItemQuery(status="stranded"))
    assert [i.key for i in stranded.items] == [  # oldest first
        "zimmer#3", "zimmer#4", "zimmer#5", "zimmer#9", "zimmer#6", "zimmer#8"]
    assert stranded.total == 6 and stranded.items[-1].id == newer


async def test_a_bare_mention_counts_as_a_reference(world: World) -> None:
    """The probe reads cross-reference events, which do not tell "Refs #141" from "Addresses #141"."""
    world.gh.issue(REPO, 141, prs=[FakePR(REPO, 419, "MERGED", world.now - 2 * DAY)])
    item = await world.left_queue(141, ago=3 * DAY)
    await world.sweep()
    assert (await world.row(item)).liveness_state == "pr_merged_issue_open"


async def test_each_row_is_asked_about_in_the_repository_its_issue_url_names(world: World) -> None:
    """#1188: a session checks out `repo`, which the gate sets elsewhere when the fix lives in
    another repository; asked there, #12 is a pull request, a 404 or an unrelated issue."""
    world.gh.issue("acme/zimmer-runtime", 12, state="CLOSED", title="an unrelated issue with the same number")
    world.gh.issue(REPO, 12)
    item = await world.left_queue(12, ago=3 * DAY, row_repo="acme/zimmer-runtime")
    await world.sweep()
    assert (await world.row(item)).liveness_state == "no_pr"
    [request] = world.gh.graphql_requests()
    assert request.body is not None and request.body["variables"] == {"o0": "acme", "n0": "zimmer"}


async def test_candidates_are_the_rows_that_left_the_queue_and_nothing_else(world: World) -> None:
    for n in range(1, 9):
        world.gh.issue(REPO, n)
    ended_long_ago = await world.left_queue(1, ago=2 * DAY, ended_ago=timedelta(hours=6, minutes=1))
    ended_recently = await world.left_queue(2, ago=2 * DAY, ended_ago=timedelta(hours=5, minutes=59))
    still_running = await world.left_queue(3, ago=2 * DAY, session_status="running")
    parked = await world.left_queue(4, ago=2 * DAY, session_status="needs_input")
    open_pr = await world.left_queue(5, ago=2 * DAY, status="removed", reason="issue_has_open_pr")
    working = await world.left_queue(6, ago=2 * DAY, status="removed", reason="session_already_working")
    distrusted = await world.left_queue(7, ago=2 * DAY, status="removed", reason="trust_failed")
    closed = await world.left_queue(8, ago=2 * DAY, status="removed", reason="issue_closed")
    queued = (await world.bus.request(c.APPEND, c.AppendItem(
        key="zimmer#9", issue_url=f"https://github.com/{REPO}/issues/9", estimated_cost="small"))).item.id
    report = await world.sweep()
    examined = {i for i in (ended_long_ago, ended_recently, still_running, parked, open_pr, working, distrusted,
                            closed, queued) if (await world.row(i)).liveness_checked_at is not None}
    assert examined == {ended_long_ago, open_pr, working} and report.examined == 3


async def test_the_session_end_comes_from_spot_gates_events(world: World) -> None:
    """A started row's grace runs from when its session ended, as spot-gate's events say."""
    from test_append_integration import session_event  # one builder of session views

    world.gh.issue(REPO, 30)
    item = await world.left_queue(30, ago=2 * DAY, session_status="running")
    session_id = (await world.row(item)).started_session_id
    ended = session_event(session_id, item, "archived", at=world.now - timedelta(hours=7))
    ended.session.version = 5
    await world.bus.publish_event(SESSION_STATUS_CHANGED, "session_status_changed", ended, event_id="end-30")

    async def recorded() -> bool:
        async with world.engine.connect() as conn:
            return bool((await conn.execute(text("SELECT ended_at IS NOT NULL FROM backlog.produced_sessions "
                                                 "WHERE session_id = :s"), {"s": session_id})).scalar())
    await eventually(recorded, "the session's end recorded")
    await world.sweep()
    assert (await world.row(item)).liveness_state == "no_pr"


async def test_settled_rows_go_last_and_the_least_recently_checked_first(world: World) -> None:
    for n in range(1, 5):
        world.gh.issue(REPO, n, state="CLOSED" if n == 1 else "OPEN")
        await world.left_queue(n, ago=3 * DAY)
    await world.sweep()  # #1 reads issue_closed: settled
    world.clock.advance(timedelta(hours=1))
    async with world.engine.begin() as conn:  # #3 was checked longest ago; #4 has never been
        await conn.execute(text("UPDATE backlog.work_backlog_items SET liveness_checked_at = :t WHERE key = 'zimmer#3'"),
                           {"t": world.now - 5 * DAY})
        await conn.execute(text("UPDATE backlog.work_backlog_items SET liveness_checked_at = NULL, "
                                "liveness_state = NULL WHERE key = 'zimmer#4'"))
        order = [r.key for r in await conn.execute(candidates(world.now, limit=10))]
    assert order == ["zimmer#4", "zimmer#3", "zimmer#2", "zimmer#1"]


async def test_a_pass_examines_at_most_two_hundred_rows(world: World) -> None:
    for n in range(1, MAX_EXAMINED_PER_SWEEP + 6):
        world.gh.issue(REPO, n)
        await world.left_queue(n, ago=3 * DAY)
    report = await world.sweep()
    assert report.examined == MAX_EXAMINED_PER_SWEEP
    assert report.requests == 5  # ⌈200/40⌉, not 200
    second = await world.sweep()  # the five never checked come first next time
    assert second.examined == MAX_EXAMINED_PER_SWEEP
    async with world.engine.connect() as conn:
        unchecked = (await conn.execute(text("SELECT count(*) FROM backlog.work_backlog_items "
                                             "WHERE liveness_checked_at IS NULL"))).scalar_one()
    assert unchecked == 0


async def test_a_rate_limit_stops_the_pass_records_it_and_says_nothing(world: World, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    for n in range(1, 51):
        world.gh.issue(REPO, n)
        await world.left_queue(n, ago=20 * DAY)  # overdue: a pass that read GitHub would page
    world.gh.fail_next(502)  # the first batch fails; the second is rate limited
    world.gh.rate_limit_next()
    with caplog.at_level(logging.INFO, logger="zimmer.backlog.liveness"):
        report = await world.sweep()
    assert report.rate_limited and report.requests == 2
    assert report.verdicts == {"unknown": 50}
    assert await world.new_pages() == []  # a pass that could not read a repo says nothing at all
    async with world.engine.connect() as conn:
        recorded = (await conn.execute(text("SELECT rate_limited, unreadable_repos, examined FROM "
                                            "backlog.liveness_passes ORDER BY id DESC LIMIT 1"))).one()
    assert tuple(recorded) == (True, [REPO], 50)
    levels = {r.levelname for r in caplog.records if r.name == "zimmer.backlog.liveness"}
    assert "WARNING" in levels and "ERROR" not in levels
    report = await world.sweep()  # GitHub answers again: the page goes out
    assert report.verdicts == {"no_pr": 50} and [p["title"] for p in await world.new_pages()] == [
        "Work backlog: stranded rows unresolved for 2 weeks, 50+ rows"]


async def test_a_stalled_github_is_ask_again_never_a_conclusion(settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with github_world(settings_factory, github_timeout_seconds=1.0, github_call_seconds=2.0) as world:
        world.gh.issue(REPO, 1, state="CLOSED")
        item = await world.left_queue(1, ago=3 * DAY)
        world.gh.stall_seconds = 3.0  # past the client's 2 s bound for the whole exchange
        report = await world.sweep()
        assert report.verdicts == {"unknown": 1} and report.unreadable_repos == {REPO}
        world.gh.stall_seconds = 0
        await world.sweep()
        assert (await world.row(item)).liveness_state == "issue_closed"


async def test_every_pass_logs_what_it_examined_and_the_oldest_stranded_age(world: World, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    world.gh.issue(REPO, 1)
    await world.left_queue(1, ago=4 * DAY)
    with caplog.at_level(logging.INFO, logger="zimmer.backlog.liveness"):
        await world.sweep()
    [line] = [r for r in caplog.records if r.getMessage() == "liveness sweep pass"]
    assert line.levelname == "INFO"  # production exports WARN and above (#584)
    fields = line.__dict__["fields"]
    assert fields["examined"] == 1 and fields["oldest_stranded_days"] == 4.0 and fields["stranded"] == 1


async def test_answers_of_the_wrong_shape_read_unknown_and_the_pass_goes_on(world: World) -> None:
    for n in range(1, 42):  # two batches: the first answered with HTML, the second with the wrong shape
        world.gh.issue(REPO, n)
        await world.left_queue(n, ago=9 * DAY)
    world.gh.fail_next(200)
    world.gh.fail_next(201)
    report = await world.sweep()
    assert report.verdicts == {"unknown": 41} and report.unreadable_repos == {REPO}
    assert await world.new_pages() == []
    report = await world.sweep()
    assert report.verdicts == {"no_pr": 41}
