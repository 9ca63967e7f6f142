"""The runtime host's disk as the fleet leaves it: a clone per session under the sweeper's clones
root, its Claude Code transcript directory under the transcripts root, and orphans nobody owns.

The transcript directory's name is Claude Code's derivation of the clone path (docs/runtime.md:
`/`, `.` and `_` all become `-`), computed here as a runtime would, not borrowed from the sweeper.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

ORPHAN_AGE_SECONDS = 3 * 24 * 3600  # older than the sweeper's 48-hour bar: the orphan sweep takes them


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
        (clone / ".git").mkdir(parents=True, exist_ok=True)
        (clone / "README.md").write_text(f"session {session_id}\n")
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

    def make_orphans(self, count: int, *, large_bytes: int = 0) -> list[str]:
        """Directories no session owns, dated three days back: what the orphan sweeps are for."""
        if self.clones is None or count <= 0:
            return []
        made, old = [], time.time() - ORPHAN_AGE_SECONDS
        for _ in range(count):
            path = self.clones / f"orphan-{self.rng.getrandbits(40):010x}"
            path.mkdir(parents=True, exist_ok=True)
            (path / "left-behind.bin").write_bytes(self.rng.randbytes(large_bytes or 4096))
            for p in (path / "left-behind.bin", path):
                os.utime(p, (old, old))
            made.append(str(path))
        return made

    def exists(self, path: str | None) -> bool:
        return path is not None and Path(path).exists()
