"""Transcript directories (seed 003, "The transcript directory outlives the clone" and
"Classification is forward-only, and uncertainty keeps"): how a working directory names its
transcript directory, which names are live, orphaned or unknown, which orphans a run takes, and the
fence on the volume they are deleted from. Plain functions of their arguments: listing the roots,
asking spot-gate and deleting are the callers'.

Claude Code writes a session's transcript under `~/.claude/projects/<name>`, the name a one-way
function of the cwd (`/`, `.` and `_` all become `-`, so `.zimmer` renders as `--zimmer`). Once a
clone is gone nothing can derive its name back, so classification goes forward: every working
directory that still exists (or that a reap-protected session claims) is run through the
derivation, and a name is

- live when a live name is the name itself or a `-`-boundary prefix of it: an agent root with a
  subdirectory runs in `<clone>/<subdir>`, so a live clone claims its own name and every name
  extending it by `-…` (matching on equality alone deletes a running session's transcript);
- orphaned when it is positively attributable to a clone that is gone (it extends the clones
  base's own name and no live name claims it), or to an ephemeral cwd (`/tmp`, reaped by a
  container restart, on the age of its newest file alone);
- unknown otherwise, and kept: `-rails`, the app root inside the container, is live.

Because the derivation collapses three characters into one, a name in a class's namespace may also
come from a different existing directory (`clones_old/x` and `clones/old-x` both give
`…-clones-old-x`): the names such a colliding directory could produce are unknown, not orphaned.

Live names are tested by set lookups of a name's `-`-boundary prefixes, only at lengths some live
name has: classifying 100,000 names against 10,000 clones costs a few lookups per name, not a scan
of every clone per name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Final, Literal, NamedTuple

from zimmer_common.settings import Environment
from zimmer_sweeper.disk.domain import Fence, fence

AGE_THRESHOLD: Final = timedelta(hours=24)  # against the newest mtime inside the directory
BATCH_LIMIT: Final = 1_000  # directories one run deletes; the rest are the next run's
EPHEMERAL_ROOTS: Final = ("/tmp",)
# A person's own Claude Code home: outside a deployment, ~/.claude/projects is their history.
CLAUDE_HOME: Final = "~/.claude"

_UNNORMAL_ENDS = ("/", "/.", "/..")

Kind = Literal["live", "orphaned", "unknown"]
Basis = Literal["claimed", "gone_clone", "ephemeral", "colliding", "unattributed"]


def transcript_name(cwd: str) -> str:
    """The transcript directory Claude Code derives from a working directory."""
    if "//" in cwd or "/./" in cwd or "/../" in cwd or cwd.endswith(_UNNORMAL_ENDS) or not cwd.startswith("/"):
        cwd = posixpath.normpath(cwd)  # only then: normpath is most of the cost of a name
    # Three replaces: str.translate looks every character up in a mapping, ~20x slower here.
    return cwd.replace("/", "-").replace(".", "-").replace("_", "-")


@dataclass(frozen=True, eq=False)  # the five below are the only ones: compared and hashed by identity, in C
class Verdict:
    kind: Kind
    basis: Basis


LIVE: Final = Verdict("live", "claimed")
GONE_CLONE: Final = Verdict("orphaned", "gone_clone")
EPHEMERAL: Final = Verdict("orphaned", "ephemeral")
COLLIDING: Final = Verdict("unknown", "colliding")
UNATTRIBUTED: Final = Verdict("unknown", "unattributed")


class NameSet:
    """Names, each claiming itself and every name extending it by `-…`."""

    __slots__ = ("names", "shortest", "longest")

    def __init__(self, names: Iterable[str]):
        self.names = frozenset(n for n in names if n)
        self.shortest = min(map(len, self.names), default=0)
        self.longest = max(map(len, self.names), default=-1)

    def __len__(self) -> int:
        return len(self.names)

    def claims(self, name: str) -> bool:
        return _claims(self.names, self.shortest, self.longest, name)


def _claims(names: frozenset[str], shortest: int, longest: int, name: str) -> bool:
    if name in names:
        return True
    # Only a `-` at an index some claimed name is long enough to end at can end a claim.
    i = name.find("-", shortest)
    while 0 <= i <= longest:
        if name[:i] in names:
            return True
        i = name.find("-", i + 1)
    return False


class Liveness:
    """What a classification is judged against, built from one snapshot of the filesystem and
    spot-gate. `clone_prefixes` and `ephemeral_prefixes` are the two orphan classes' namespaces (a
    clones base may be listed both as configured and with its symlinks followed: the cwd Claude
    Code saw may be either); `colliding` are other existing directories whose names fall in a
    class's namespace. `classify` is one closure over all of it: the sweep calls it for every
    directory on the box."""

    def __init__(self, live: NameSet, clone_prefixes: tuple[str, ...], ephemeral_prefixes: tuple[str, ...],
                 colliding: NameSet | None = None):
        self.live = live
        self.clone_prefixes = clone_prefixes
        self.ephemeral_prefixes = ephemeral_prefixes
        self.colliding = colliding or NameSet(())
        live_names, lo, hi = live.names, live.shortest, live.longest
        other = self.colliding
        other_names, other_lo, other_hi = other.names, other.shortest, other.longest

        def classify(name: str) -> Verdict:
            if name in live_names:
                return LIVE
            i = name.find("-", lo)
            while 0 <= i <= hi:
                if name[:i] in live_names:
                    return LIVE
                i = name.find("-", i + 1)
            if other_names and _claims(other_names, other_lo, other_hi, name):
                return COLLIDING
            if name.startswith(clone_prefixes):
                return GONE_CLONE
            if name.startswith(ephemeral_prefixes):
                return EPHEMERAL
            return UNATTRIBUTED

        self.classify = classify


def class_prefix(root: str) -> str:
    """The prefix of every name a path strictly under `root` produces."""
    return transcript_name(root) + "-"


def liveness(working_dirs: Iterable[str], *, clone_bases: Iterable[str],
             ephemeral_roots: Iterable[str] = EPHEMERAL_ROOTS, colliding: Iterable[str] = ()) -> Liveness:
    """`working_dirs`: every working directory that still exists or that a live or reap-protected
    session claims (absolute paths; anything else is ignored)."""
    return Liveness(
        live=NameSet(transcript_name(p) for p in working_dirs if p.startswith("/")),
        clone_prefixes=tuple(sorted({class_prefix(b) for b in clone_bases})),
        ephemeral_prefixes=tuple(sorted({class_prefix(r) for r in ephemeral_roots})),
        colliding=NameSet(transcript_name(p) for p in colliding))


def collision_step(path: str, roots: Iterable[str]) -> Literal["collides", "descend", "clear"]:
    """For an existing directory met while searching for collisions with the class roots: does it
    produce names in a root's namespace (`collides`), might something under it (`descend`), or
    neither? A root itself, and anything under one, is the class, not a collision."""
    name = transcript_name(path)
    verdict: Literal["collides", "descend", "clear"] = "clear"
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            continue  # in this root's own class (it may still lead to another root's)
        prefix = class_prefix(root)
        if name.startswith(prefix):
            return "collides"
        if prefix.startswith(name + "-"):
            verdict = "descend"
    return verdict


# ---- choosing what a run deletes --------------------------------------------------------------


class Candidate(NamedTuple):  # a tuple: a run makes one for every orphan on the box
    name: str
    basis: Basis  # gone_clone or ephemeral
    newest: float  # the newest mtime inside the directory, unix seconds (+inf: unreadable, so young)


@dataclass
class Selection:
    due: list[Candidate] = field(default_factory=list)  # oldest first, at most the limit
    too_young: list[Candidate] = field(default_factory=list)  # inside the age bar: kept
    deferred: list[Candidate] = field(default_factory=list)  # due, past the limit: the next run's


def select(candidates: Iterable[Candidate], *, now: datetime, age_bar: timedelta = AGE_THRESHOLD,
           limit: int = BATCH_LIMIT) -> Selection:
    """Orphans whose newest file is older than the bar, oldest first, `limit` of them."""
    out = Selection()
    old = []
    cutoff = (now - age_bar).timestamp()
    for c in candidates:
        (old if c.newest <= cutoff else out.too_young).append(c)
    old.sort(key=lambda c: (c.newest, c.name))
    out.due, out.deferred = old[:limit], old[limit:]
    return out


def extensions_of(clone_name: str, names: Iterable[str]) -> list[str]:
    """A clone's transcript directory and every `-<subdir>` extension of it among `names`."""
    return [n for n in names if n == clone_name or n.startswith(clone_name + "-")]


# ---- the fences --------------------------------------------------------------------------------


def transcript_root_fence(root: str | None, *, durable_volume: str, claude_home: str, env: Environment) -> Fence:
    """May this deployment delete under the transcripts root? Asked separately from the clones
    base's fence because the two volumes move independently (the clones base can be relocated,
    nothing relocates ~/.claude/projects): a root on the durable volume or in a Claude Code home is
    deleted from only by production and staging, whose volume it is; outside a deployment it is a
    person's own history. All paths already resolved."""
    for volume in (durable_volume, claude_home):
        verdict = fence(root, durable_volume=volume, env=env)
        if not verdict.sweepable:
            return verdict
    assert root is not None
    if _overlaps(root, durable_volume) or _overlaps(root, claude_home):
        return Fence(True, f"{root} is the transcripts volume of this {env.value} deployment")
    return Fence(True, f"{root} is clear of the durable volume and of {claude_home}: swept in any environment")


def _overlaps(a: str, b: str) -> bool:
    pa, pb = PurePosixPath(a), PurePosixPath(b)
    return pa == pb or pb in pa.parents or pa in pb.parents
