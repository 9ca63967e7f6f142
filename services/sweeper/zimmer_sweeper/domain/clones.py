"""The disk sweeps' rules (seed 003, "A deleted session takes its directories with it" through
"A clone is only deleted if nobody live still owns it"): tombstone names, which directories under
the clones base are orphan candidates, which scratch and attachment directories are, and the fence
saying whether this deployment may delete under a root at all. Plain functions of their arguments:
the listing, the questions to spot-gate and the deletions are the callers'.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Final

from zimmer_common.settings import Environment

# ---- tombstones ------------------------------------------------------------------------------
# A removal renames the tree to a sibling `<name>.deleting-<hex>` and then deletes that: an
# interrupted delete leaves the whole tree at its path or nothing there, never a half-tree wearing
# the clone's name (#412). What an interrupt between the two leaves is the tombstone, doomed from
# the moment it is made: never a candidate, always reaped, with no age bar.
TOMBSTONE_MARK: Final = ".deleting-"
_TOMBSTONE = re.compile(r".+\.deleting-[0-9a-f]{8,64}", re.DOTALL)
REAP_LIMIT: Final = 50  # tombstones one pass deletes; the rest go to the next run

# ---- the orphan clone sweep ------------------------------------------------------------------
AGE_THRESHOLD: Final = timedelta(hours=48)  # the scheduled sweep's bar: patient
BATCH_LIMIT: Final = 20
# Under disk pressure only the age bar drops: it covers the startup race where a clone exists but
# its session has not stored clone_path yet (at most GIT_CLONE_TIMEOUT 300 s plus bounded retries,
# under ten minutes), with more than an order of magnitude to spare.
PRESSURE_AGE_THRESHOLD: Final = timedelta(hours=2)
PRESSURE_BATCH_LIMIT: Final = 20
SWEEP_BUDGET_SECONDS: Final = 300.0  # the maintenance lane's scheduled sweeps yield after this
RECLAIM_BUDGET_SECONDS: Final = 60.0  # reclaim runs on the launch path: bounded in time, not just count

# ---- the scratch and attachment orphan sweep -------------------------------------------------
# Named like a session id: excludes temp_<uuid> pre-session upload dirs and anything too long for
# a bigint. fullmatch, so a trailing newline cannot sneak past an end anchor.
SESSION_ID_DIR: Final = re.compile(r"[1-9]\d{0,17}")
ORPHAN_AGE_THRESHOLD: Final = timedelta(hours=1)  # a dir made before its row committed survives
ORPHAN_SWEEP_LIMIT: Final = 200  # per root and run: one run's blast radius


def tombstone_name(name: str, token: str) -> str:
    """The sibling a removal renames `name` to; `token` is random hex (8 to 64 digits)."""
    tomb = f"{name}{TOMBSTONE_MARK}{token}"
    if not is_tombstone(tomb):
        raise ValueError(f"tombstone token must be 8-64 lower-case hex digits, not {token!r}")
    return tomb


def is_tombstone(name: str) -> bool:
    return _TOMBSTONE.fullmatch(name) is not None


@dataclass(frozen=True)
class DirEntry:
    """One entry of a listed root, as read from the filesystem (lstat: a symlink is not a directory)."""

    name: str
    path: str
    mtime: datetime
    is_dir: bool


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


# ---- the fence: only the deployment that owns the volume --------------------------------------
OWNING_ENVIRONMENTS: Final = frozenset({Environment.PRODUCTION, Environment.STAGING})


@dataclass(frozen=True)
class Fence:
    sweepable: bool
    sentence: str


def fence(root: str | None, *, durable_volume: str, env: Environment) -> Fence:
    """May this deployment delete under `root`? Both paths already resolved (absolute, symlinks
    followed). A root inside the durable volume, or holding it, is swept only in production and
    staging: anywhere else (tests, a developer's machine beside a real deployment) the connected
    database does not describe that volume, and every live directory on it would read as an orphan.
    A root relocated clear of the volume is swept in any environment. The fence is on the path, not
    on whether some setting happens to be set: scratch and attachments have no remote to come back
    from."""
    if root is None:
        return Fence(False, "not configured on this host: nothing under it is swept")
    r, v = PurePosixPath(root), PurePosixPath(durable_volume)
    overlaps = r == v or v in r.parents or r in v.parents
    if not overlaps:
        return Fence(True, f"{root} is clear of the durable volume {durable_volume}: swept in any environment")
    if env in OWNING_ENVIRONMENTS:
        return Fence(True, f"{root} is on the durable volume {durable_volume}, which this {env.value} "
                           "deployment owns")
    return Fence(False, f"{root} is on the durable volume {durable_volume}, which only production and staging "
                        f"sweep: this {env.value} deployment's database does not describe it")
