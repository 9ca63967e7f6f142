"""The disk sweeps' pure rules (seed 003): tombstone names, orphan clone candidates, scratch and
attachment orphans, and the fence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_common.settings import Environment
from zimmer_sweeper.clones.domain import (
    AGE_THRESHOLD,
    BATCH_LIMIT,
    ORPHAN_AGE_THRESHOLD,
    ORPHAN_SWEEP_LIMIT,
    PRESSURE_AGE_THRESHOLD,
    PRESSURE_BATCH_LIMIT,
    aged_clone_directories,
    choose_orphans,
    orphan_session_directories,
    session_directory_candidates,
    session_id_of,
)
from zimmer_sweeper.disk.domain import (
    REAP_LIMIT,
    DirEntry,
    fence,
    is_tombstone,
    tombstone_name,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def entry(name: str, age: timedelta, is_dir: bool = True) -> DirEntry:
    return DirEntry(name, f"/clones/{name}", NOW - age, is_dir)


def test_the_seed_numbers() -> None:
    assert (AGE_THRESHOLD, PRESSURE_AGE_THRESHOLD) == (timedelta(hours=48), timedelta(hours=2))
    assert (BATCH_LIMIT, PRESSURE_BATCH_LIMIT, REAP_LIMIT) == (20, 20, 50)
    assert (ORPHAN_AGE_THRESHOLD, ORPHAN_SWEEP_LIMIT) == (timedelta(hours=1), 200)


def test_tombstone_names() -> None:
    tomb = tombstone_name("zimmer-main-1785661439-005ceef3", "0123abcd")
    assert tomb == "zimmer-main-1785661439-005ceef3.deleting-0123abcd" and is_tombstone(tomb)
    assert not is_tombstone("zimmer-main-1785661439-005ceef3")
    assert not is_tombstone(".deleting-0123abcd")  # no clone name before the mark
    assert not is_tombstone("x.deleting-0123abcd\n")
    with pytest.raises(ValueError):
        tombstone_name("x", "NOTHEX!!")


@given(st.text(alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1,
               max_size=60),
       st.text(alphabet="0123456789abcdef", min_size=8, max_size=64))
def test_every_tombstone_is_recognised_and_never_a_candidate(name: str, token: str) -> None:
    tomb = tombstone_name(name, token)
    assert is_tombstone(tomb)
    aged = aged_clone_directories([entry(tomb, timedelta(days=30))], now=NOW, age_bar=PRESSURE_AGE_THRESHOLD)
    assert aged == []


def test_aged_directories_are_oldest_first_past_the_bar_and_only_real_directories() -> None:
    entries = [entry("young", timedelta(hours=47)), entry("old", timedelta(hours=72)),
               entry("older", timedelta(hours=100)), entry("file", timedelta(days=9), is_dir=False),
               entry("gone.deleting-0123abcd", timedelta(days=9))]
    assert [e.name for e in aged_clone_directories(entries, now=NOW, age_bar=AGE_THRESHOLD)] == ["older", "old"]
    under_pressure = aged_clone_directories(entries, now=NOW, age_bar=PRESSURE_AGE_THRESHOLD)
    assert [e.name for e in under_pressure] == ["older", "old", "young"]


def test_a_tracked_basename_is_never_a_candidate_whatever_its_status() -> None:
    """#709's shape: the only answer to "which directories are safe to delete" is one no session
    row names at all."""
    aged = [entry("archived-one", timedelta(days=5)), entry("nobodys", timedelta(days=4))]
    choice = choose_orphans(aged, tracked={"archived-one": True, "nobodys": False}, live_clone_paths=[],
                            limit=BATCH_LIMIT)
    assert [e.name for e in choice.candidates] == ["nobodys"]
    assert [e.name for e in choice.tracked] == ["archived-one"]


def test_live_clone_paths_and_unanswered_basenames_are_kept() -> None:
    aged = [entry("live-by-path", timedelta(days=5)), entry("live-by-name", timedelta(days=5)),
            entry("unasked", timedelta(days=5)), entry("free", timedelta(days=5))]
    choice = choose_orphans(aged, tracked={"live-by-path": False, "live-by-name": False, "free": False},
                            live_clone_paths=["/clones/live-by-path", "/elsewhere/live-by-name/"], limit=20)
    assert [e.name for e in choice.live] == ["live-by-name", "live-by-path"]
    assert [e.name for e in choice.unanswered] == ["unasked"]
    assert [e.name for e in choice.candidates] == ["free"]


@given(st.lists(st.tuples(st.integers(0, 10_000), st.booleans()), max_size=60), st.integers(1, 25))
def test_candidates_are_the_oldest_untracked_and_never_more_than_the_limit(rows: list[tuple[int, bool]],
                                                                            limit: int) -> None:
    aged = [entry(f"c{i}", timedelta(hours=hours)) for i, (hours, _) in enumerate(rows)]
    tracked = {f"c{i}": t for i, (_, t) in enumerate(rows)}
    choice = choose_orphans(aged, tracked=tracked, live_clone_paths=[], limit=limit)
    assert len(choice.candidates) <= limit
    assert not any(tracked[e.name] for e in choice.candidates)
    untracked = sorted((e for e in aged if not tracked[e.name]), key=lambda e: (e.mtime, e.name))
    assert choice.candidates == untracked[:limit] and choice.over_limit == untracked[limit:]


def test_session_directory_names() -> None:
    assert session_id_of("42") == 42 and session_id_of("999999999999999999") == 999999999999999999
    for name in ("0", "042", "temp_0f8fad5b-d9cb-469f-a165-70867728950e", "1234567890123456789", "42\n", "4 2",
                 "-1", "42.deleting-0123abcd", "١٢"):
        assert session_id_of(name) is None, name


def test_session_directory_candidates_are_old_enough_and_named_like_ids() -> None:
    entries = [entry("7", timedelta(minutes=59)), entry("8", timedelta(minutes=61)), entry("9", timedelta(days=2)),
               entry("temp_abc", timedelta(days=2)), entry("10", timedelta(days=3), is_dir=False)]
    assert [sid for sid, _ in session_directory_candidates(entries, now=NOW)] == [9, 8]


def test_an_orphan_is_a_set_difference_capped_with_the_overflow_counted() -> None:
    candidates = [(i, entry(str(i), timedelta(hours=2))) for i in range(1, 251)]
    choice = orphan_session_directories(candidates, existing=[3, 4])
    assert len(choice.orphans) == ORPHAN_SWEEP_LIMIT and choice.overflow == 248 - ORPHAN_SWEEP_LIMIT
    assert {3, 4}.isdisjoint(sid for sid, _ in choice.orphans)


@pytest.mark.parametrize(("root", "env", "sweepable"), [
    ("/home/rails/.zimmer/clones", Environment.PRODUCTION, True),
    ("/home/rails/.zimmer/clones", Environment.STAGING, True),
    ("/home/rails/.zimmer/clones", Environment.DEVELOPMENT, False),
    ("/home/rails/.zimmer/clones", Environment.TEST, False),
    ("/home/rails/.zimmer", Environment.TEST, False),  # the volume itself
    ("/home/rails", Environment.DEVELOPMENT, False),  # a root holding the volume
    ("/srv/dev-clones", Environment.DEVELOPMENT, True),  # relocated clear of it
    ("/srv/dev-clones", Environment.TEST, True),
    ("/home/rails/.zimmer-other/clones", Environment.TEST, True),  # a sibling, not inside
    (None, Environment.PRODUCTION, False),
])
def test_the_fence_only_the_deployment_that_owns_the_volume(root: str | None, env: Environment,
                                                            sweepable: bool) -> None:
    verdict = fence(root, durable_volume="/home/rails/.zimmer", env=env)
    assert verdict.sweepable is sweepable, verdict.sentence
    assert verdict.sentence
