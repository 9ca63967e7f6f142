"""The filesystem half of the transcript sweep: reading what exists (the clones base, directories
whose names collide with a class's), walking the transcripts root into verdicts, the newest mtime
inside a directory, and removing one. Blocking calls; the async callers run them in a thread."""

from __future__ import annotations

import logging
import math
import os
import posixpath
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from zimmer_common.logs import kv
from zimmer_sweeper.disk.domain import TOMBSTONE_MARK, is_tombstone
from zimmer_sweeper.transcripts.domain import (
    COLLIDING,
    EPHEMERAL,
    GONE_CLONE,
    LIVE,
    UNATTRIBUTED,
    Candidate,
    Liveness,
    collision_step,
)

log = logging.getLogger("zimmer.sweeper.transcripts")

# The collision search only lists directories on the way to a class root's namespace; this bounds
# it on a pathological tree all the same.
COLLISION_LISTINGS_MAX = 200


def clone_working_dirs(bases: Iterable[str]) -> list[str]:
    """Every entry under each spelling of the clones base, as a working directory that still
    exists (tombstones are doomed trees, not working directories). Raises OSError when a base
    cannot be listed: liveness is then unknown and the caller aborts."""
    out = []
    for base in bases:
        prefix = base.rstrip("/") + "/"
        with os.scandir(base) as it:
            out.extend(prefix + e.name for e in it if TOMBSTONE_MARK not in e.name or not is_tombstone(e.name))
    return out


def colliding_dirs(roots: list[str]) -> list[str]:
    """Existing paths, outside every class root, whose transcript names fall in a root's namespace
    (`…/.zimmer/clones_old` next to `…/.zimmer/clones`). Searched from `/` along the names that
    lead there only. A directory on the way that cannot be listed is itself reported: what it
    holds is unknown, so everything it could name is kept."""
    found: list[str] = []
    frontier = ["/"]
    listings = 0
    while frontier and listings < COLLISION_LISTINGS_MAX:
        parent = frontier.pop()
        listings += 1
        try:
            with os.scandir(parent) as it:
                entries = [(posixpath.join(parent, e.name), e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            if parent != "/":
                found.append(parent)
            continue
        for path, is_dir in entries:
            step = collision_step(path, roots)
            if step == "collides":
                found.append(path)
            elif step == "descend" and is_dir:
                frontier.append(path)
    if frontier:  # the bound cut the search short: what it did not read is unknown
        found.extend(frontier)
    return found


def newest_mtime(path: str, stop_at: float = math.inf) -> float | None:
    """The newest mtime of any file in the directory, at any depth (Claude Code appends to one
    <session>.jsonl for a session's life, and an append never moves a directory's mtime; a
    subagent writes its own file under <session>/subagents/). A directory's own mtime counts only
    when it holds nothing: it moves when an entry is added or removed, and an added file carries
    its own. Stops as soon as one reaches `stop_at` (the directory is young either way). None when
    the directory is gone; +inf when part of it cannot be read (its files' ages are unknown, so it
    is kept). Subdirectories are found without following symlinks. This is the sweep's hot loop
    (a stat a file on top of the listing a bare walk does): kept to that."""
    newest = -math.inf
    pending = [path]
    while pending and newest < stop_at:
        here = pending.pop()
        empty = True
        try:
            it = _scandir(here)
        except FileNotFoundError:
            if here == path:
                return None
            continue
        except OSError:
            return math.inf
        with it:
            for entry in it:
                empty = False
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                    continue
                try:
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                except FileNotFoundError:
                    continue
                except OSError:
                    return math.inf
                if mtime > newest:
                    newest = mtime
        if empty:
            try:
                newest = max(newest, os.lstat(here).st_mtime)
            except FileNotFoundError:
                if here == path:
                    return None
            except OSError:
                return math.inf
    return newest


_scandir = os.scandir


_COUNTED = {LIVE: "live", COLLIDING: "unknown", UNATTRIBUTED: "unknown", GONE_CLONE: "orphaned_gone_clone",
            EPHEMERAL: "orphaned_ephemeral"}


@dataclass
class RootReading:
    """The transcripts root, classified: how many of each verdict, and the orphans with the age
    of their newest file."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("examined", "live", "orphaned_gone_clone", "orphaned_ephemeral", "unknown", "not_directory"), 0))
    candidates: list[Candidate] = field(default_factory=list)


def classify_root(root: str, liveness: Liveness, cutoff: float) -> RootReading:
    """List the transcripts root once and judge every directory in it; the newest mtime is read
    only for names the classification says could be orphaned. Raises OSError when the root cannot
    be listed."""
    reading = RootReading()
    counts, candidates = reading.counts, reading.candidates
    classify = liveness.classify
    with os.scandir(root) as it:
        for entry in it:
            if not entry.is_dir(follow_symlinks=False):
                counts["not_directory"] += 1  # never followed, never deleted
                continue
            counts["examined"] += 1
            verdict = classify(entry.name)
            counts[_COUNTED[verdict]] += 1
            if verdict.kind == "orphaned":
                newest = newest_mtime(entry.path, cutoff)
                if newest is not None:
                    candidates.append(Candidate(entry.name, verdict.basis, newest))
    return reading


def moment(ts: float | None) -> str | None:
    """A newest mtime for a log line."""
    return None if ts is None or math.isinf(ts) else datetime.fromtimestamp(ts, UTC).isoformat()


def remove_transcript_dir(root: str, name: str, newest: float | None, *, job: str) -> str | None:
    """Delete one transcript directory directly under the root, logged with its path and newest
    mtime before the bytes go. None when it is gone (or was already); otherwise what stopped it."""
    path = posixpath.join(root, name)
    if posixpath.dirname(path) != root or name in ("", ".", ".."):
        return f"{name!r} is not a directory directly under {root}"
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            return None if not os.path.lexists(path) else "not a directory (never followed)"
    except OSError as exc:
        return repr(exc)
    log.info("removing transcript directory", extra=kv(
        path=path, newest_mtime=moment(newest), job=job))
    problems: list[str] = []

    def failed(_fn: object, where: str, exc: tuple[type, BaseException, object]) -> None:
        if not isinstance(exc[1], FileNotFoundError):  # gone already is what was wanted
            problems.append(f"{where}: {exc[1]!r}")

    shutil.rmtree(path, onerror=failed)
    if problems:
        log.warning("transcript directory not fully removed; the next run tries again",
                    extra=kv(path=path, job=job, problems=problems[:5], more=max(0, len(problems) - 5)))
        return problems[0]
    return None
