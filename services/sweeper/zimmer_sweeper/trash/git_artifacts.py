"""The trash pipeline's git work (the seed's CloneArtifactService): is a clone dirty, preserve it as a
bundle and a filtered patch, and rebuild a clone from them on unarchive.

Every git command runs under `run_bounded` at GIT_TIMEOUT_SECONDS with its whole process group
killed on the deadline, so git's helpers (an fsmonitor hook, a credential helper) die with it.
A killed git reads dirty, never clean: clean is what authorizes deleting the clone, and a timeout is
exactly when nothing is known about what it holds. Having spent the deadline on a wedged git, the
same clone's next command in the run declines at once (`GitTimedOut`) instead of spending it again.

Artifacts live in `<artifacts_dir>/<session id>/`: `repo.bundle` (`git bundle create --all`: every
branch, tag, remote-tracking ref and stash), `working-tree.patch` (`git diff --binary` of the whole
working tree, untracked files included, scaffolding excluded), `git-config` (remotes and upstreams
come back with it) and `manifest.json`, written last. Each file is written beside its name and
renamed into place, so an attempt cut short never leaves a truncated file that looks preserved.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from zimmer_common.bounded import BoundedResult, run_bounded
from zimmer_sweeper.trash.domain import SCAFFOLDING_PATHSPECS, Finding, TreeChanges, tree_changes

BUNDLE = "repo.bundle"
PATCH = "working-tree.patch"
CONFIG = "git-config"
MANIFEST = "manifest.json"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's well-known empty tree object


class GitTimedOut(Exception):
    """A git command was killed at the bound, or declined because an earlier one on this clone was."""


class GitFailed(Exception):
    """A git command exited with a failure (the attempt fails and is retried)."""


class Git:
    """One clone's git commands within one run. `wedged` is set by the first timeout and makes every
    later command decline without starting git."""

    def __init__(self, cwd: Path, *, timeout: float, binary: str = "git"):
        self.cwd = cwd
        self.timeout = timeout
        self.binary = binary
        self.wedged = False
        self.started = 0  # git processes this run started (a declined call starts none)

    async def run(self, *args: str, index_file: Path | None = None, ok_codes: tuple[int, ...] = (0,)) -> BoundedResult:
        if self.wedged:
            raise GitTimedOut(f"git {args[0]} declined: an earlier git command on {self.cwd} timed out")
        # GIT_CEILING_DIRECTORIES: a clone whose .git is broken or empty must fail, never make git
        # walk up and answer for whatever repository happens to hold the clones base.
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C",
                   GIT_CEILING_DIRECTORIES=str(self.cwd.parent))
        if index_file is not None:
            env["GIT_INDEX_FILE"] = str(index_file)
        self.started += 1
        result = await run_bounded([self.binary, *args], timeout=self.timeout, cwd=self.cwd, env=env)
        if result.timed_out:
            self.wedged = True
            raise GitTimedOut(f"git {args[0]} in {self.cwd} {result.describe()}")
        if result.returncode not in ok_codes:
            raise GitFailed(f"git {' '.join(args[:3])} in {self.cwd} {result.describe()}: {result.stderr.strip()[:500]}")
        return result


def is_repository(clone: Path) -> bool:
    return (clone / ".git").exists()


async def dirty_check(git: Git) -> Finding:
    """Dirty: changes in the working tree (untracked files included, scaffolding not), or commits
    that no remote-tracking ref holds (unpushed work is work too).
    A timeout is UNKNOWN, which the pipeline preserves exactly like DIRTY."""
    try:
        status = await git.run("status", "--porcelain=v1", "--untracked-files=all", "--", ".",
                               *SCAFFOLDING_PATHSPECS)
        if status.stdout:
            return Finding.DIRTY
        # --all: branches, tags, the stash and a detached HEAD; anything no remote-tracking ref reaches.
        unpushed = await git.run("rev-list", "-n1", "--all", "--not", "--remotes")
    except GitTimedOut:
        return Finding.UNKNOWN
    return Finding.DIRTY if unpushed.stdout.strip() else Finding.CLEAN


@dataclass(frozen=True)
class Manifest:
    head: str | None  # the commit checked out, None on an unborn branch
    head_ref: str | None  # refs/heads/<branch>, None when detached
    bundle: bool
    patch: bool
    dropped_deletions: int  # the mangled guard's: a tree of only deletions was not preserved
    preserved_at: str
    clone_path: str


@dataclass(frozen=True)
class Preserved:
    manifest: Manifest
    changes: TreeChanges
    bytes: int

    @property
    def mangled(self) -> bool:
        return self.manifest.dropped_deletions > 0


async def preserve(git: Git, dest: Path, *, now: datetime) -> Preserved:
    """Write the clone's bundle, its filtered patch (unless the tree is nothing but deletions), its
    git config and the manifest into `dest`. Raises GitTimedOut (hold the clone) or GitFailed."""
    await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
    head = (await git.run("rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=(0, 1))).stdout.strip() or None
    head_ref = (await git.run("symbolic-ref", "-q", "HEAD", ok_codes=(0, 1))).stdout.strip() or None
    if head is not None:
        partial = dest / f"{BUNDLE}.partial"
        await git.run("bundle", "create", "-q", str(partial), "--all")
        await git.run("bundle", "verify", "-q", str(partial))
        os.replace(partial, dest / BUNDLE)
    changes = await _working_tree_patch(git, dest, base=head or EMPTY_TREE)
    patch = changes.total > 0 and not changes.only_deletions
    if not patch:
        (dest / PATCH).unlink(missing_ok=True)  # an earlier attempt's, of a tree now judged otherwise
    config = git.cwd / ".git" / "config"
    if config.is_file():
        await asyncio.to_thread(shutil.copyfile, config, dest / f"{CONFIG}.partial")
        os.replace(dest / f"{CONFIG}.partial", dest / CONFIG)
    manifest = Manifest(head=head, head_ref=head_ref, bundle=head is not None, patch=patch,
                        dropped_deletions=changes.deleted if changes.only_deletions else 0,
                        preserved_at=now.isoformat(), clone_path=str(git.cwd))
    (dest / f"{MANIFEST}.partial").write_text(json.dumps(asdict(manifest), indent=2))
    os.replace(dest / f"{MANIFEST}.partial", dest / MANIFEST)
    return Preserved(manifest, changes, await asyncio.to_thread(directory_bytes, dest))


async def _working_tree_patch(git: Git, dest: Path, *, base: str) -> TreeChanges:
    """Stage the whole working tree into a throwaway index (never the clone's own: a held or restored
    clone keeps its staging as it was), count what it changes, and write the patch unless that is
    only deletions. The patch goes straight to a file: it can be far larger than any output cap."""
    index = dest / "index.partial"
    index.unlink(missing_ok=True)
    try:
        if base == EMPTY_TREE:
            await git.run("read-tree", "--empty", index_file=index)
        else:
            await git.run("read-tree", base, index_file=index)
        await git.run("add", "-A", "--", ".", *SCAFFOLDING_PATHSPECS, index_file=index)
        # One "<letter>\t<path>" line each (git quotes a path with a newline in it); not -z, because
        # the bounded runner strips NULs from what it hands back.
        names = await git.run("diff", "--cached", "--name-status", "--no-renames", base, index_file=index)
        changes = tree_changes(line.split("\t", 1)[0] for line in names.stdout.splitlines() if line)
        if changes.total and not changes.only_deletions:
            partial = dest / f"{PATCH}.partial"
            await git.run("diff", "--cached", "--binary", f"--output={partial}", base, index_file=index)
            os.replace(partial, dest / PATCH)
        return changes
    finally:
        index.unlink(missing_ok=True)


def read_manifest(dest: Path) -> Manifest | None:
    try:
        return Manifest(**json.loads((dest / MANIFEST).read_text()))
    except FileNotFoundError:
        return None


def artifacts_exist(dest: Path | None) -> bool:
    """Anything at all in the session's artifacts directory counts, a partial file included: the
    question decides whether a deadline may be cleared, and keeping a doubtful file four days costs
    only disk."""
    if dest is None:
        return False
    try:
        with os.scandir(dest) as it:
            return any(True for _ in it)
    except (FileNotFoundError, NotADirectoryError):
        return False


def directory_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


async def rebuild_clone(dest: Path, target: Path, manifest: Manifest, *, timeout: float, binary: str = "git") -> str:
    """Build the clone afresh at `target` (a path that must not exist yet) from the bundle, then
    replay the patch; returns a sentence of what came back. Raises GitTimedOut or GitFailed, leaving
    whatever it built at `target` for the caller to discard."""
    await asyncio.to_thread(target.mkdir, parents=True)
    git = Git(target, timeout=timeout, binary=binary)
    await git.run("init", "-q")
    restored = []
    if manifest.bundle:
        # Every ref exactly as it was (remote-tracking refs and the stash too), into an unborn repo:
        # --update-head-ok because HEAD's branch may be among them.
        await git.run("fetch", "-q", "--update-head-ok", str(dest / BUNDLE), "+refs/*:refs/*")
        if manifest.head_ref:
            await git.run("symbolic-ref", "HEAD", manifest.head_ref)
        elif manifest.head:
            await git.run("update-ref", "--no-deref", "HEAD", manifest.head)
        await git.run("reset", "-q", "--hard", "HEAD")
        restored.append(f"the bundle at {manifest.head[:12] if manifest.head else 'its refs'}")
    if (dest / CONFIG).is_file():
        await asyncio.to_thread(shutil.copyfile, dest / CONFIG, target / ".git" / "config")
        restored.append("its git config")
    if manifest.patch:
        await git.run("apply", "--binary", "--whitespace=nowarn", str(dest / PATCH))
        restored.append("the working-tree patch")
    return "restored " + " and ".join(restored) if restored else "restored an empty repository"
