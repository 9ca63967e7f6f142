"""Transcript classification's pure rules (seed 003, "Classification is forward-only, and
uncertainty keeps"): the derivation, live / orphaned / unknown, collisions, selection and the fence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from zimmer_common.settings import Environment
from zimmer_sweeper.transcripts.domain import (
    AGE_THRESHOLD,
    BATCH_LIMIT,
    Candidate,
    NameSet,
    collision_step,
    extensions_of,
    liveness,
    select,
    transcript_name,
    transcript_root_fence,
)

BASE = "/home/rails/.zimmer/clones"
CLONE = f"{BASE}/zimmer-main-1785661439-005ceef3"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_seed_example_derives_its_name() -> None:
    assert transcript_name(CLONE) == "-home-rails--zimmer-clones-zimmer-main-1785661439-005ceef3"


def test_slash_dot_and_underscore_all_become_a_dash() -> None:
    assert transcript_name("/a_b/c.d/.e") == "-a-b-c-d--e"
    assert transcript_name("/srv/x/") == "-srv-x"  # the cwd has no trailing slash


def test_the_seed_minimums() -> None:
    assert AGE_THRESHOLD == timedelta(hours=24)
    assert BATCH_LIMIT == 1_000


def _live(*clones: str, colliding: tuple[str, ...] = ()) -> object:
    return liveness(clones, clone_bases=[BASE], colliding=colliding)


def test_a_live_clone_claims_its_name_and_every_subdirectory_extension() -> None:
    live = _live(CLONE)
    name = transcript_name(CLONE)
    assert live.classify(name).kind == "live"
    assert live.classify(name + "-app").kind == "live"  # cwd <clone>/app: the naive sweeper deletes it
    assert live.classify(transcript_name(CLONE + "/services/api_v2")).kind == "live"
    assert live.classify(name + "x").kind == "orphaned"  # not at a '-' boundary: another clone's


def test_a_gone_clone_is_orphaned_and_the_tmp_class_too() -> None:
    live = _live(CLONE)
    gone = transcript_name(f"{BASE}/zimmer-main-1785660000-deadbeef")
    assert live.classify(gone).basis == "gone_clone"
    assert live.classify(gone + "-web").basis == "gone_clone"
    assert live.classify("-tmp-headless-inference-4f1c").basis == "ephemeral"


def test_what_no_rule_attributes_is_unknown() -> None:
    live = _live(CLONE)
    for name in ("-rails", "-home-rails", "-home-rails--zimmer-clones", "-srv-app", "-tmp"):
        assert live.classify(name).kind == "unknown", name


def test_a_directory_colliding_with_the_clones_base_makes_its_names_unknown() -> None:
    other = "/home/rails/.zimmer/clones_old"  # its x/ gives the name clones/old-x would
    live = _live(CLONE, colliding=(other,))
    assert live.classify(transcript_name(other + "/x")).basis == "colliding"
    assert live.classify(transcript_name(f"{BASE}/old-x")).kind == "unknown"
    assert live.classify(transcript_name(f"{BASE}/gone-1")).kind == "orphaned"


def test_collision_search_descends_only_toward_a_root() -> None:
    roots = [BASE, "/tmp"]
    assert collision_step("/home", roots) == "descend"
    assert collision_step("/home/rails/.zimmer", roots) == "descend"
    assert collision_step("/home/rails/.zimmer/clones_old", roots) == "collides"
    assert collision_step("/home/rails/_zimmer", roots) == "descend"  # _zimmer/clones/… would collide too
    assert collision_step(BASE, roots) == "clear"
    assert collision_step(f"{BASE}/x", roots) == "clear"  # inside the class, not a collision
    assert collision_step("/tmp_old", roots) == "collides"
    assert collision_step("/etc", roots) == "clear"
    assert collision_step("/tmp/pytest/clones", ["/tmp/pytest/clones", "/tmp"]) == "clear"
    assert collision_step("/tmp/pytest", ["/tmp/pytest/clones", "/tmp"]) == "descend"


def test_the_guard_reaps_a_clones_name_and_its_extensions_only() -> None:
    name = transcript_name(CLONE)
    names = [name, name + "-app", name + "x", "-rails", name[:-1]]
    assert extensions_of(name, names) == [name, name + "-app"]


def _candidate(name: str, hours: float) -> Candidate:
    return Candidate(name, "gone_clone", (NOW - timedelta(hours=hours)).timestamp())


def test_selection_takes_the_oldest_past_the_bar_up_to_the_limit() -> None:
    chosen = select([_candidate("a", 30), _candidate("b", 23.9), _candidate("c", 100), _candidate("d", 24)],
                    now=NOW, limit=2)
    assert [c.name for c in chosen.due] == ["c", "a"]
    assert [c.name for c in chosen.deferred] == ["d"]
    assert [c.name for c in chosen.too_young] == ["b"]


def test_the_transcript_fence() -> None:
    def verdict(root: str, env: Environment) -> bool:
        return transcript_root_fence(root, durable_volume="/home/rails/.zimmer", claude_home="/home/rails/.claude",
                                     env=env).sweepable

    assert verdict("/home/rails/.claude/projects", Environment.PRODUCTION)
    assert verdict("/home/rails/.claude/projects", Environment.STAGING)
    assert not verdict("/home/rails/.claude/projects", Environment.DEVELOPMENT)
    assert not verdict("/home/rails/.claude/projects", Environment.TEST)
    assert not verdict("/home/rails/.zimmer/projects", Environment.TEST)
    assert verdict("/srv/test-volume/projects", Environment.TEST)
    assert not transcript_root_fence(None, durable_volume="/v", claude_home="/c", env=Environment.PRODUCTION).sweepable


# ---- properties ------------------------------------------------------------------------------

segment = st.text(alphabet="abcz019._-", min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))
clone_names = st.lists(segment, min_size=1, max_size=4).map("-".join)


@given(st.lists(clone_names, min_size=1, max_size=12, unique=True), st.lists(segment, max_size=3),
       st.sampled_from([0, 1, 2]))
def test_a_live_clones_name_and_every_extension_is_never_orphaned(clones: list[str], subdir: list[str],
                                                                  which: int) -> None:
    live = liveness([f"{BASE}/{c}" for c in clones], clone_bases=[BASE])
    cwd = "/".join([f"{BASE}/{clones[which % len(clones)]}", *subdir])
    assert live.classify(transcript_name(cwd)).kind == "live"


@given(st.lists(clone_names, max_size=12), st.text(alphabet="abc-_./", max_size=40))
def test_unknown_is_only_ever_what_no_class_attributes(clones: list[str], name: str) -> None:
    live = liveness([f"{BASE}/{c}" for c in clones], clone_bases=[BASE])
    verdict = live.classify(name)
    if verdict.kind == "orphaned":
        assert name.startswith(transcript_name(BASE) + "-") or name.startswith("-tmp-")
    if not (name.startswith(transcript_name(BASE) + "-") or name.startswith("-tmp-")):
        assert verdict.kind != "orphaned"  # never deleted


@given(st.lists(st.text(alphabet="ab-", min_size=1, max_size=6), max_size=10), st.text(alphabet="ab-", max_size=10))
def test_the_prefix_set_agrees_with_a_scan_of_every_name(claimed: list[str], name: str) -> None:
    naive = any(name == c or name.startswith(c + "-") for c in claimed)
    assert NameSet(claimed).claims(name) == naive


@given(st.lists(st.tuples(st.text(alphabet="xyz", min_size=1, max_size=3), st.floats(0, 200)), max_size=30),
       st.integers(0, 10))
def test_selection_never_takes_a_young_directory_nor_more_than_the_limit(items: list[tuple[str, float]],
                                                                        limit: int) -> None:
    chosen = select([_candidate(n, h) for n, h in items], now=NOW, limit=limit)
    assert len(chosen.due) <= limit
    assert all(NOW.timestamp() - c.newest >= AGE_THRESHOLD.total_seconds() for c in chosen.due + chosen.deferred)
    assert len(chosen.due) + len(chosen.deferred) + len(chosen.too_young) == len(items)


@given(st.lists(st.sampled_from(["a", "b_c", ".", "..", "", ".d", "e."]), max_size=6), st.booleans())
def test_the_fast_derivation_agrees_with_normpath(parts: list[str], trailing: bool) -> None:
    import posixpath

    cwd = "/" + "/".join(parts) + ("/" if trailing else "")
    assert transcript_name(cwd) == posixpath.normpath(cwd).translate(str.maketrans("/._", "---"))
