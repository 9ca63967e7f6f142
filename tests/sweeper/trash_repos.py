"""Real git repositories for the trash pipeline's tests: a bare "remote", a clone of it with a pushed
commit, the shapes a clone is archived in (clean, dirty, only deletions, wedged), and a hook that
wedges git the way stuck volume I/O or a lock does. (A module of its own, not conftest.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = ["-c", "user.email=test@zimmer.invalid", "-c", "user.name=Zimmer Test"]
TRACKED = {"README.md": "hello\n", "src/app.py": "print('app')\n", "src/lib.py": "X = 1\n", "docs/notes.md": "n\n"}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=dict(os.environ, GIT_TERMINAL_PROMPT="0"), timeout=60)
    return done.stdout


def make_clone(root: Path, clones: Path, name: str) -> Path:
    """A bare remote under `root` with TRACKED committed on main and pushed, and its clone at
    `clones/<name>` (the clone path a session stores)."""
    remote = root / f"{name}.remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(remote))
    clone = clones / name
    clones.mkdir(parents=True, exist_ok=True)
    git(clones, "clone", "-q", str(remote), name)
    git(clone, "checkout", "-q", "-B", "main")
    for rel, text in TRACKED.items():
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        (clone / rel).write_text(text)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "seed")
    git(clone, "push", "-q", "-u", "origin", "main")
    return clone


def add_scaffolding(clone: Path) -> None:
    """What Zimmer itself writes into a clone: never the session's work."""
    (clone / ".mcp.json").write_text("{}\n")
    (clone / ".claude").mkdir(exist_ok=True)
    (clone / ".claude" / "settings.json").write_text("{}\n")
    (clone / "claude-stderr.log").write_text("stderr\n")


def make_dirty(clone: Path) -> None:
    """Unpushed work of every kind: a commit, a modified tracked file, a new untracked file, a binary."""
    (clone / "src" / "feature.py").write_text("def feature():\n    return 42\n")
    git(clone, "add", "src/feature.py")
    git(clone, "commit", "-q", "-m", "unpushed feature")
    (clone / "src" / "app.py").write_text("print('app, edited')\n")
    (clone / "scratch.txt").write_text("untracked notes\n")
    (clone / "blob.bin").write_bytes(bytes(range(256)))


def delete_tracked(clone: Path) -> int:
    """The #412 / 2026-09-02 shape: an interrupted in-place rm -rf left only deletions of tracked files."""
    for rel in TRACKED:
        (clone / rel).unlink()
    return len(TRACKED)


def wedge(clone: Path, workdir: Path) -> Path:
    """Make git wedge on this clone as it would on stuck I/O: its fsmonitor hook (run by `git status`)
    never returns, and leaves a grandchild holding on. Returns the directory where the hook notes
    each call (`calls`) and its grandchild's pid (`child.pid`)."""
    notes = workdir / "wedge"
    notes.mkdir(parents=True, exist_ok=True)
    hook = notes / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\necho called >> {notes}/calls\nsleep 600 &\necho $! > {notes}/child.pid\nwait\n")
    hook.chmod(0o755)
    git(clone, "config", "core.fsmonitor", str(hook))
    return notes


def unwedge(clone: Path) -> None:
    git(clone, "config", "--unset", "core.fsmonitor")


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def tree_files(root: Path) -> dict[str, bytes]:
    """Every file under `root` but .git, by relative path: what a restore must bring back."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".git" or not path.is_file():
            continue
        out[str(rel)] = path.read_bytes()
    return out
