"""The rules every disk sweep shares (seed 003, "Both clone sweeps reap deletion tombstones" and
"Only the deployment that owns the volume"): tombstone names, an entry of a listed root, the budget
of a scheduled sweep, and the fence saying whether this deployment may delete under a root at all.
Plain functions of their arguments: the listing and the deletions are the callers'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
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

# ---- a scheduled disk sweep ------------------------------------------------------------------
SWEEP_BUDGET_SECONDS: Final = 300.0  # the maintenance lane's scheduled sweeps yield after this


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
