"""The Issues view's GitHub side (seed 000 "Where the count shows up", "Reading the queue as a
human"): the snapshot job against the fake GitHub server, and `issues_view` joining it to the
stranded and held rows. #173 is here."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from liveness_world import REPO, World, github_world
from sqlalchemy import text

from zimmer_backlog.handlers import github as github_module
from zimmer_common.contracts import backlog as c

DAY = timedelta(days=1)
OTHER = "acme/other"


@pytest.fixture
async def world(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    async with github_world(settings_factory, gated_repos=f"{REPO}, {OTHER}, acme/gone") as w:
        yield w


async def view(world: World) -> c.IssuesView:
    return await world.bus.request(c.ISSUES_VIEW, c.IssuesViewQuery())


async def test_a_row_whose_issue_the_snapshot_shows_closed_leaves_the_section_and_nothing_is_written_back(
        world: World) -> None:
    """tadasant/zimmer#173 closed at 21:57 and was still listed as stranded, as
    pr_merged_issue_open, over an hour later: the page now checks the stored verdict against its
    snapshot. get_work_backlog, the REST index and the alert keep reading the stored verdict."""
    for n in (173, 174, 175):
        world.gh.issue(REPO, n)
        await world.left_queue(n, ago=9 * DAY)
    world.gh.hidden_repos.add("acme/gone")
    await world.sweep()
    await world.app.snapshot.run()
    assert (await view(world)).stranded_total == 3
    world.gh.issues[(REPO, 173)].state = "CLOSED"  # 21:57
    world.clock.advance(timedelta(minutes=10))
    report = await world.app.snapshot.run()
    assert report.failed.keys() == {"acme/gone"} and report.listed == {REPO: 2, OTHER: 0}
    shown = await view(world)
    assert [i.key for i in shown.stranded] == ["zimmer#174", "zimmer#175"]
    assert (shown.stranded_total, shown.stranded_closed_in_github) == (2, 1)
    row = await world.row(world.ids["zimmer#173"])
    assert row.liveness_state == "no_pr"  # nothing written back
    assert (await world.counts()).stranded == 3  # the stored verdict alone, until the next pass
    held = await world.hold(world.ids["zimmer#174"])
    world.gh.issues[(REPO, 174)].state = "CLOSED"
    world.clock.advance(timedelta(minutes=10))
    await world.app.snapshot.run()
    shown = await view(world)
    assert (shown.awaiting_total, shown.awaiting_closed_in_github, shown.held) == (0, 1, 1)
    assert held.id not in [i.id for i in shown.awaiting]


async def test_open_issues_with_no_row_and_the_trend(world: World) -> None:
    """zimmer#368 sat 37 days with no row at all: such issues are listed, not swept."""
    # The two snapshots below must share a 6-hour trend bucket: the frozen clock starts at the
    # real time, so near a bucket's end (CI ran it at 23:55) step into the next bucket first.
    into = world.clock.now() - world.clock.now().replace(hour=world.clock.now().hour // 6 * 6, minute=0, second=0,
                                                         microsecond=0)
    if into > timedelta(hours=6) - timedelta(minutes=30):
        world.clock.advance(timedelta(hours=6) - into + timedelta(minutes=1))
    for n in (1, 2, 368):
        world.gh.issue(REPO, n, title=f"Issue {n}")
    world.gh.issue(OTHER, 5, title="Elsewhere")
    world.gh.open_prs[(REPO, 400)] = "a pull request, which GitHub's issues listing includes"
    world.gh.hidden_repos.add("acme/gone")  # a 404: no point on the trend, and the others still listed
    await world.left_queue(1, ago=2 * DAY)
    await world.bus.request(c.APPEND, c.AppendItem(key="zimmer#2", issue_url=f"https://github.com/{REPO}/issues/2",
                                                   estimated_cost="small"))
    await world.app.snapshot.run()
    world.clock.advance(timedelta(minutes=10))
    world.gh.issue(REPO, 369)
    await world.app.snapshot.run()
    shown = await view(world)
    assert [(i.repo, i.number) for i in shown.not_on_queue] == [(OTHER, 5), (REPO, 368), (REPO, 369)]
    assert shown.not_on_queue_total == 3 and shown.not_on_queue[1].url == f"https://github.com/{REPO}/issues/368"
    trend = {s.repo: [p.open_issues for p in s.points] for s in shown.trend}
    assert trend == {OTHER: [1], REPO: [4]}  # two snapshots in one 6-hour bucket: its last point
    assert shown.snapshot_at == world.now


async def test_the_trend_is_a_point_per_six_hours_whatever_the_snapshot_left(world: World) -> None:
    """Issue 27 #13: 30 days of 10-minute snapshots are 4,320 points per repository, and a few
    repositories' worth passed what one bus message carries. The view shows each 6-hour bucket's
    last point: at most 121 per repository over the 30 days, the newest always among them."""
    start = world.now - timedelta(days=31)
    async with world.engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO backlog.github_open_issue_counts (repo, taken_at, open_issues, complete) "
            "SELECT repo, CAST(:start AS timestamptz) + n * interval '10 minutes', n % 97, true "
            "FROM generate_series(0, 31 * 144) AS n, unnest(CAST(:repos AS text[])) AS repo"),
            {"start": start, "repos": [REPO, OTHER]})
    shown = await view(world)
    newest = start + timedelta(minutes=10 * 31 * 144)
    for series in shown.trend:
        assert 119 <= len(series.points) <= 121, len(series.points)
        assert series.points[-1].at == newest and series.points[-1].open_issues == (31 * 144) % 97
        assert all(b.at - a.at <= timedelta(hours=6) + timedelta(minutes=10)
                   for a, b in itertools.pairwise(series.points))
        assert all(p.at >= world.now - timedelta(days=30) for p in series.points)
    assert len(shown.model_dump_json()) < 100_000


async def test_a_listing_cut_short_closes_nothing(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(1, 151):
        world.gh.issue(REPO, n)
    await world.app.snapshot.run()
    world.gh.issues[(REPO, 150)].state = "CLOSED"
    monkeypatch.setattr(github_module, "LISTING_PAGES_MAX", 1)  # the 1,000-issue bound, at 100
    world.clock.advance(timedelta(minutes=10))
    await world.app.snapshot.run()
    async with world.engine.connect() as conn:
        states = dict((await conn.execute(text("SELECT number, state FROM backlog.github_issues WHERE repo = :r"),
                                          {"r": REPO})).all())
        complete = (await conn.execute(text("SELECT complete FROM backlog.github_open_issue_counts WHERE repo = :r "
                                            "ORDER BY taken_at DESC LIMIT 1"), {"r": REPO})).scalar_one()
    assert complete is False and set(states.values()) == {"open"}  # absent from a partial listing: unknown
