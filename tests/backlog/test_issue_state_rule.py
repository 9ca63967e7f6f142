"""A row's issue as GitHub last showed it (issue 27 #2), the pure rule: the snapshot's closed wins
over the stored verdict (#173), a verdict naming a pull request says more than the snapshot, the
newer of two open/closed readings speaks, and a queued row learns the removal reason a pull
should give it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_backlog.domain.issue_state import LEAVES_AS, VERDICT_READS, IssueReadings, OnGithub, ReadBy, issue_state
from zimmer_backlog.domain.liveness import Verdict

NOW = datetime(2026, 9, 12, 22, tzinfo=UTC)
MIN = timedelta(minutes=1)
SNAP, SWEEP = NOW - 4 * MIN, NOW - 50 * MIN  # the snapshot reads every 10 minutes, the sweep hourly


def reading(status: str = "queued", snapshot: str | None = None, verdict: str | None = None, *,
            seen: datetime = SNAP, checked: datetime = SWEEP, has_issue: bool = True) -> IssueReadings:
    return IssueReadings(has_issue=has_issue, status=status, snapshot_state=snapshot,
                         snapshot_seen_at=seen if snapshot else None, verdict=verdict,
                         verdict_checked_at=checked if verdict else None)


@pytest.mark.parametrize(("given_", "state", "read_at", "read_by", "leaves_as"), [
    (reading(snapshot="open"), OnGithub.OPEN, SNAP, ReadBy.SNAPSHOT, None),
    (reading(snapshot="closed"), OnGithub.CLOSED, SNAP, ReadBy.SNAPSHOT, "issue_closed"),
    (reading(), OnGithub.UNKNOWN, None, None, None),  # not in the snapshot's repositories, never swept
    (reading(has_issue=False), OnGithub.UNKNOWN, None, None, None),  # manual-<slug>
    # #173: closed at 21:57, still pr_merged_issue_open an hour later: the snapshot's closed wins.
    (reading("started", "closed", "pr_merged_issue_open", checked=NOW), OnGithub.CLOSED, SNAP, ReadBy.SNAPSHOT, None),
    (reading("started", "open", "pr_open"), OnGithub.OPEN_PR, SWEEP, ReadBy.LIVENESS, None),
    (reading("removed", "open", "pr_stalled"), OnGithub.OPEN_PR, SWEEP, ReadBy.LIVENESS, None),
    (reading("started", None, "pr_merged_issue_open"), OnGithub.MERGED_PR, SWEEP, ReadBy.LIVENESS, None),
    (reading("started", "open", "no_pr"), OnGithub.OPEN, SNAP, ReadBy.SNAPSHOT, None),  # the newer open
    (reading("started", "open", "abandoned_pr", checked=NOW), OnGithub.OPEN, NOW, ReadBy.LIVENESS, None),
    (reading("started", None, "issue_closed"), OnGithub.CLOSED, SWEEP, ReadBy.LIVENESS, None),
    (reading("started", "open", "issue_closed"), OnGithub.OPEN, SNAP, ReadBy.SNAPSHOT, None),  # reopened since
    (reading("started", "open", "issue_closed", checked=NOW), OnGithub.CLOSED, NOW, ReadBy.LIVENESS, None),
    (reading("started", None, "unknown"), OnGithub.UNKNOWN, SWEEP, ReadBy.LIVENESS, None),  # the failed read, dated
    (reading("started", "open", "unknown"), OnGithub.OPEN, SNAP, ReadBy.SNAPSHOT, None),
    (reading("started", None, "superseded"), OnGithub.UNKNOWN, None, None, None),  # says nothing about the issue
    # A queued row with a verdict: today none carries one (the sweep reads only rows that left the
    # queue), but the rule does not lean on that.
    (reading("queued", "open", "pr_open"), OnGithub.OPEN_PR, SWEEP, ReadBy.LIVENESS, "issue_has_open_pr"),
    (reading("queued", "open", "pr_merged_issue_open"), OnGithub.MERGED_PR, SWEEP, ReadBy.LIVENESS, None),
    (reading("starting", "closed"), OnGithub.CLOSED, SNAP, ReadBy.SNAPSHOT, None),  # a pull has it already
])
def test_the_table(given_: IssueReadings, state: OnGithub, read_at: datetime | None, read_by: ReadBy | None,
                   leaves_as: str | None) -> None:
    found = issue_state(given_)
    assert (found.state, found.read_at, found.read_by, found.leaves_as) == (state, read_at, read_by, leaves_as)


def test_every_verdict_the_sweep_writes_is_read_or_deliberately_silent() -> None:
    assert set(VERDICT_READS) | {Verdict.UNKNOWN, Verdict.SUPERSEDED} == set(Verdict)
    assert set(LEAVES_AS.values()) == {"issue_closed", "issue_has_open_pr"}  # the pull's vocabulary, no other


moments = st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1)).map(
    lambda d: d.replace(tzinfo=UTC))
readings = st.builds(
    IssueReadings, has_issue=st.booleans(), status=st.sampled_from(["queued", "starting", "started", "removed"]),
    snapshot_state=st.sampled_from([None, "open", "closed"]), snapshot_seen_at=st.none() | moments,
    verdict=st.sampled_from([None, *Verdict]), verdict_checked_at=st.none() | moments)


@given(readings)
def test_what_any_reading_gives(r: IssueReadings) -> None:
    found = issue_state(r)
    if not r.has_issue:
        assert (found.state, found.read_at, found.leaves_as) == (OnGithub.UNKNOWN, None, None)
        return
    if r.snapshot_state == "closed":  # #173, whatever the verdict
        assert (found.state, found.read_by, found.read_at) == (OnGithub.CLOSED, ReadBy.SNAPSHOT, r.snapshot_seen_at)
    # The reading's time is the time of the reading it came from, never invented.
    if found.read_by is ReadBy.SNAPSHOT:
        assert found.read_at == r.snapshot_seen_at and r.snapshot_state is not None
    elif found.read_by is ReadBy.LIVENESS:
        assert found.read_at == r.verdict_checked_at and r.verdict is not None
    else:
        assert found.state is OnGithub.UNKNOWN and found.read_at is None
    # A state other than unknown was read by someone; unknown only when nothing says otherwise.
    assert (found.state is OnGithub.UNKNOWN) == (r.snapshot_state is None and VERDICT_READS.get(r.verdict or "") is None)
    # Only a queued row is told to leave, and only for the pull's own reasons.
    assert found.leaves_as == (LEAVES_AS.get(found.state) if r.status == "queued" else None)
