"""AtomicCloneRemoval on real directories (seed 003, "Both clone sweeps reap deletion tombstones"):
rename to a tombstone, then delete; a kill -9 between the two leaves only a tombstone, which the
next reap takes."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zimmer_sweeper.disk.domain import REAP_LIMIT, is_tombstone
from zimmer_sweeper.disk.removal import reap_tombstones, remove_atomically


def make_tree(root: Path, dirs: int = 3, files: int = 5) -> Path:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for d in range(dirs):
        sub = root / f"d{d}"
        sub.mkdir()
        for f in range(files):
            (sub / f"f{f}").write_bytes(b"x" * 100)
    return root


async def test_a_removal_renames_then_deletes_and_logs_path_and_mtime_first(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    clone = make_tree(tmp_path / "clones" / "zimmer-main-1785661439-005ceef3")
    os.utime(clone, (1_700_000_000, 1_700_000_000))
    with caplog.at_level(logging.INFO, logger="zimmer.sweeper.removal"):
        removal = await remove_atomically(clone, job="test")
    assert removal is not None and not removal.tombstone_left
    assert removal.mtime.timestamp() == 1_700_000_000
    assert list((tmp_path / "clones").iterdir()) == []
    [record] = [r for r in caplog.records if r.getMessage() == "removing directory"]
    assert record.fields["path"] == str(clone) and record.fields["mtime"].startswith("2023-11-14")  # type: ignore[attr-defined]  # log records carry the `fields` extra
    assert is_tombstone(record.fields["tombstone"])  # type: ignore[attr-defined]  # log records carry the `fields` extra


async def test_nothing_at_the_path_is_no_removal(tmp_path: Path) -> None:
    assert await remove_atomically(tmp_path / "absent", job="test") is None


async def test_read_only_directories_inside_a_tree_are_removed_too(tmp_path: Path) -> None:
    clone = make_tree(tmp_path / "c1")
    cache = clone / "go" / "pkg" / "mod"
    cache.mkdir(parents=True)
    (cache / "module.go").write_text("package x\n")
    cache.chmod(0o555)
    (clone / "go").chmod(0o555)
    removal = await remove_atomically(clone, job="test")
    assert removal is not None and not removal.tombstone_left and list(tmp_path.iterdir()) == []


async def test_a_rename_that_cannot_happen_leaves_the_tree_whole(tmp_path: Path) -> None:
    """No in-place fallback: a name too long to carry the tombstone suffix raises and deletes nothing."""
    clone = make_tree(tmp_path / ("c" * 250))
    with pytest.raises(OSError):
        await remove_atomically(clone, job="test")
    assert (clone / ".git" / "HEAD").exists() and len(list(clone.rglob("*"))) == 1 + 1 + 3 + 15


async def test_tombstones_are_reaped_oldest_first_within_the_limit_and_nothing_else(tmp_path: Path) -> None:
    base = tmp_path / "clones"
    base.mkdir()
    for i in range(REAP_LIMIT + 5):
        tomb = make_tree(base / f"clone-{i}.deleting-{i:08x}", dirs=1, files=1)
        os.utime(tomb, (1_700_000_000 + i, 1_700_000_000 + i))
    (base / "stray.deleting-0000000z").mkdir()  # not hex: not a tombstone
    make_tree(base / "live-clone")
    (base / "file.deleting-0123abcd").write_text("a tombstone of a file")
    os.utime(base / "file.deleting-0123abcd", (1_600_000_000, 1_600_000_000))

    first = await reap_tombstones(base, job="test")
    assert (first.reaped, first.failed, first.left) == (REAP_LIMIT, 0, 6)
    left = sorted(p.name for p in base.iterdir())  # the file was the oldest tombstone of all
    assert left == ["clone-49.deleting-00000031", "clone-50.deleting-00000032", "clone-51.deleting-00000033",
                    "clone-52.deleting-00000034", "clone-53.deleting-00000035", "clone-54.deleting-00000036", "live-clone",
                    "stray.deleting-0000000z"]
    second = await reap_tombstones(base, job="test")
    assert (second.reaped, second.left) == (6, 0)
    assert sorted(p.name for p in base.iterdir()) == ["live-clone", "stray.deleting-0000000z"]


async def test_an_unlistable_base_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        await reap_tombstones(tmp_path / "missing", job="test")


_REMOVE_IN_A_CHILD = """
import asyncio, sys
from pathlib import Path
from zimmer_sweeper.disk.removal import remove_atomically
asyncio.run(remove_atomically(Path(sys.argv[1]), job="killed"))
"""


def test_kill_9_between_the_rename_and_the_delete_leaves_only_a_tombstone_the_next_run_reaps(tmp_path: Path) -> None:
    """A real process removing a big tree, SIGKILLed the moment the clone's name is free: the clone's
    path holds nothing (never a half-tree), a tombstone holds what was not deleted yet, and the next
    reap leaves the base empty."""
    base = tmp_path / "clones"
    clone = make_tree(base / "zimmer-main-1785661439-005ceef3", dirs=100, files=100)
    child = subprocess.Popen([sys.executable, "-c", _REMOVE_IN_A_CHILD, str(clone)])
    try:
        deadline = time.monotonic() + 60
        while clone.exists():
            assert child.poll() is None, "the child finished before its rename was seen"
            assert time.monotonic() < deadline, "the child never renamed the clone"
            time.sleep(0.0005)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    [tomb] = list(base.iterdir())
    assert is_tombstone(tomb.name) and tomb.name.startswith(clone.name)
    assert not clone.exists()
    assert any(tomb.rglob("f*")), "the kill came after the delete finished: no tombstone to prove anything"
    reap = asyncio.run(reap_tombstones(base, job="next_run"))
    assert (reap.reaped, reap.failed, reap.left) == (1, 0, 0)
    assert list(base.iterdir()) == []
