"""The trash pipeline's rules (seed 003, "The clone cleanup's own git commands are bounded too"
through "Counting mangled clones without paging for each one"): its numbers, which host acts on an
archived session, what a working tree's changes amount to, what a failed attempt leads to, whether
anything restorable is left, and the daily report's window and line. Plain functions of their
arguments: git, the disk, spot-gate and the tables are the callers'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final

# The reversible window: an archived session's clone, its preserved work, its scratch and its
# attachments are kept this long after the archive, and nothing but the pipeline reaps inside it.
TRASH_RETENTION_PERIOD: Final = timedelta(days=4)
# A bounded quiet retry: one of the five attempts may be spent by a run a deploy or a kill cut
# short (the claim counts it before the work), and only the fifth failure is loud.
MAX_ATTEMPTS: Final = 5
RETRY_WAIT: Final = timedelta(seconds=30)
# Every git command on this path is local and takes milliseconds on a healthy 21k-file clone; the
# bound exists for a git wedged on stuck volume I/O or its own lock, which would otherwise never
# give the maintenance thread back.
GIT_TIMEOUT_SECONDS: Final = 120.0
# An hour wider than the daily cadence, measured from when the run starts: a late run (a deploy, a
# busy scheduler) would otherwise drop what fell in the gap. A double count is visible in the
# lines themselves; a gap is not.
REPORT_WINDOW: Final = timedelta(hours=25)

# What Zimmer itself writes into a clone (the runtime's scaffolding), at the clone's root or its
# agent subdirectory: never the session's work, so it neither makes a clone dirty nor travels in
# the patch. Git pathspecs (glob magic: `**/` also matches the root).
SCAFFOLDING_PATHSPECS: Final = (":(exclude,glob)**/.mcp.json", ":(exclude,glob)**/.claude/**",
                                ":(exclude,glob)**/claude-stderr.log")


class State(StrEnum):
    PENDING = "pending"
    HELD = "held"
    TRASHED = "trashed"
    DONE = "done"
    EXHAUSTED = "exhausted"
    CANCELLED = "cancelled"
    RESTORING = "restoring"
    RESTORED = "restored"
    EMPTIED = "emptied"
    KEPT = "kept"


# Where EmptyTrash looks once the deadline passes: everything still holding bytes on this disk.
# A restore in flight is not trash; a finished record has nothing left.
EMPTIABLE: Final = frozenset({State.PENDING, State.HELD, State.TRASHED, State.EXHAUSTED})


class Finding(StrEnum):
    CLEAN = "clean"
    DIRTY = "dirty"
    UNKNOWN = "unknown"  # git timed out: nothing is known, so it is preserved as dirty, never deleted as clean
    MANGLED = "mangled"
    ABSENT = "absent"
    NOT_A_REPOSITORY = "not_a_repository"


def trash_deadline(archived_at: datetime) -> datetime:
    return archived_at + TRASH_RETENTION_PERIOD


def acts_here(clone_host: str | None, this_host: str, *, exists_here: Callable[[], bool]) -> bool:
    """Whether this host's sweeper takes an archived session: its clone's host is this one, or the
    host is not known and the session's directories are on this disk (asked only then)."""
    if clone_host is not None:
        return clone_host == this_host
    return exists_here()


@dataclass(frozen=True)
class TreeChanges:
    """What a working tree holds against HEAD, scaffolding left out."""

    added: int = 0
    modified: int = 0
    deleted: int = 0

    @property
    def total(self) -> int:
        return self.added + self.modified + self.deleted

    @property
    def only_deletions(self) -> bool:
        """The #412 shape: an interrupted in-place recursive delete leaves nothing but deletions of
        tracked files. Preserving it would replay the corruption onto the restored clone; dropping
        it is self-healing (the files come back from HEAD, the real work travels in the bundle)."""
        return self.deleted > 0 and self.added == 0 and self.modified == 0


def tree_changes(name_status: Iterable[str]) -> TreeChanges:
    """Count `git diff --name-status --no-renames` letters (A, M, D, T, ...): a type change or
    anything else that is not an add or a delete is a modification."""
    added = modified = deleted = 0
    for letter in name_status:
        if letter.startswith("A"):
            added += 1
        elif letter.startswith("D"):
            deleted += 1
        else:
            modified += 1
    return TreeChanges(added, modified, deleted)


class AfterFailure(StrEnum):
    RETRY = "retry"
    EXHAUSTED = "exhausted"


def after_failure(attempts: int) -> AfterFailure:
    """A failed attempt is retried after RETRY_WAIT until MAX_ATTEMPTS have been spent."""
    return AfterFailure.EXHAUSTED if attempts >= MAX_ATTEMPTS else AfterFailure.RETRY


def failure_log_level(attempts: int) -> str:
    """Intermediate attempts make no noise worth waking anyone for: the first (often a deploy's
    interrupt) is INFO, the next ones WARN; exhaustion alone is ERROR and pages."""
    if after_failure(attempts) is AfterFailure.EXHAUSTED:
        return "error"
    return "info" if attempts <= 1 else "warning"


def restorable_left(*, artifacts_exist: bool, session_storage_exists: bool) -> bool:
    """The artifact question: a retry that finds the clone gone must not conclude that nothing is
    left to restore while the bundle and patch an earlier attempt preserved are still on disk.
    Clearing the deadline then would hand the only copy of unpushed work to the first reaper."""
    return artifacts_exist or session_storage_exists


@dataclass(frozen=True)
class Defusal:
    session_id: int
    dropped_deletions: int


def report_since(started_at: datetime) -> datetime:
    """The report's window opens REPORT_WINDOW before the run started (not before cron fired)."""
    return started_at - REPORT_WINDOW


def report_line(defusals: Sequence[Defusal]) -> tuple[str, str]:
    """(level, message) of the daily mangled clone report: WARN when the guard defused anything
    (the per-occurrence lines are WARN too, so this never pages), INFO on a day with none, which is
    below the export threshold and therefore silence."""
    if not defusals:
        return "info", "mangled clone report: no clone was defused in the last 25 hours"
    sessions = sorted({d.session_id for d in defusals})
    dropped = sum(d.dropped_deletions for d in defusals)
    return "warning", (f"mangled clone report: {len(sessions)} session(s) had a clone defused in the last 25 hours, "
                       f"{dropped} tracked-file deletion(s) dropped; sessions {', '.join(map(str, sessions))}")


class ArchivedCloneAction(StrEnum):
    ADOPT = "adopt"  # the pipeline has not seen this archive: record it, so it gets its reversible window
    LEAVE = "leave"  # inside its window, or being restored: the pipeline's alone
    REAP = "reap"  # its deadline passed (or nothing restorable was left): the guard may take the clone


@dataclass(frozen=True)
class RecordView:
    state: State
    trash_after: datetime | None
    session_version: int


def archived_clone_action(record: RecordView | None, *, session_version: int, now: datetime) -> ArchivedCloneAction:
    """What the hourly stale reap does with an archived session's clone found on this disk. A session
    changed since its record (archived again while the event is in flight) is adopted, never reaped:
    reaping on the old record would take the new archive's undo window and its unpreserved work."""
    if record is None or session_version > record.session_version:
        return ArchivedCloneAction.ADOPT
    if record.state in (State.DONE, State.EMPTIED):
        return ArchivedCloneAction.REAP  # its cycle ended with nothing to keep, and a clone is back on disk
    if record.state in EMPTIABLE and record.trash_after is not None and record.trash_after <= now:
        return ArchivedCloneAction.REAP
    # Inside its window, being restored, or a cycle that ended with the session live (cancelled,
    # kept): a record that contradicts the session's status is left alone; leaking costs disk.
    return ArchivedCloneAction.LEAVE
