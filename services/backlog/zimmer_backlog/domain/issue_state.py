"""A row's issue as GitHub last showed it (seed 000 "The Issues view": "the queue in rank order
joined to live GitHub issue state"; issue 27 #2). Pure: the backlog reads the snapshot and the
row, this decides what the row's issue reads and whether a pull should take the row off the queue.

Two readings can speak about one issue:

- the GitHub snapshot (every 10 minutes, gated repositories only): open, or closed once a complete
  listing no longer has it. It sees no pull requests.
- the liveness sweep's stored verdict (hourly, only rows that left the queue): closed, or open
  with what the pull requests referencing it say.

The snapshot's closed wins over any verdict, as the Stranded section already reads it (#173: closed
at 21:57 and still read pr_merged_issue_open an hour later). Otherwise a verdict that names a pull
request says more than the snapshot can, and where both only say open or closed the newer one
speaks (a closed verdict older than an open listing is an issue reopened since).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from zimmer_backlog.domain.liveness import Verdict


class OnGithub(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    OPEN_PR = "open_pr"  # open, and an open pull request references it
    MERGED_PR = "merged_pr"  # open, and a merged pull request references it
    UNKNOWN = "unknown"  # nothing read it: no issue, outside the snapshot's repositories, or GitHub unreadable


class ReadBy(StrEnum):
    SNAPSHOT = "snapshot"
    LIVENESS = "liveness"


# What each stored verdict says about the issue. unknown and superseded say nothing about it.
VERDICT_READS: dict[str, OnGithub] = {
    Verdict.ISSUE_CLOSED: OnGithub.CLOSED,
    Verdict.PR_OPEN: OnGithub.OPEN_PR,
    Verdict.PR_STALLED: OnGithub.OPEN_PR,
    Verdict.PR_MERGED_ISSUE_OPEN: OnGithub.MERGED_PR,
    Verdict.NO_PR: OnGithub.OPEN,
    Verdict.ABANDONED_PR: OnGithub.OPEN,
}
# The pull's removal reasons (its fixed vocabulary of observed facts) a reading makes true of a
# queued row. A merged PR on an open issue is no such fact: done, or a remainder left (seed 000).
LEAVES_AS: dict[OnGithub, str] = {OnGithub.CLOSED: "issue_closed", OnGithub.OPEN_PR: "issue_has_open_pr"}


@dataclass(frozen=True)
class IssueReadings:
    """What the backlog holds about one row's issue."""

    has_issue: bool  # an issueless (manual-<slug>) row has nothing on GitHub
    status: str  # the row's own status: queued, starting, started, removed
    snapshot_state: str | None = None  # open or closed; None when the snapshot does not hold the issue
    snapshot_seen_at: datetime | None = None  # last listed open, or first found closed
    verdict: str | None = None  # the liveness sweep's stored liveness_state
    verdict_checked_at: datetime | None = None


@dataclass(frozen=True)
class IssueState:
    state: OnGithub
    read_at: datetime | None  # when the reading it comes from was taken (None: nothing read it)
    read_by: ReadBy | None
    leaves_as: str | None = None  # on a queued row: the removal reason a pull should give it


def issue_state(r: IssueReadings) -> IssueState:
    """The row's issue as GitHub last showed it, with when and by whom, and on a queued row the
    removal reason the reading makes true."""
    found = _reading(r)
    leaves = LEAVES_AS.get(found.state) if r.status == "queued" else None
    return IssueState(found.state, found.read_at, found.read_by, leaves)


def _reading(r: IssueReadings) -> IssueState:
    if not r.has_issue:
        return IssueState(OnGithub.UNKNOWN, None, None)
    snapshot = {"open": OnGithub.OPEN, "closed": OnGithub.CLOSED}.get(r.snapshot_state or "")
    by_snapshot = IssueState(snapshot, r.snapshot_seen_at, ReadBy.SNAPSHOT) if snapshot else None
    said = VERDICT_READS.get(r.verdict or "")
    by_verdict = IssueState(said, r.verdict_checked_at, ReadBy.LIVENESS) if said else None
    if by_snapshot is not None and by_snapshot.state is OnGithub.CLOSED:
        return by_snapshot  # #173: closed on the snapshot, whatever the stored verdict says
    if by_verdict is None or by_snapshot is None:
        return by_verdict or by_snapshot or _unread(r)
    if by_verdict.state in (OnGithub.OPEN_PR, OnGithub.MERGED_PR):
        return by_verdict  # the snapshot's open agrees, and only the sweep reads pull requests
    return by_verdict if _newer(by_verdict.read_at, by_snapshot.read_at) else by_snapshot


def _unread(r: IssueReadings) -> IssueState:
    """Nothing says what the issue is; a verdict of unknown still dates the failed read."""
    if r.verdict == Verdict.UNKNOWN:
        return IssueState(OnGithub.UNKNOWN, r.verdict_checked_at, ReadBy.LIVENESS)
    return IssueState(OnGithub.UNKNOWN, None, None)


def _newer(a: datetime | None, b: datetime | None) -> bool:
    """`a` strictly after `b`; an undated reading is the older one (ties go to the snapshot, the
    more frequent reader)."""
    return a is not None and (b is None or a > b)
