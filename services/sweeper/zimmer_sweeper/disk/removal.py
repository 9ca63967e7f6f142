"""AtomicCloneRemoval (seed 003, "Both clone sweeps reap deletion tombstones"): a directory is
renamed to a sibling `<name>.deleting-<hex>` tombstone and only then deleted, so an interrupted
delete (a kill -9, a deploy, a full disk) leaves either the whole tree at its path or nothing there:
never a half-tree wearing the clone's name (#412). What an interrupt between the rename and the
delete leaves is the tombstone, which the next sweep's `reap_tombstones` takes.

Every removal is logged with its path and mtime before the bytes go. The delete runs in a thread,
off the event loop (an rm -rf of a working tree takes seconds). There is no in-place fallback: a
rename that fails leaves the tree whole and raises, because deleting in place is exactly what makes
the mangled trees this exists to prevent.

This is the bare mechanism. A clone that a session could own goes through the guard
(`zimmer_sweeper.clones.guard.CloneReaper.remove_clone`); only a directory the caller itself just
created or owns, and the tombstones, come here directly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from zimmer_common.logs import kv
from zimmer_sweeper.disk.domain import REAP_LIMIT, is_tombstone, tombstone_name
from zimmer_sweeper.disk.volumes import mtime_of

log = logging.getLogger("zimmer.sweeper.removal")


@dataclass(frozen=True)
class Removal:
    path: str
    mtime: datetime
    tombstone: str
    # The rename happened but the delete did not finish (an entry it could not remove): the path
    # is free all the same, and the next tombstone reap takes what is left.
    tombstone_left: bool = False


@dataclass(frozen=True)
class TombstoneReap:
    reaped: int  # tombstones deleted whole
    failed: int  # tombstones a delete could not finish (still there; the next run tries again)
    left: int  # tombstones past the limit, for the next run


async def remove_atomically(path: Path, *, job: str) -> Removal | None:
    """Rename `path` to a tombstone, then delete the tombstone. None when nothing is at `path`
    (already gone, or another remover got there first). Raises OSError when the rename fails; the
    tree is then untouched."""
    return await asyncio.to_thread(_remove, Path(path), job)


async def reap_tombstones(base: Path, *, job: str, limit: int = REAP_LIMIT) -> TombstoneReap:
    """Delete up to `limit` tombstones directly under `base`, oldest first, with no age bar: a
    tombstone is doomed the moment it is made, and racing a delete still in flight is harmless
    (both unlink the same doomed tree). Raises OSError when `base` cannot be listed."""
    return await asyncio.to_thread(_reap, Path(base), job, limit)


def _remove(path: Path, job: str) -> Removal | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    tomb = path.with_name(tombstone_name(path.name, secrets.token_hex(8)))
    mtime = mtime_of(st)
    log.info("removing directory", extra=kv(path=str(path), mtime=mtime.isoformat(), tombstone=tomb.name, job=job))
    try:
        os.rename(path, tomb)
    except FileNotFoundError:
        return None
    left = not _delete(tomb, job)
    return Removal(str(path), mtime, str(tomb), tombstone_left=left)


def _reap(base: Path, job: str, limit: int) -> TombstoneReap:
    tombs = []
    with os.scandir(base) as it:
        for entry in it:
            if is_tombstone(entry.name):
                try:
                    tombs.append((mtime_of(entry.stat(follow_symlinks=False)), entry.name))
                except FileNotFoundError:
                    continue
    tombs.sort()
    reaped = failed = 0
    for mtime, name in tombs[:limit]:
        path = base / name
        log.info("reaping tombstone", extra=kv(path=str(path), mtime=mtime.isoformat(), job=job))
        if _delete(path, job):
            reaped += 1
        else:
            failed += 1
    return TombstoneReap(reaped, failed, max(0, len(tombs) - limit))


def _delete(path: Path, job: str) -> bool:
    """Delete a tombstone (a tree, or a lone file or symlink); True when nothing is left of it."""
    problems: list[str] = []

    def on_error(func: Any, failed: str, exc_info: tuple[type[BaseException], BaseException, TracebackType]) -> None:
        exc = exc_info[1]
        if isinstance(exc, FileNotFoundError):
            return  # another remover took it first
        if isinstance(exc, PermissionError) and _make_writable(os.path.dirname(failed), failed):
            try:  # a read-only directory (a Go module cache, say) refuses unlinks inside it
                func(failed)
                return
            except FileNotFoundError:
                return
            except OSError as again:
                exc = again
        problems.append(f"{failed}: {exc!r}")

    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path, onerror=on_error)
    except OSError as exc:
        problems.append(f"{path}: {exc!r}")
    if problems:
        log.warning("tombstone not deleted whole; the next reap tries again",
                    extra=kv(tombstone=str(path), job=job, problems=problems[:5], count=len(problems)))
    return not problems and not path.exists()


def _make_writable(*paths: str) -> bool:
    """Give the owner rwx on each directory among `paths`; True if any changed."""
    changed = False
    for p in paths:
        try:
            mode = os.lstat(p).st_mode
            if stat.S_ISDIR(mode):
                os.chmod(p, stat.S_IMODE(mode) | stat.S_IRWXU)
                changed = True
        except OSError:
            continue
    return changed
