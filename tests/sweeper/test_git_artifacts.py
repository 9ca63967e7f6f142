"""The trash pipeline's git work on real repositories: the dirty check, the bundle and the filtered
patch, the mangled-tree guard, a wedged git killed at its bound with its process group (and the
second call declining at once), and rebuilding a clone from what was preserved."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from trash_repos import TRACKED, add_scaffolding, alive, delete_tracked, git, make_clone, make_dirty, tree_files, wedge  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_sweeper.trash.domain import Finding
from zimmer_sweeper.trash.git_artifacts import (
    BUNDLE,
    MANIFEST,
    PATCH,
    Git,
    GitTimedOut,
    artifacts_exist,
    dirty_check,
    preserve,
    read_manifest,
    rebuild_clone,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.timeout(60)


def _git(clone: Path, timeout: float = 30.0) -> Git:
    return Git(clone, timeout=timeout)


async def test_a_clean_clone_with_only_scaffolding_is_clean(tmp_path: Path) -> None:
    clone = make_clone(tmp_path, tmp_path / "clones", "clean")
    add_scaffolding(clone)
    assert await dirty_check(_git(clone)) is Finding.CLEAN


@pytest.mark.parametrize("change", ["modified", "untracked", "unpushed_commit", "stash"])
async def test_any_unpushed_work_is_dirty(tmp_path: Path, change: str) -> None:
    clone = make_clone(tmp_path, tmp_path / "clones", change)
    if change == "modified":
        (clone / "README.md").write_text("changed\n")
    elif change == "untracked":
        (clone / "new.txt").write_text("new\n")
    elif change == "unpushed_commit":
        (clone / "README.md").write_text("committed, not pushed\n")
        git(clone, "commit", "-q", "-am", "local only")
    else:
        (clone / "README.md").write_text("stashed\n")
        git(clone, "stash", "-q")
    assert await dirty_check(_git(clone)) is Finding.DIRTY


async def test_a_dirty_clone_is_preserved_as_a_verifiable_bundle_and_a_patch_that_applies(tmp_path: Path) -> None:
    clone = make_clone(tmp_path, tmp_path / "clones", "dirty")
    make_dirty(clone)
    add_scaffolding(clone)
    dest = tmp_path / "artifacts" / "7"
    preserved = await preserve(_git(clone), dest, now=NOW)
    assert preserved.manifest.bundle and preserved.manifest.patch and not preserved.mangled
    assert sorted(p.name for p in dest.iterdir()) == sorted([BUNDLE, PATCH, MANIFEST, "git-config"])
    git(clone, "bundle", "verify", "-q", str(dest / BUNDLE))  # raises unless it verifies
    patch = (dest / PATCH).read_text(errors="replace")
    assert "scratch.txt" in patch and "src/app.py" in patch and "GIT binary patch" in patch
    assert ".mcp.json" not in patch and ".claude/" not in patch and "claude-stderr.log" not in patch
    # A fresh clone of the remote, given the bundle's commits, takes the patch.
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(tmp_path / "dirty.remote.git"), "fresh")
    git(fresh, "fetch", "-q", str(dest / BUNDLE), "main:restored")
    git(fresh, "checkout", "-q", "restored")
    git(fresh, "apply", "--check", str(dest / PATCH))
    git(fresh, "apply", str(dest / PATCH))
    assert (fresh / "scratch.txt").read_text() == "untracked notes\n"
    assert (fresh / "blob.bin").read_bytes() == bytes(range(256))
    # The clone's own staging was never touched (a throwaway index did the work).
    assert "scratch.txt" not in git(clone, "diff", "--cached", "--name-only")
    manifest = json.loads((dest / MANIFEST).read_text())
    assert manifest["head_ref"] == "refs/heads/main" and manifest["dropped_deletions"] == 0


async def test_a_tree_of_only_deletions_is_not_preserved_but_its_bundle_travels(tmp_path: Path) -> None:
    clone = make_clone(tmp_path, tmp_path / "clones", "mangled")
    (clone / "README.md").write_text("a commit that matters\n")
    git(clone, "commit", "-q", "-am", "unpushed before the rm -rf")
    dropped = delete_tracked(clone)
    add_scaffolding(clone)  # the 2026-09-02 shape: only scaffolding left beside the deletions
    assert await dirty_check(_git(clone)) is Finding.DIRTY
    dest = tmp_path / "artifacts" / "412"
    preserved = await preserve(_git(clone), dest, now=NOW)
    assert preserved.mangled and preserved.manifest.dropped_deletions == dropped
    assert not (dest / PATCH).exists() and preserved.manifest.bundle
    git(tmp_path / "clones", "init", "-q", "verifier")
    git(tmp_path / "clones" / "verifier", "bundle", "verify", "-q", str(dest / BUNDLE))


async def test_a_wedged_git_is_killed_at_its_bound_with_its_group_and_the_next_call_declines(tmp_path: Path) -> None:
    clone = make_clone(tmp_path, tmp_path / "clones", "wedged")
    (clone / "README.md").write_text("work that must not be lost\n")
    notes = wedge(clone, tmp_path)
    g = _git(clone, timeout=1.0)
    assert await dirty_check(g) is Finding.UNKNOWN  # a killed git reads dirty, never clean
    assert g.wedged and g.started == 1
    assert (notes / "calls").read_text().count("called") == 1
    child = int((notes / "child.pid").read_text())
    for _ in range(50):  # the group's SIGKILL lands within the call; reaping may take a moment
        if not alive(child):
            break
        await asyncio.sleep(0.1)
    assert not alive(child), "the hook's grandchild outlived the bound"
    with pytest.raises(GitTimedOut):
        await preserve(g, tmp_path / "artifacts" / "9", now=NOW)
    assert g.started == 1  # declined without starting git again
    assert (notes / "calls").read_text().count("called") == 1
    assert not (tmp_path / "artifacts" / "9" / MANIFEST).exists()


async def test_rebuild_brings_back_commits_working_tree_branch_and_remote(tmp_path: Path) -> None:
    clone = make_clone(tmp_path, tmp_path / "clones", "rebuild")
    make_dirty(clone)
    add_scaffolding(clone)
    before = {k: v for k, v in tree_files(clone).items()
              if not (k.startswith(".claude") or k in (".mcp.json", "claude-stderr.log"))}
    head = git(clone, "rev-parse", "HEAD").strip()
    dest = tmp_path / "artifacts" / "3"
    await preserve(_git(clone), dest, now=NOW)
    manifest = read_manifest(dest)
    assert manifest is not None
    target = tmp_path / "restored"
    said = await rebuild_clone(dest, target, manifest, timeout=30)
    assert "bundle" in said and "patch" in said
    assert tree_files(target) == before
    assert git(target, "rev-parse", "HEAD").strip() == head
    assert git(target, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git(target, "remote", "get-url", "origin").strip() == str(tmp_path / "rebuild.remote.git")
    assert git(target, "rev-parse", "origin/main").strip() == git(clone, "rev-parse", "origin/main").strip()
    assert set(TRACKED) <= set(tree_files(target))


def test_artifacts_exist_counts_anything_left(tmp_path: Path) -> None:
    assert not artifacts_exist(None) and not artifacts_exist(tmp_path / "none")
    (tmp_path / "a").mkdir()
    assert not artifacts_exist(tmp_path / "a")
    (tmp_path / "a" / f"{BUNDLE}.partial").write_bytes(b"x")
    assert artifacts_exist(tmp_path / "a")
