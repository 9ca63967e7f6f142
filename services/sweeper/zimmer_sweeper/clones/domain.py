"""The clone sweeps' rules (seed 003, "A deleted session takes its directories with it" through
"A clone is only deleted if nobody live still owns it"): which directories under the clones base
are orphan candidates, and which scratch and attachment directories are. Tombstone names, listed
entries and the fence are every disk sweep's (`zimmer_sweeper.disk.domain`). Plain functions of
their arguments: the listing, the questions to spot-gate and the deletions are the callers'.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from zimmer_sweeper.disk.domain import DirEntry, is_tombstone

# ---- the orphan clone sweep ------------------------------------------------------------------
AGE_THRESHOLD: Final = timedelta(hours=48)  # the scheduled sweep's bar: patient
BATCH_LIMIT: Final = 20
# Under disk pressure only the age bar drops: it covers the startup race where a clone exists but
# its session has not stored clone_path yet (at most GIT_CLONE_TIMEOUT 300 s plus bounded retries,
# under ten minutes), with more than an order of magnitude to spare.
PRESSURE_AGE_THRESHOLD: Final = timedelta(hours=2)
PRESSURE_BATCH_LIMIT: Final = 20
RECLAIM_BUDGET_SECONDS: Final = 60.0  # reclaim runs on the launch path: bounded in time, not just count

# ---- the scratch and attachment orphan sweep -------------------------------------------------
# Named like a session id: excludes temp_<uuid> pre-session upload dirs and anything too long for
# a bigint. fullmatch, so a trailing newline cannot sneak past an end anchor.
SESSION_ID_DIR: Final = re.compile(r"[1-9]\d{0,17}")
ORPHAN_AGE_THRESHOLD: Final = timedelta(hours=1)  # a dir made before its row committed survives
ORPHAN_SWEEP_LIMIT: Final = 200  # per root and run: one run's blast radius


def _oldest_first(entries: Iterable[DirEntry]) -> list[DirEntry]:
    return sorted(entries, key=lambda e: (e.mtime, e.name))


def aged_clone_directories(entries: Iterable[DirEntry], *, now: datetime, age_bar: timedelta) -> list[DirEntry]:
    """Directories under the clones base older than the bar, oldest first. Tombstones are never
    among them (they are reaped, not weighed), nor anything that is not a real directory."""
    return _oldest_first(e for e in entries
                         if e.is_dir and not is_tombstone(e.name) and now - e.mtime >= age_bar)


@dataclass
class OrphanChoice:
    candidates: list[DirEntry] = field(default_factory=list)  # oldest first, at most the limit
    tracked: list[DirEntry] = field(default_factory=list)  # a session's clone_path names it (any status)
    live: list[DirEntry] = field(default_factory=list)  # a live session's clone is at this path
    unanswered: list[DirEntry] = field(default_factory=list)  # no ownership answer: kept (fail closed)
    over_limit: list[DirEntry] = field(default_factory=list)  # orphans past the limit: the next run's


def choose_orphans(aged: Iterable[DirEntry], *, tracked: Mapping[str, bool], live_clone_paths: Iterable[str],
                   limit: int) -> OrphanChoice:
    """Which aged directories may go: only one no session row names at all, by basename, whatever
    that session's status (`tracked`: basename → whether any row tracks it; a basename missing from
    it was not answered and is kept), and never one a live session's clone path points at (by path
    or basename: a second check that does not depend on age). Oldest first, `limit` of them."""
    live = set()
    for p in live_clone_paths:
        live.add(p)
        live.add(posixpath.basename(p.rstrip("/")))
    choice = OrphanChoice()
    for entry in _oldest_first(aged):
        if entry.path in live or entry.name in live:
            choice.live.append(entry)
        elif entry.name not in tracked:
            choice.unanswered.append(entry)
        elif tracked[entry.name]:
            choice.tracked.append(entry)
        elif len(choice.candidates) < limit:
            choice.candidates.append(entry)
        else:
            choice.over_limit.append(entry)
    return choice


def session_id_of(name: str) -> int | None:
    """The session id a scratch or attachment directory is named after, or None if it is not one."""
    return int(name) if SESSION_ID_DIR.fullmatch(name) else None


def session_directory_candidates(entries: Iterable[DirEntry], *, now: datetime) -> list[tuple[int, DirEntry]]:
    """Directories named like a session id and older than ORPHAN_AGE_THRESHOLD, oldest first: the
    ones whose ids to ask spot-gate about."""
    out = []
    for entry in _oldest_first(entries):
        sid = session_id_of(entry.name)
        if sid is not None and entry.is_dir and now - entry.mtime >= ORPHAN_AGE_THRESHOLD:
            out.append((sid, entry))
    return out


@dataclass
class SessionDirChoice:
    orphans: list[tuple[int, DirEntry]]  # this run's, oldest first
    overflow: int  # orphans past ORPHAN_SWEEP_LIMIT: logged, picked up next hour


def orphan_session_directories(candidates: Iterable[tuple[int, DirEntry]], existing: Iterable[int],
                               limit: int = ORPHAN_SWEEP_LIMIT) -> SessionDirChoice:
    """The candidates whose id spot-gate said has no row: an orphan is a set difference, and a
    directory goes only when the answer said that id is gone."""
    alive = set(existing)
    orphans = [(sid, e) for sid, e in candidates if sid not in alive]
    return SessionDirChoice(orphans[:limit], max(0, len(orphans) - limit))
