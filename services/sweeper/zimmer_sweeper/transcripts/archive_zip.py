"""The filesystem half of the transcript archive: which transcript directories are a session's,
when the newest thing in them changed, and one session's zip, written file by file to a temporary
file (never whole in memory: loading every changed session at once is what OOM-killed the seed's
worker every ten minutes, #719). Blocking calls; the archive runs them in a thread."""

from __future__ import annotations

import json
import os
import posixpath
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import BinaryIO

from zimmer_common.contracts.clones import SessionClone
from zimmer_sweeper.transcripts.domain import transcript_name
from zimmer_sweeper.transcripts.fs import newest_mtime


def session_directories(root: str, clone: SessionClone) -> list[str]:
    """The transcript directories under `root` a session's clone names: the clone's own and, with
    an agent root subdirectory, `<clone>/<subdirectory>`'s (the agent's cwd), each as stored and
    with the clones base's symlinks followed. Only those that exist."""
    path = posixpath.normpath(clone.clone_path)
    physical = posixpath.join(os.path.realpath(posixpath.dirname(path)), posixpath.basename(path))
    cwds = {path, physical}
    subdir = (clone.agent_subdirectory or "").strip("/")
    if subdir:
        cwds |= {posixpath.join(p, subdir) for p in (path, physical)}
    names = sorted({transcript_name(c) for c in cwds})
    return [n for n in names if os.path.isdir(posixpath.join(root, n)) and not os.path.islink(posixpath.join(root, n))]


def newest_in(root: str, directories: list[str]) -> datetime:
    """The newest mtime anywhere in the session's transcript directories (each one's own
    included): a subagent transcript is a file of its own under <session>/subagents/ and touches
    nothing else, so reading only the session's .jsonl would miss it (#720)."""
    newest = datetime.min.replace(tzinfo=UTC)
    for name in directories:
        ts = newest_mtime(posixpath.join(root, name))
        if ts is not None and ts != float("inf"):
            newest = max(newest, datetime.fromtimestamp(ts, UTC))
    return newest


@dataclass(frozen=True)
class SessionZip:
    files: int
    bytes: int  # the zip's size


def write_session_zip(dest: BinaryIO, root: str, directories: list[str], clone: SessionClone,
                      archived_at: datetime) -> SessionZip:
    """Zip the session's transcript directories into `dest` (entries `<directory>/<path>`), with a
    session.json saying what the zip is of. Symlinks are not followed; a file that vanishes while
    the zip is written is left out (the next change re-archives the session)."""
    files = 0
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as z:
        z.writestr("session.json", json.dumps({
            "session_id": clone.session_id, "status": clone.status, "clone_path": clone.clone_path,
            "agent_subdirectory": clone.agent_subdirectory, "host": clone.host,
            "session_updated_at": clone.updated_at.isoformat(), "archived_at": archived_at.isoformat(),
            "directories": directories}, indent=2))
        for name in directories:
            top = posixpath.join(root, name)
            for here, dirs, names in os.walk(top, followlinks=False):
                dirs.sort()
                for file in sorted(names):
                    path = posixpath.join(here, file)
                    if os.path.islink(path) or not os.path.isfile(path):
                        continue
                    try:
                        z.write(path, arcname=posixpath.join(name, posixpath.relpath(path, top)))
                    except FileNotFoundError:
                        continue
                    files += 1
    dest.flush()
    return SessionZip(files, dest.tell())
