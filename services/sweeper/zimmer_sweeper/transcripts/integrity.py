"""LiveCloneIntegrityJob (seed 003, "Noticing when a live session has lost its working tree"):
hourly at :40, every live session whose clone is on this host, one ERROR line naming each session
that has lost what has no benign explanation, and what is still in its directory.

- A clone directory that exists but has lost its git tree: no benign way for a tracked working tree
  to disappear from under a live session. A directory holding only Zimmer's own scaffolding
  (.mcp.json, .claude/, the stderr log) is the #808 signature, which is why the line says what is
  left.
- A clone that has lost the session's agent root subdirectory: fatal on its own (air prepare writes
  <clone>/<subdirectory>/.mcp.json and dies with ENOENT).

A clone root gone entirely is not reported, for any status: a session legitimately sits on a
deleted clone between an archive and the resume that re-clones it, and on a congested afternoon a
session is running with no clone root for minutes. A fork scaffolded empty on purpose is exempt
from the git check, not from the subdirectory check. A healthy hour writes one INFO line (below the
export threshold). The line pages through one condition per host, so a loss that persists pages
once, and the first healthy hour after resolves it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from sqlalchemy import select

from zimmer_common.bus_link import BusLink
from zimmer_common.contracts.clones import SessionClone
from zimmer_common.contracts.fields import LONG_TEXT_MAX
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.clones.listing import all_clones
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.tables import DiskRunRow

log = logging.getLogger("zimmer.sweeper.integrity")

JOB: Final = "live_clone_integrity"
TITLE: Final = "Live session lost its working tree"
NAMES_SHOWN: Final = 12  # of what is left in a directory; the rest are counted
SESSIONS_IN_CONTEXT: Final = 50

State = Literal["intact", "missing_root", "lost"]


@dataclass(frozen=True)
class Inspection:
    session_id: int
    clone_path: str
    state: State
    lost: tuple[str, ...] = ()  # "git tree", "agent subdirectory app/"
    left: tuple[str, ...] = ()  # what is still in the clone directory, sorted
    more: int = 0  # entries past NAMES_SHOWN

    def sentence(self) -> str:
        held = ", ".join(self.left) + (f" and {self.more} more" if self.more else "") if self.left else "nothing"
        return f"session {self.session_id} at {self.clone_path}: {' and '.join(self.lost)} gone; holding {held}"


def judge(*, exists: bool, has_git: bool, scaffolded: bool, subdirectory: str | None,
          has_subdirectory: bool) -> tuple[State, tuple[str, ...]]:
    """What a live session's clone has lost, if anything has no benign explanation."""
    if not exists:
        return "missing_root", ()
    lost = []
    if not scaffolded and not has_git:
        lost.append("git tree")
    if subdirectory and not has_subdirectory:
        lost.append(f"agent subdirectory {subdirectory.strip('/')}/")
    return ("lost" if lost else "intact"), tuple(lost)


def inspect(clone: SessionClone) -> Inspection:
    """Read one clone directory (blocking). A .git directory with its HEAD, or a .git file (a
    worktree's pointer), is a git tree."""
    path = clone.clone_path
    exists = os.path.isdir(path)
    has_git = exists and (os.path.isfile(posixpath.join(path, ".git", "HEAD"))
                          or os.path.isfile(posixpath.join(path, ".git")))
    subdir = (clone.agent_subdirectory or "").strip("/") or None
    has_subdir = bool(subdir) and os.path.isdir(posixpath.join(path, subdir))
    state, lost = judge(exists=exists, has_git=has_git, scaffolded=clone.scaffolded, subdirectory=subdir,
                        has_subdirectory=has_subdir)
    if state != "lost":
        return Inspection(clone.session_id, path, state)
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        names = [f"(unreadable: {exc.strerror or exc})"]
    return Inspection(clone.session_id, path, state, lost, tuple(names[:NAMES_SHOWN]),
                      max(0, len(names) - NAMES_SHOWN))


@dataclass
class IntegrityReport:
    examined: int = 0
    lost: list[Inspection] = field(default_factory=list)
    missing_root: int = 0
    note: str = ""

    @property
    def counts(self) -> dict[str, int]:
        return {"examined": self.examined, "lost": len(self.lost), "missing_root": self.missing_root,
                "lost_git_tree": sum("git tree" in i.lost for i in self.lost),
                "lost_subdirectory": sum(any(x.startswith("agent") for x in i.lost) for i in self.lost)}


def page_message(host: str, lost: list[Inspection]) -> str:
    """Every session named: the sentences as far as a page carries them, the rest by id."""
    head = f"{len(lost)} live session(s) on {host} lost their working tree: "

    def more(rest: list[Inspection]) -> str:
        return f"; and {len(rest)} more: sessions {', '.join(str(i.session_id) for i in rest)}" if rest else ""

    sentences: list[str] = []
    for k, inspection in enumerate(lost):
        if len(head + "; ".join([*sentences, inspection.sentence()]) + more(lost[k + 1:])) > LONG_TEXT_MAX:
            break
        sentences.append(inspection.sentence())
    return (head + "; ".join(sentences) + more(lost[len(sentences):]))[:LONG_TEXT_MAX]


class LiveCloneIntegrity:
    def __init__(self, *, bus: BusLink, units: UnitsOfWork, records: DiskRecords,
                 now: Callable[[], datetime], pager: Pager, metrics: DiskMetrics,
                 timeout: float | None = None):
        self._bus = bus
        self.units = units
        self.records = records
        self.now = now
        self.pager = pager
        self.metrics = metrics
        self.timeout = timeout

    @property
    def condition_key(self) -> str:
        return f"sweeper:{JOB}:{self.records.host}"

    async def run(self) -> IntegrityReport:
        started = self.now()
        report = IntegrityReport()
        try:
            clones = await all_clones(self._bus.bus, scope="live", host=self.records.host, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - an unchecked hour is recorded and said, not guessed
            report.note = f"spot-gate did not list this host's live sessions ({str(exc)[:200]}): nothing was checked"
            log.warning("live clone integrity not checked", extra=kv(host=self.records.host, reason=report.note))
            await self._record(started, "aborted", report)
            return report
        inspections = await asyncio.to_thread(lambda: [inspect(c) for c in clones])
        report.examined = len(inspections)
        report.lost = [i for i in inspections if i.state == "lost"]
        report.missing_root = sum(i.state == "missing_root" for i in inspections)
        was_firing = await self._previous_lost()
        if report.lost:
            report.note = page_message(self.records.host, report.lost)
            await self.pager.report(
                title=TITLE, fingerprint=["sweeper", JOB], condition_key=self.condition_key,
                message=report.note, source=f"sweeper/{JOB}",
                context={"host": self.records.host, "sessions": [
                    {"session_id": i.session_id, "clone_path": i.clone_path, "lost": list(i.lost),
                     "left": list(i.left), "more": i.more} for i in report.lost[:SESSIONS_IN_CONTEXT]]})
        else:
            report.note = (f"{report.examined} live session(s) on {self.records.host}: every clone present holds "
                           f"its git tree and agent subdirectory ({report.missing_root} with no clone root, "
                           "which is not reported)")
            log.info("live clone integrity", extra=kv(host=self.records.host, **report.counts))
            if was_firing:
                await self.pager.report(
                    title=TITLE, fingerprint=["sweeper", JOB], condition_key=self.condition_key, still_true=False,
                    level="warning", source=f"sweeper/{JOB}", message=f"live clones on {self.records.host} are intact "
                                                                     "again")
        await self._record(started, "ok", report)
        return report

    async def _record(self, started: datetime, outcome: Literal["ok", "aborted"], report: IntegrityReport) -> None:
        await self.records.run(JOB, started_at=started, outcome=outcome, counts=report.counts, note=report.note)
        self.metrics.run_recorded(JOB, outcome=outcome, counts=report.counts, bytes_freed=0, finished_at=time.time())

    async def _previous_lost(self) -> bool:
        """Whether the last checked hour on this host paged (so this healthy one resolves it)."""
        async with self.units.read() as conn:
            counts = (await conn.execute(
                select(DiskRunRow.counts).where(DiskRunRow.host == self.records.host, DiskRunRow.job == JOB,
                                                DiskRunRow.outcome == "ok")
                .order_by(DiskRunRow.started_at.desc(), DiskRunRow.id.desc()).limit(1))).scalar()
        return bool(counts and counts.get("lost"))
