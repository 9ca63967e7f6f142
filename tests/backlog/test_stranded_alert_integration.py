"""The stranded alert (seed 000 "The alert has to reach a human more than once"): its worked
examples against the fake GitHub server, real PostgreSQL and NATS, with a frozen clock. #1175 is
why every page is its own issue."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from liveness_world import REPO, World, github_world
from sqlalchemy import text

DAY = timedelta(days=1)


@pytest.fixture
async def world(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    async with github_world(settings_factory) as w:
        yield w


async def population(world: World, numbers: range, oldest: timedelta, step: timedelta = timedelta(hours=1)) -> None:
    """Open issues with no PR, whose rows left the queue from `oldest` ago onwards, `step` apart."""
    for i, n in enumerate(numbers):
        world.gh.issue(REPO, n)
        await world.left_queue(n, ago=oldest - i * step)


async def titles(world: World) -> list[str]:
    return [p["title"] for p in await world.new_pages()]


async def test_21_rows_oldest_9_days_page_at_once_then_weekly_never_hourly(world: World, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await population(world, range(1, 22), oldest=9 * DAY)
    with caplog.at_level(logging.INFO):
        await world.sweep()
    [page] = await world.new_pages()
    assert page["title"] == "Work backlog: stranded rows unresolved for 1 week, 10+ rows"
    assert page["level"] == "error" and page["context"]["stranded"] == 21
    # Logged at WARN, not ERROR: one report must not page twice (GlitchTip, then Grafana's ERROR rule).
    records = [r for r in caplog.records if r.getMessage() == page["title"]]
    assert records and {r.levelname for r in records} == {"WARNING"}
    silent_until = world.now + 5 * DAY
    while world.now + timedelta(hours=1) < silent_until:  # hourly passes for five days: silence
        world.clock.advance(timedelta(hours=1))
        await world.sweep()
    assert await titles(world) == []
    world.clock.advance(timedelta(hours=1))  # the oldest row reaches 14 days
    await world.sweep()
    second = await world.new_pages()
    assert [p["title"] for p in second] == ["Work backlog: stranded rows unresolved for 2 weeks, 10+ rows"]
    assert second[0]["fingerprint"] != page["fingerprint"]  # its own issue, its own notification (#1175)
    for _ in range(4 * 7 - 1):  # thereafter about one page a week
        world.clock.advance(timedelta(hours=6))
        await world.sweep()
    assert await titles(world) == []
    world.clock.advance(timedelta(hours=6))
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 3 weeks, 10+ rows"]


async def test_a_count_climbing_21_to_60_pages_on_the_pass_that_crosses_50(world: World) -> None:
    await population(world, range(1, 22), oldest=9 * DAY)
    await world.sweep()
    assert len(await world.new_pages()) == 1
    world.clock.advance(timedelta(hours=1))
    await population(world, range(22, 61), oldest=8 * DAY, step=timedelta(minutes=1))
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 1 week, 50+ rows"]


async def test_a_count_flickering_49_and_50_does_not_page_hourly(world: World) -> None:
    await population(world, range(1, 51), oldest=8 * DAY)
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 1 week, 50+ rows"]
    for hour in range(12):
        world.clock.advance(timedelta(hours=1))
        world.gh.issues[(REPO, 50)].state = "CLOSED" if hour % 2 == 0 else "OPEN"
        report = await world.sweep()
        assert report.stranded == (49 if hour % 2 == 0 else 50)
    assert await titles(world) == []


async def test_after_triage_the_mark_expires_rather_than_silencing_the_remainder(world: World) -> None:
    await population(world, range(1, 3), oldest=22 * DAY)
    await population(world, range(3, 13), oldest=15 * DAY)
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 3 weeks, 10+ rows"]
    for n in (1, 2):  # triage closes the oldest two: the remainder is at 2 weeks, below the mark
        world.gh.issues[(REPO, n)].state = "CLOSED"
    for _ in range(6):
        world.clock.advance(DAY)
        await world.sweep()
    assert await titles(world) == []  # inside ALERT_BAND_TTL: the remainder cannot beat the mark
    world.clock.advance(DAY + timedelta(minutes=1))  # the mark has expired
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 3 weeks, 10+ rows"]


async def test_an_empty_population_forgets_its_band_even_with_nothing_to_examine(world: World) -> None:
    await population(world, range(1, 30), oldest=30 * DAY)
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 4 weeks, 25+ rows"]
    async with world.engine.begin() as conn:  # every session is brought back: nothing left to examine
        await conn.execute(text("UPDATE backlog.produced_sessions SET status = 'running', ended_at = NULL, "
                                "version = version + 1"))
    report = await world.sweep()
    assert (report.examined, report.stranded) == (0, 0)
    async with world.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM backlog.alert_marks WHERE name = 'stranded'"))
                ).scalar_one() == 0
    await population(world, range(100, 102), oldest=8 * DAY)  # a new population starts from its first week
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 1 week, 1+ row"]


async def test_a_pass_that_cannot_read_a_repository_says_nothing_and_poisons_nothing(world: World) -> None:
    await population(world, range(1, 12), oldest=9 * DAY)
    for n in range(12, 40):  # long since closed
        world.gh.issue(REPO, n, state="CLOSED")
        await world.left_queue(n, ago=60 * DAY)
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 1 week, 10+ rows"]
    world.clock.advance(timedelta(hours=1))
    world.gh.hidden_repos.add(REPO)
    report = await world.sweep()
    # Every row it could not probe reads unknown, so closed rows re-enter at their original age and
    # both halves of the band jump: a false page, and a poisoned mark if it were remembered.
    assert report.unreadable_repos == {REPO} and report.stranded == 39
    assert await titles(world) == []
    world.gh.hidden_repos.clear()
    world.clock.advance(timedelta(hours=1))
    report = await world.sweep()
    assert report.stranded == 11 and await titles(world) == []  # the mark is the one paged for


async def test_a_band_store_that_cannot_remember_pages_loudly_and_suppresses_the_band_page(world: World,
                                                                                          caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await population(world, range(1, 12), oldest=9 * DAY)
    async with world.engine.begin() as conn:  # the store takes no writes
        await conn.execute(text("ALTER TABLE backlog.alert_marks ADD CONSTRAINT broken CHECK (false) NOT VALID"))
    with caplog.at_level(logging.WARNING):
        report = await world.sweep()
    [page] = await world.new_pages()
    assert "band store" in page["title"] and page["level"] == "error"
    # The pass's ledger names the page it sent (issue 27 #8: it read `paged: []`).
    assert report.paged == ["band_store"]
    async with world.engine.connect() as conn:
        ledger = (await conn.execute(text("SELECT paged FROM backlog.liveness_passes ORDER BY id DESC LIMIT 1"))
                  ).scalar_one()
    assert ledger == "band_store"
    assert any(r.levelname == "ERROR" and r.getMessage() == page["title"] for r in caplog.records)  # loud
    async with world.engine.begin() as conn:  # nor can it be read
        await conn.execute(text("ALTER TABLE backlog.alert_marks RENAME TO alert_marks_gone"))
    world.clock.advance(timedelta(hours=1))
    await world.sweep()
    assert [p["fingerprint"][2] for p in await world.new_pages()] == ["read"]
    async with world.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE backlog.alert_marks_gone RENAME TO alert_marks"))
        await conn.execute(text("ALTER TABLE backlog.alert_marks DROP CONSTRAINT broken"))
    world.clock.advance(timedelta(hours=1))
    await world.sweep()
    assert await titles(world) == ["Work backlog: stranded rows unresolved for 1 week, 10+ rows"]
