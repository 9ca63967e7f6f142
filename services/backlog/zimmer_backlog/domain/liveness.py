"""What GitHub says about a row that left the queue (seed 000, "When a row leaves the queue and goes
nowhere" and "Held for a human decision"): the verdict table, which verdicts strand a row, and
what a new verdict does to a hold. Pure: the sweep reads GitHub and the table, these decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


class Verdict(StrEnum):
    ISSUE_CLOSED = "issue_closed"  # resolved
    PR_OPEN = "pr_open"  # an open PR referencing it moved within STALE_PR_AFTER: someone is on it
    PR_STALLED = "pr_stalled"  # the only open PRs referencing it have gone quiet
    PR_MERGED_ISSUE_OPEN = "pr_merged_issue_open"  # ambiguous: done without a closing keyword, or a remainder
    NO_PR = "no_pr"  # no PR has ever referenced it
    ABANDONED_PR = "abandoned_pr"  # PRs referenced it, every one closed unmerged: an attempt was made
    UNKNOWN = "unknown"  # GitHub could not be read: re-checked next pass
    SUPERSEDED = "superseded"  # a newer row carries the same key


STALE_PR_AFTER = timedelta(days=14)
GRACE = timedelta(hours=6)  # a started row is a candidate once its session has been over this long
MAX_EXAMINED_PER_SWEEP = 200
HOLD_DURATION = timedelta(days=14)
# Removals whose premise has a shelf life. trust_failed (a judgement about the thread) has no expiry
# to re-check and issue_closed is terminal.
PROVISIONAL_REMOVALS = ("issue_has_open_pr", "session_already_working")
# The table's "Stranded? Yes" rows: the population nothing drains.
UNRESOLVED = frozenset({Verdict.PR_STALLED, Verdict.PR_MERGED_ISSUE_OPEN, Verdict.NO_PR, Verdict.ABANDONED_PR,
                        Verdict.UNKNOWN})
# Settled rows go last: the candidate population only grows, and a closed issue stays a candidate.
SETTLED = frozenset({Verdict.ISSUE_CLOSED, Verdict.SUPERSEDED})


@dataclass(frozen=True)
class PullRequest:
    repo: str  # owner/name
    number: int
    state: str  # OPEN, CLOSED or MERGED, as GitHub names it
    merged: bool
    updated_at: datetime


@dataclass(frozen=True)
class IssueEvidence:
    """One issue's state and every pull request its timeline says referenced it. A cross-reference
    event does not tell "Refs #141" from "Related to #141", so a bare mention counts."""

    open: bool
    pull_requests: tuple[PullRequest, ...] = ()


def classify(evidence: IssueEvidence, now: datetime) -> Verdict:
    """The seed's table, top row first. A merged PR outranks a stalled one (both strand the row; the
    merged one is the evidence a triager needs). PRs that were all closed unmerged are no work done,
    but they are not "no PR has ever referenced it" either: `abandoned_pr` tells a triager that an
    attempt was made and declined (issue 27 #12)."""
    if not evidence.open:
        return Verdict.ISSUE_CLOSED
    open_prs = [pr for pr in evidence.pull_requests if pr.state == "OPEN"]
    if any(now - pr.updated_at <= STALE_PR_AFTER for pr in open_prs):
        return Verdict.PR_OPEN
    if any(pr.merged for pr in evidence.pull_requests):
        return Verdict.PR_MERGED_ISSUE_OPEN
    if open_prs:
        return Verdict.PR_STALLED
    if evidence.pull_requests:
        return Verdict.ABANDONED_PR
    return Verdict.NO_PR


def is_stranded(verdict: str | None, hold_in_force: bool) -> bool:
    return verdict in UNRESOLVED and not hold_in_force


def awaits_decision(verdict: str | None, hold_in_force: bool) -> bool:
    """Held and unresolved. A held row reading pr_open is in neither population: the moving PR
    resolves it for the time being (the hold is suspended, not void)."""
    return verdict in UNRESOLVED and hold_in_force


def hold_survives(held_against: str, recorded: Verdict) -> bool:
    """A hold records the verdict it was placed against; the sweep voids it, in the same write,
    the first time it records a different one. Unknown does not void (a GitHub outage would
    re-page every held row at once), and pr_open suspends rather than voids (#1420: a PR that only
    mentions the issue reads pr_open while open and changes nothing once merged)."""
    return recorded in (Verdict.UNKNOWN, Verdict.PR_OPEN) or recorded == held_against


class HoldRefusal(StrEnum):
    """Exactly the seed's five refusals, in the order they are checked."""

    NOT_STRANDED = "not_stranded"  # queued, in flight, parked or resolved
    NOT_READ = "not_read"  # no liveness_state yet, or unknown
    SUPERSEDED = "superseded"
    ALREADY_HELD = "already_held"
    LAPSE_NOT_PAGED = "lapse_not_paged"


@dataclass(frozen=True)
class HoldCandidate:
    status: str  # the row's status
    session_claimed: bool  # its session is in flight or parked
    verdict: str | None
    held_until: datetime | None  # None: no hold on the row
    # A newer row with the same key, as the table reads at the moment of the hold: the stored
    # verdict says superseded only once a pass has run since the re-append.
    newer_row: int | None = None
    checked_at: datetime | None = None  # the last liveness check: None, never read


def hold_refusal(row: HoldCandidate, now: datetime) -> tuple[HoldRefusal, str] | None:
    """Why a hold is refused, in words, or None when it may be placed."""
    if row.status not in ("started", "removed"):
        return HoldRefusal.NOT_STRANDED, f"the row is {row.status}, not stranded: only a row that left the queue is"
    if row.session_claimed:
        return HoldRefusal.NOT_STRANDED, "its session is in flight or parked: someone is advancing it"
    if row.newer_row is not None:
        return HoldRefusal.SUPERSEDED, f"item {row.newer_row}, a newer row, carries the same key: someone already " \
                                       "re-queued it"
    if row.held_until is not None and row.held_until > now:
        return HoldRefusal.ALREADY_HELD, f"it is already held until {row.held_until.isoformat()}; a hold cannot be " \
                                         "extended while it is in force"
    if row.held_until is not None:
        return HoldRefusal.LAPSE_NOT_PAGED, "its last hold lapsed and the lapse has not paged yet; it can be held " \
                                            "again once the next liveness pass has paged it"
    if row.verdict == Verdict.UNKNOWN and row.checked_at is not None:
        return HoldRefusal.NOT_READ, f"GitHub could not be read at its last liveness check " \
                                     f"({row.checked_at.isoformat()}): a hold needs a verdict, and the next pass " \
                                     "reads it again"
    if row.verdict is None or row.verdict == Verdict.UNKNOWN:
        return HoldRefusal.NOT_READ, "the liveness sweep has not read this row from GitHub yet"
    if row.verdict == Verdict.SUPERSEDED:
        return HoldRefusal.SUPERSEDED, "a newer row carries the same key"
    if row.verdict not in UNRESOLVED:
        return HoldRefusal.NOT_STRANDED, f"it reads {row.verdict}: resolved, not stranded"
    return None
