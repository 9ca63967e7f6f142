"""Pure rules about sessions' clones (seed 003 "A clone is only deleted if nobody live still owns
it"): what an asked path may be, what a clone report may say and whether it replaces the stored
clone, and how one ownership answer is assembled from the rows its basename matched.

What a basename is, and what makes a session reap-protected, are SQL (one definition each, in
migrations/0007 and store/clones.py), because the database applies them to every row."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from zimmer_common.contracts.clones import CloneOwnership


def asked_path_problem(path: str) -> str | None:
    """Why an ownership question cannot be asked of `path`, or None. It must be an expanded
    absolute path or a bare basename: a relative path with a directory in it matches neither, and
    the root, `.` and `..` name no clone."""
    if not path.startswith("/") and "/" in path:
        return "is a relative path; give the expanded absolute path or a bare basename"
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name in ("", ".", ".."):
        return "names no directory a clone could be (the root, '.' or '..')"
    return None


def is_bare_basename(path: str) -> bool:
    return "/" not in path


def is_drift(asked: str, stored: str) -> bool:
    """Matched by basename while the stored clone_path is another path (clone_path
    canonicalization drift, seed #671). A bare basename asked is no path to differ from; a
    trailing slash is no difference."""
    return not is_bare_basename(asked) and asked.rstrip("/") != stored.rstrip("/")


@dataclass(frozen=True)
class Match:
    """One session whose clone_path's basename is the asked path's."""

    session_id: int
    clone_path: str
    protected: bool


def ownership(asked: str, basename: str, matches: Iterable[Match]) -> CloneOwnership:
    """Every session matching by path also matches by basename (equal paths have equal basenames),
    so the basename's matches are the whole of `tracked_by`, whatever their status."""
    found = sorted(matches, key=lambda m: m.session_id)
    return CloneOwnership(path=asked, basename=basename, tracked_by=[m.session_id for m in found],
                          protected_by=[m.session_id for m in found if m.protected],
                          drift=[m.session_id for m in found if is_drift(asked, m.clone_path)])


def report_problem(clone_path: str, agent_subdirectory: str | None) -> str | None:
    """Why a clone report cannot be stored, or None: a path the sweepers could never match (not
    absolute, or naming no directory), or an agent root that leaves the clone."""
    if not clone_path.startswith("/"):
        return f"clone_path {clone_path!r} is not an absolute path"
    if asked_path_problem(clone_path):
        return f"clone_path {clone_path!r} names no directory a clone could be"
    if agent_subdirectory and (agent_subdirectory.startswith("/") or ".." in agent_subdirectory.split("/")):
        return f"agent_subdirectory {agent_subdirectory!r} is not a directory inside the clone"
    return None


@dataclass(frozen=True)
class StoredClone:
    clone_path: str | None
    agent_subdirectory: str | None
    scaffolded: bool
    host: str | None
    reported_at: datetime | None


class ReportOutcome(StrEnum):
    RECORDED = "recorded"
    UNCHANGED = "unchanged"  # the same clone again (a redelivery, a repeated report): nothing to write
    STALE = "stale"  # older than the report already stored: a late redelivery never rolls a re-clone back


def judge_report(stored: StoredClone, reported: StoredClone) -> ReportOutcome:
    if None not in (stored.reported_at, reported.reported_at) and \
            reported.reported_at < stored.reported_at:  # type: ignore[operator]  # both reported_at are set on this branch
        return ReportOutcome.STALE
    same = (stored.clone_path, stored.agent_subdirectory, stored.scaffolded, stored.host) == (
        reported.clone_path, reported.agent_subdirectory, reported.scaffolded, reported.host)
    return ReportOutcome.UNCHANGED if same else ReportOutcome.RECORDED
