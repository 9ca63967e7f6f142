"""The trash pipeline's pure rules: its numbers, which host acts, what a tree's changes amount to,
retries, the artifact question, the stale reap's decision and the daily report's window and line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from zimmer_sweeper.trash.domain import (
    GIT_TIMEOUT_SECONDS,
    MAX_ATTEMPTS,
    REPORT_WINDOW,
    RETRY_WAIT,
    TRASH_RETENTION_PERIOD,
    AfterFailure,
    ArchivedCloneAction,
    Defusal,
    RecordView,
    State,
    acts_here,
    after_failure,
    archived_clone_action,
    failure_log_level,
    report_line,
    report_since,
    restorable_left,
    trash_deadline,
    tree_changes,
)

T = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_the_seed_numbers() -> None:
    assert (TRASH_RETENTION_PERIOD, MAX_ATTEMPTS, RETRY_WAIT, GIT_TIMEOUT_SECONDS, REPORT_WINDOW) == (
        timedelta(days=4), 5, timedelta(seconds=30), 120.0, timedelta(hours=25))
    assert trash_deadline(T) == T + timedelta(days=4)


def test_the_clone_host_decides_and_the_disk_only_when_it_is_unknown() -> None:
    def boom() -> bool:
        raise AssertionError("the disk is asked only when the host is unknown")

    assert acts_here("host-a", "host-a", exists_here=boom)
    assert not acts_here("host-b", "host-a", exists_here=boom)
    assert acts_here(None, "host-a", exists_here=lambda: True)
    assert not acts_here(None, "host-a", exists_here=lambda: False)


def test_only_deletions_is_the_mangled_shape() -> None:
    assert tree_changes(["D", "D", "D"]).only_deletions
    assert not tree_changes([]).only_deletions
    assert not tree_changes(["D", "A"]).only_deletions
    assert not tree_changes(["D", "M"]).only_deletions
    changes = tree_changes(["A", "M", "T", "D"])
    assert (changes.added, changes.modified, changes.deleted, changes.total) == (1, 2, 1, 4)


def test_retries_are_quiet_until_the_fifth_failure() -> None:
    assert [after_failure(n) for n in range(1, 6)] == [AfterFailure.RETRY] * 4 + [AfterFailure.EXHAUSTED]
    assert [failure_log_level(n) for n in range(1, 6)] == ["info", "warning", "warning", "warning", "error"]


def test_the_artifact_question() -> None:
    assert restorable_left(artifacts_exist=True, session_storage_exists=False)
    assert restorable_left(artifacts_exist=False, session_storage_exists=True)
    assert not restorable_left(artifacts_exist=False, session_storage_exists=False)


def _rec(state: State, trash_after: datetime | None, version: int = 3) -> RecordView:
    return RecordView(state, trash_after, version)


@pytest.mark.parametrize(("record", "version", "action"), [
    (None, 3, ArchivedCloneAction.ADOPT),  # the pipeline never saw the archive
    (_rec(State.DONE, None), 5, ArchivedCloneAction.ADOPT),  # archived again, event in flight
    (_rec(State.TRASHED, T + timedelta(hours=1)), 3, ArchivedCloneAction.LEAVE),  # inside its window
    (_rec(State.HELD, T - timedelta(seconds=1)), 3, ArchivedCloneAction.REAP),  # its deadline passed
    (_rec(State.EXHAUSTED, T), 3, ArchivedCloneAction.REAP),
    (_rec(State.DONE, None), 3, ArchivedCloneAction.REAP),  # nothing was kept, and a clone is back
    (_rec(State.RESTORING, None), 3, ArchivedCloneAction.LEAVE),
    (_rec(State.CANCELLED, None), 3, ArchivedCloneAction.LEAVE),
    (_rec(State.KEPT, None), 3, ArchivedCloneAction.LEAVE),
])
def test_the_stale_reap_never_takes_a_window(record: RecordView | None, version: int,
                                             action: ArchivedCloneAction) -> None:
    assert archived_clone_action(record, session_version=version, now=T) is action


def test_the_report_window_is_25_hours_before_the_run_started() -> None:
    late_start = T + timedelta(minutes=47)
    assert report_since(late_start) == late_start - timedelta(hours=25)


def test_the_report_line() -> None:
    level, message = report_line([])
    assert level == "info" and "no clone" in message
    level, message = report_line([Defusal(12, 30), Defusal(7, 4), Defusal(12, 2)])
    assert level == "warning"
    assert "2 session(s)" in message and "36 tracked-file deletion(s)" in message and "sessions 7, 12" in message
