"""The liveness sweep's pure rules: the verdict table, holds and the alert bands (seed 000)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zimmer_backlog.domain import bands
from zimmer_backlog.domain.liveness import (
    STALE_PR_AFTER,
    UNRESOLVED,
    HoldCandidate,
    IssueEvidence,
    PullRequest,
    Verdict,
    awaits_decision,
    classify,
    hold_refusal,
    hold_survives,
    is_stranded,
)

NOW = datetime(2026, 9, 11, 12, tzinfo=UTC)
DAY = timedelta(days=1)


def pr(state: str, age: timedelta) -> PullRequest:
    return PullRequest("acme/zimmer", 1, state, state == "MERGED", NOW - age)


@pytest.mark.parametrize(("evidence", "verdict"), [
    (IssueEvidence(open=False, pull_requests=(pr("OPEN", DAY),)), Verdict.ISSUE_CLOSED),
    (IssueEvidence(open=True, pull_requests=(pr("OPEN", STALE_PR_AFTER),)), Verdict.PR_OPEN),
    (IssueEvidence(open=True, pull_requests=(pr("OPEN", STALE_PR_AFTER + timedelta(seconds=1)),)), Verdict.PR_STALLED),
    (IssueEvidence(open=True, pull_requests=(pr("MERGED", 40 * DAY), pr("OPEN", 30 * DAY))),
     Verdict.PR_MERGED_ISSUE_OPEN),
    (IssueEvidence(open=True, pull_requests=(pr("MERGED", 40 * DAY), pr("OPEN", DAY))), Verdict.PR_OPEN),
    (IssueEvidence(open=True, pull_requests=(pr("CLOSED", DAY),)), Verdict.ABANDONED_PR),  # declined: tried
    (IssueEvidence(open=True, pull_requests=(pr("CLOSED", DAY), pr("OPEN", 30 * DAY))), Verdict.PR_STALLED),
    (IssueEvidence(open=True), Verdict.NO_PR),
])
def test_the_verdict_table(evidence: IssueEvidence, verdict: Verdict) -> None:
    assert classify(evidence, NOW) == verdict


def test_stranded_is_exactly_the_rows_the_table_marks_unresolved() -> None:
    assert UNRESOLVED == {Verdict.PR_STALLED, Verdict.PR_MERGED_ISSUE_OPEN, Verdict.NO_PR, Verdict.ABANDONED_PR,
                          Verdict.UNKNOWN}
    for v in Verdict:
        assert is_stranded(v, hold_in_force=False) == (v in UNRESOLVED)
        assert not is_stranded(v, hold_in_force=True)
        assert awaits_decision(v, hold_in_force=True) == (v in UNRESOLVED)  # a held pr_open row is in neither


@given(st.sampled_from(list(Verdict)), st.sampled_from(list(Verdict)))
def test_a_hold_survives_only_its_own_verdict_a_failed_read_and_a_moving_pr(held: Verdict, recorded: Verdict) -> None:
    assert hold_survives(held, recorded) == (recorded in (held, Verdict.UNKNOWN, Verdict.PR_OPEN))


def test_hold_refusals_are_checked_in_the_seeds_order() -> None:
    def refuse(status: str = "started", claimed: bool = False, verdict: str | None = "no_pr",
               held_until: datetime | None = None, newer_row: int | None = None) -> str | None:
        got = hold_refusal(HoldCandidate(status, claimed, verdict, held_until, newer_row), NOW)
        return None if got is None else got[0].value
    assert refuse() is None and refuse(status="removed") is None
    assert refuse(status="queued") == refuse(status="starting") == refuse(claimed=True) == "not_stranded"
    assert refuse(verdict="issue_closed") == refuse(verdict="pr_open") == "not_stranded"
    assert refuse(verdict=None) == refuse(verdict="unknown") == "not_read"
    # Issue 32 #7: a row the sweep read, and GitHub did not answer, is not "not read yet".
    read = hold_refusal(HoldCandidate("started", False, "unknown", None, None, NOW - DAY), NOW)
    never = hold_refusal(HoldCandidate("started", False, None, None, None, None), NOW)
    assert read is not None and never is not None and read[0].value == never[0].value == "not_read"
    assert "could not be read at its last liveness check" in read[1] and "has not read this row" in never[1]
    assert refuse(verdict="superseded") == "superseded"
    # A newer row the last pass has not seen yet supersedes as surely as the stored verdict (issue 27 #3).
    assert refuse(newer_row=541) == refuse(newer_row=541, verdict=None) == "superseded"
    assert refuse(newer_row=541, status="queued") == "not_stranded"
    assert refuse(held_until=NOW + DAY) == "already_held"
    assert refuse(held_until=NOW) == refuse(held_until=NOW - DAY) == "lapse_not_paged"


# ---- bands ------------------------------------------------------------------------------------


def test_band_of() -> None:
    assert bands.band_of(0, 30 * DAY) is None
    assert bands.band_of(21, 7 * DAY) is None  # not past ALERT_AFTER
    assert bands.band_of(21, 9 * DAY) == bands.Band(1, 10)
    assert bands.band_of(1, 14 * DAY) == bands.Band(2, 1)
    assert bands.band_of(49, 8 * DAY).rows == 25 and bands.band_of(50, 8 * DAY).rows == 50
    assert bands.band_of(10**6, 8 * DAY).rows == 1000


def test_the_worked_examples() -> None:
    d = bands.decide(21, 9 * DAY, None, NOW)
    assert d.page == bands.Band(1, 10) and d.mark == bands.Mark(bands.Band(1, 10), NOW + 7 * DAY)
    for hours in range(1, 5 * 24):  # silent for five days
        assert bands.decide(21, 9 * DAY + timedelta(hours=hours), d.mark, NOW + timedelta(hours=hours)).page is None
    assert bands.decide(21, 14 * DAY, d.mark, NOW + 5 * DAY).page == bands.Band(2, 10)
    assert bands.decide(60, 9 * DAY, d.mark, NOW + timedelta(hours=1)).page == bands.Band(1, 50)
    empty = bands.decide(0, timedelta(0), d.mark, NOW + DAY)
    assert empty == bands.Decision(None, None)  # forgets its band


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1200), st.integers(0, 120)), min_size=1, max_size=60))
def test_no_page_without_a_step_above_the_live_mark(passes: list[tuple[int, int]]) -> None:
    """Hourly passes over any population: a page needs a step up in weeks or rows over the mark
    still in force, at most one page per band per TTL, and the mark never goes down while in force."""
    mark: bands.Mark | None = None
    now = NOW
    for count, age_days in passes:
        now += timedelta(hours=1)
        decision = bands.decide(count, timedelta(days=age_days, hours=1), mark, now)
        live = mark if mark is not None and mark.expires_at > now else None
        band = bands.band_of(count, timedelta(days=age_days, hours=1))
        if decision.page is not None:
            assert band == decision.page
            assert live is None or band.weeks > live.band.weeks or band.rows > live.band.rows
            assert decision.mark is not None and decision.mark.expires_at == now + bands.ALERT_BAND_TTL
        elif count > 0 and band is not None:
            assert live is not None and band.weeks <= live.band.weeks and band.rows <= live.band.rows
        if decision.mark is not None and live is not None:
            assert decision.mark.band.weeks >= live.band.weeks and decision.mark.band.rows >= live.band.rows
        mark = decision.mark


def test_a_49_50_flicker_pages_once() -> None:
    mark, pages, now = None, 0, NOW
    for hour in range(48):
        now += timedelta(hours=1)
        d = bands.decide(50 if hour % 2 else 49, 8 * DAY, mark, now)
        pages += d.page is not None
        mark = d.mark
    assert pages == 2  # 25+ on the first pass, 50+ on the first crossing, then never
