"""Each row's issue as GitHub last showed it (issue 27 #2; seed 000 "The Issues view": "the queue
in rank order joined to live GitHub issue state"): the backlog's list and Issues view answers carry
it, read from the snapshot job against the fake GitHub server and from the liveness sweep."""

from __future__ import annotations

from datetime import timedelta

import pytest
from liveness_world import REPO, World, github_world

from zimmer_common.contracts import backlog as c
from zimmer_sim.fake_github import FakePR

DAY = timedelta(days=1)


@pytest.fixture
async def world(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    async with github_world(settings_factory, gated_repos=REPO) as w:
        yield w


def issue(n: int, repo: str = REPO) -> c.AppendItem:
    return c.AppendItem(key=f"{repo.split('/')[1]}#{n}", issue_url=f"https://github.com/{repo}/issues/{n}",
                        estimated_cost="small", title=f"Issue {n}")


async def queued(world: World) -> dict[str, c.ItemView]:
    listing = await world.bus.request(c.GET_ITEMS, c.ItemQuery(status="queued"))
    return {i.key: i for i in listing.items}


async def test_a_queued_row_whose_issue_closed_reads_closed_with_when_and_what_a_pull_should_do(
        world: World) -> None:
    world.gh.issue(REPO, 1)
    world.gh.issue(REPO, 2)
    appended = await world.bus.request(c.APPEND, issue(1))
    assert appended.item.github is None  # a write's own row: that answer did not read GitHub
    await world.bus.request(c.APPEND, issue(2))
    await world.bus.request(c.APPEND, issue(7, "acme/elsewhere"))  # not a gated repository: never listed
    await world.bus.request(c.APPEND, c.AppendItem(key="manual-tidy", added_via="operator", estimated_cost="small",
                                                   payload={"prompt": "Tidy the docs"}))
    before = await queued(world)
    assert {k: i.github.state for k, i in before.items() if i.github} == {
        "zimmer#1": "unknown", "zimmer#2": "unknown", "elsewhere#7": "unknown", "manual-tidy": "unknown"}

    await world.app.snapshot.run()
    first_read = world.now
    world.gh.issues[(REPO, 2)].state = "CLOSED"
    world.clock.advance(timedelta(minutes=10))
    await world.app.snapshot.run()  # a complete listing without #2: closed

    rows = await queued(world)
    closed, still_open = rows["zimmer#2"].github, rows["zimmer#1"].github
    assert closed is not None and still_open is not None
    assert (closed.state, closed.read_at, closed.read_by, closed.leaves_as) == (
        "closed", world.now, "snapshot", "issue_closed")
    assert (still_open.state, still_open.read_at, still_open.leaves_as) == ("open", world.now, None)
    assert first_read < world.now
    for key in ("elsewhere#7", "manual-tidy"):
        assert rows[key].github == c.IssueState(state="unknown", read_at=None, read_by=None)
    assert rows["zimmer#2"].status == "queued"  # nothing removes it but a pull: the row is only flagged
    view = await world.bus.request(c.ISSUES_VIEW, c.IssuesViewQuery())
    assert view.queued_closed_in_github == 1  # counted for the page's Queued panel and the metric

    # The same field on a pull's answer, and the pull the flag asks for does what it says.
    pulled = await world.bus.request(c.PULL, c.PullItems(count=0, removals=[
        c.Removal(key="zimmer#2", reason=closed.leaves_as)]))
    assert [r.key for r in pulled.removed] == ["zimmer#2"]


async def test_a_row_that_left_the_queue_reads_what_the_sweep_found_and_the_snapshot_closed_wins(
        world: World) -> None:
    """The stranded section's rows carry the same field: the sweep's pull requests where the issue
    is open, the snapshot's closed over any stored verdict (#173)."""
    world.gh.issue(REPO, 173, prs=[FakePR(REPO, 900, "MERGED", world.now - 3 * DAY)])
    world.gh.issue(REPO, 174, prs=[FakePR(REPO, 901, "MERGED", world.now - 3 * DAY)])
    for n in (173, 174):
        await world.left_queue(n, ago=9 * DAY)
    await world.app.snapshot.run()
    await world.sweep()
    swept_at = world.now
    view = await world.bus.request(c.ISSUES_VIEW, c.IssuesViewQuery())
    states = {i.key: i.github for i in view.stranded}
    assert {k: (g.state, g.read_by, g.read_at) for k, g in states.items() if g} == {
        "zimmer#173": ("merged_pr", "liveness", swept_at), "zimmer#174": ("merged_pr", "liveness", swept_at)}
    assert all(g and g.leaves_as is None for g in states.values())  # a started row is no pull's to remove

    world.gh.issues[(REPO, 173)].state = "CLOSED"  # 21:57
    world.clock.advance(timedelta(minutes=10))
    await world.app.snapshot.run()
    listing = await world.bus.request(c.GET_ITEMS, c.ItemQuery(status="stranded"))  # the stored verdict's list
    by_key = {i.key: i for i in listing.items}
    assert by_key["zimmer#173"].liveness_state == "pr_merged_issue_open"
    github = by_key["zimmer#173"].github
    assert github is not None and (github.state, github.read_by, github.read_at) == ("closed", "snapshot", world.now)
