"""The runtime host's disk as the fleet leaves it: a clone per session under the sweeper's clones
root, its Claude Code transcript directory under the transcripts root, and orphans nobody owns.

The transcript directory's name is Claude Code's derivation of the clone path (docs/runtime.md:
`/`, `.` and `_` all become `-`), computed here as a runtime would, not borrowed from the sweeper.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ORPHAN_AGE_SECONDS = 3 * 24 * 3600  # older than the sweeper's 48-hour bar: the orphan sweep takes them
CHUNK = 1 << 20
ZEROS = bytes(CHUNK)  # written, not sparse: the bytes count against the volume's free space


GIT_IDENTITY = ("-c", "user.name=zimmer sim", "-c", "user.email=sim@zimmer.invalid", "-c", "commit.gpgsign=false")


def _git(cwd: Path, *args: str) -> None:
    """A real repository, as a runtime's clone is: the sweeper's trash pipeline runs git in it."""
    subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True, timeout=30,
                   env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})


def transcript_name(cwd: str) -> str:
    return cwd.replace("/", "-").replace(".", "-").replace("_", "-")


@dataclass
class SimDisk:
    clones: Path | None
    transcripts: Path | None
    host: str
    rng: random.Random

    def make_clone(self, session_id: int, *, large_bytes: int = 0) -> tuple[str, str | None] | None:
        """A clone for the session (and its transcript directory): (clone path, transcript dir)."""
        if self.clones is None:
            return None
        clone = self.clones / f"{session_id}-sim"
        clone.mkdir(parents=True, exist_ok=True)
        (clone / "README.md").write_text(f"session {session_id}\n")
        _git(clone, "init", "-q", "-b", "main")
        _git(clone, "add", "-A")
        _git(clone, "commit", "-q", "-m", f"session {session_id} starts")
        # A working tree as an agent leaves it: something uncommitted, which the trash pipeline keeps.
        (clone / "NOTES.md").write_text(f"work in progress for session {session_id}\n")
        if large_bytes:
            (clone / "build.bin").write_bytes(self.rng.randbytes(large_bytes))
        transcript = None
        if self.transcripts is not None:
            directory = self.transcripts / transcript_name(str(clone))
            directory.mkdir(parents=True, exist_ok=True)
            transcript = str(directory)
        return str(clone), transcript

    def append_transcript(self, transcript: str | None, line: str) -> None:
        if transcript is None:
            return
        path = Path(transcript)
        path.mkdir(parents=True, exist_ok=True)  # the sweeper may have taken it after an archive
        with (path / "session.jsonl").open("a") as f:
            f.write(line + "\n")

    def make_orphans(self, count: int, size: int = 4096) -> list[str]:
        """Directories no session owns, dated three days back: what the orphan sweeps are for. Each is
        written and dated beside the clones directory and renamed into it whole, so a sweep never
        finds one half-written and still young (a reclaim running mid-write fell short and paged)."""
        if self.clones is None or count <= 0:
            return []
        self.clones.mkdir(parents=True, exist_ok=True)
        staging = self.clones.parent / f".{self.clones.name}-orphans-staging"
        shutil.rmtree(staging, ignore_errors=True)  # drafts a killed run left: never renamed in, nobody's
        made, old = [], time.time() - ORPHAN_AGE_SECONDS
        for _ in range(count):
            name = f"orphan-{self.rng.getrandbits(40):010x}"
            draft = staging / name
            draft.mkdir(parents=True, exist_ok=True)
            with (draft / "left-behind.bin").open("wb") as f:
                for _ in range(size // CHUNK):
                    f.write(ZEROS)
                f.write(bytes(size % CHUNK))
            for p in (draft / "left-behind.bin", draft):
                os.utime(p, (old, old))
            path = self.clones / name
            draft.rename(path)  # the same volume: one step, and the directory keeps its date
            made.append(str(path))
        shutil.rmtree(staging, ignore_errors=True)
        return made

    def exists(self, path: str | None) -> bool:
        return path is not None and Path(path).exists()
