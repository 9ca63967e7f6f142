"""Reading this host's roots: listing one into entries the rules can judge, resolving where a
configured root really is, and how much room its volume has. Blocking filesystem calls; the async
callers run them in a thread."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from zimmer_common.contracts.disk import RootName
from zimmer_common.settings import Environment
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.domain import DirEntry, Fence, fence

# Free bytes on the volume holding a path (what an unprivileged writer may still use). Injectable:
# tests simulate pressure on a real directory by answering from what is left in it.
FreeSpace = Callable[[Path], int]


class VolumeReading(NamedTuple):
    free_bytes: int
    total_bytes: int


def read_volume(path: Path) -> VolumeReading:
    st = os.statvfs(path)
    return VolumeReading(st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize)


def statvfs_free(path: Path) -> int:
    return read_volume(path).free_bytes


def resolve_root(configured: str | None) -> Path | None:
    """A configured root, expanded and with symlinks followed (the fence judges where it really is)."""
    if not configured:
        return None
    return Path(os.path.realpath(os.path.expanduser(configured)))


def mtime_of(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_mtime, UTC)


def list_root(root: Path) -> list[DirEntry]:
    """Every entry directly under `root` (lstat: a symlink is never a directory here). A missing or
    unreadable root raises: the sweep aborts rather than reading it as empty or everything orphaned.
    An entry that vanishes while listed is left out."""
    out = []
    with os.scandir(root) as it:
        for entry in it:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            out.append(DirEntry(entry.name, os.path.join(root, entry.name), mtime_of(st),
                                entry.is_dir(follow_symlinks=False)))
    return out


class Roots:
    """This host's configured roots, resolved, each with its fence (the deployment's environment
    and durable volume decide it; both are fixed for the life of the process)."""

    def __init__(self, disk: DiskSettings, env: Environment):
        self.disk = disk
        self.env = env
        self.durable_volume = resolve_root(disk.durable_volume) or Path("/")

    def path(self, name: RootName) -> Path | None:
        return resolve_root(getattr(self.disk, f"{name}_dir"))

    def fence(self, name: RootName) -> Fence:
        root = self.path(name)
        return fence(str(root) if root else None, durable_volume=str(self.durable_volume), env=self.env)

    def sweepable(self, name: RootName) -> Path | None:
        """The root, if this deployment may delete under it; None otherwise."""
        return self.path(name) if self.fence(name).sweepable else None
