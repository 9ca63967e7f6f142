"""The pure rules behind the clone questions (zimmer_spot_gate.domain.clones)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.clones import (
    Match,
    ReportOutcome,
    StoredClone,
    asked_path_problem,
    is_drift,
    judge_report,
    ownership,
    report_problem,
)

T = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_an_asked_path_is_an_absolute_path_or_a_bare_basename() -> None:
    assert asked_path_problem("/srv/clones/zimmer-main-1") is None
    assert asked_path_problem("/srv/clones/zimmer-main-1/") is None
    assert asked_path_problem("zimmer-main-1") is None
    for bad in ("srv/clones/x", "./x", "/", "//", ".", "..", "/srv/..", "/srv/."):
        assert asked_path_problem(bad), bad


def test_drift_is_a_basename_match_at_another_absolute_path() -> None:
    assert is_drift("/mnt/relocated/zimmer-1", "/srv/clones/zimmer-1")
    assert not is_drift("/srv/clones/zimmer-1", "/srv/clones/zimmer-1")
    assert not is_drift("/srv/clones/zimmer-1/", "/srv/clones/zimmer-1")
    assert not is_drift("zimmer-1", "/srv/clones/zimmer-1")  # a bare basename is no path to differ from


@given(st.lists(st.tuples(st.integers(1, 10**6), st.booleans(), st.booleans()), unique_by=lambda t: t[0]))
def test_an_answer_protects_only_what_it_tracks(rows: list[tuple[int, bool, bool]]) -> None:
    matches = [Match(sid, "/srv/clones/x" if same else "/elsewhere/x", protected) for sid, protected, same in rows]
    answer = ownership("/srv/clones/x", "x", matches)
    assert answer.tracked_by == sorted(sid for sid, _, _ in rows)
    assert set(answer.protected_by) <= set(answer.tracked_by) and set(answer.drift) <= set(answer.tracked_by)
    assert answer.protected_by == sorted(sid for sid, protected, _ in rows if protected)
    assert answer.drift == sorted(sid for sid, _, same in rows if not same)


def test_a_report_must_name_a_directory_the_sweepers_can_match() -> None:
    assert report_problem("/srv/clones/x", "services/web") is None
    assert report_problem("/srv/clones/x", None) is None
    assert report_problem("srv/clones/x", None)
    assert report_problem("/", None)
    assert report_problem("/srv/clones/x", "../../etc")
    assert report_problem("/srv/clones/x", "/etc")


def test_a_report_replaces_the_stored_clone_unless_it_is_older_or_the_same() -> None:
    stored = StoredClone("/srv/clones/a", None, False, "h1", T)
    assert judge_report(stored, StoredClone("/srv/clones/b", None, False, "h1", T + timedelta(seconds=1))) \
        is ReportOutcome.RECORDED
    assert judge_report(stored, StoredClone("/srv/clones/b", None, False, "h1", T - timedelta(seconds=1))) \
        is ReportOutcome.STALE
    assert judge_report(stored, StoredClone("/srv/clones/a", None, False, "h1", T + timedelta(hours=1))) \
        is ReportOutcome.UNCHANGED
    never = StoredClone(None, None, False, None, None)
    assert judge_report(never, StoredClone("/srv/clones/a", None, True, None, T)) is ReportOutcome.RECORDED
