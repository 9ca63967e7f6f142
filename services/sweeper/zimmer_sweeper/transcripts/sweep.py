"""OrphanTranscriptDirectoryCleanupJob and TranscriptDirectoryReaper (seed 003, "The transcript
directory outlives the clone"): the two halves of reclaiming ~/.claude/projects.

- `reap(clone_path)` is what the guard calls once a clone is gone and its second answer still says
  nobody took the path back: the clone's transcript directory and its `-<subdir>` extensions go,
  never a name that a different live clone claims. That stops the pile growing.
- `run(budget)`, six-hourly in production and staging, works off the pile that exists: at most
  1,000 directories a run, each orphaned by name and with nothing inside touched for 24 hours.

Both judge names against one snapshot (`snapshot`): every directory under the clones base (as
configured and with symlinks followed), every live or reap-protected session's clone path from
spot-gate, and the directories whose names collide with a class's. A clones base that cannot be
listed, and a spot-gate that does not answer, abort: nothing is deleted on a guess. The sweep
takes a second snapshot after choosing and before deleting, so a session resumed into a re-clone
at the same path while the run read the root keeps its transcript.

The sweep refuses to run in development even when asked by hand (outside a deployment,
~/.claude/projects is a person's own Claude Code history), and is fenced twice: on the volume
liveness is read from (the clones base) and on the volume deleted from (the transcripts root),
because the two move independently. Bytes freed are measured against the volume, and the run log
reports count and bytes separately: per-directory size differs by more than an order of magnitude
between deployments, so a count says nothing about the space.
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
from pathlib import Path

from zimmer_common.budget import BudgetExhausted, SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.contracts.disk import SweepOutcome
from zimmer_common.logs import kv
from zimmer_common.settings import Environment
from zimmer_sweeper.clones.listing import all_clones
from zimmer_sweeper.disk.domain import Fence
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords, counts_of
from zimmer_sweeper.disk.volumes import FreeSpace, Roots, resolve_root, statvfs_free
from zimmer_sweeper.transcripts.domain import (
    AGE_THRESHOLD,
    BATCH_LIMIT,
    CLAUDE_HOME,
    EPHEMERAL_ROOTS,
    Liveness,
    extensions_of,
    liveness,
    select,
    transcript_name,
    transcript_root_fence,
)
from zimmer_sweeper.transcripts.fs import classify_root, clone_working_dirs, colliding_dirs, newest_mtime, remove_transcript_dir

log = logging.getLogger("zimmer.sweeper.transcripts")

JOB = "orphan_transcript_sweep"
REAPER = "clone_reaper"  # whose removals reap() logs: the guard's, after a clone is gone
DEVELOPMENT_REFUSAL = ("the orphan transcript sweep never runs in development, not even by hand: outside a "
                       "deployment ~/.claude/projects is a person's own Claude Code history")


class SnapshotUnavailable(RuntimeError):
    """What exists could not be read completely; nothing may be judged orphaned."""


@dataclass
class SweepReport:
    outcome: SweepOutcome
    counts: dict[str, int] = field(default_factory=dict)
    bytes_freed: int = 0
    note: str = ""
    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TranscriptReap:
    removed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    reason: str = ""


class TranscriptSweep:
    def __init__(self, *, bus: BusLink, roots: Roots, records: DiskRecords, now: Callable[[], datetime],
                 metrics: DiskMetrics, free_space: FreeSpace = statvfs_free, timeout: float | None = None,
                 limit: int = BATCH_LIMIT):
        self._bus = bus
        self.roots = roots
        self.records = records
        self.now = now
        self.metrics = metrics
        self.free_space = free_space
        self.timeout = timeout
        self.limit = limit

    # ---- what exists ------------------------------------------------------------------------

    def clone_bases(self) -> list[str]:
        """The clones base as configured and with its symlinks followed (either may be the cwd
        Claude Code saw)."""
        configured = self.roots.disk.clones_dir
        if not configured:
            return []
        spelled = posixpath.normpath(os.path.abspath(os.path.expanduser(configured)))
        resolved = str(self.roots.path("clones"))
        return [spelled] if spelled == resolved else [spelled, resolved]

    async def snapshot(self, *, require_clones: bool = True) -> Liveness:
        """Raises SnapshotUnavailable when any part cannot be read. `require_clones`: an empty
        clones base aborts too, because it reads exactly like a volume that failed to mount."""
        bases = self.clone_bases()
        if not bases:
            raise SnapshotUnavailable("no clones base is configured on this host: which clones exist cannot be read")
        try:
            on_disk = await asyncio.to_thread(clone_working_dirs, bases)
        except OSError as exc:
            raise SnapshotUnavailable(f"the clones base {bases[0]} cannot be listed ({exc.strerror or exc}): every "
                                      "transcript would read as orphaned") from exc
        if require_clones and not on_disk:
            raise SnapshotUnavailable(f"the clones base {bases[0]} is empty, which reads like an unmounted volume: "
                                      "every clone-derived transcript would read as orphaned")
        try:
            claimed = await all_clones(self._bus.bus, scope="live", timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - any doubt keeps every transcript
            raise SnapshotUnavailable(f"spot-gate did not list the live and reap-protected sessions' clones "
                                      f"({str(exc)[:200]}): failed closed") from exc
        colliding = await asyncio.to_thread(colliding_dirs, [*bases, *EPHEMERAL_ROOTS])
        return liveness([*on_disk, *(c.clone_path for c in claimed)], clone_bases=bases, colliding=colliding)

    # ---- fences -----------------------------------------------------------------------------

    def transcripts_fence(self) -> Fence:
        root = self.roots.path("transcripts")
        return transcript_root_fence(str(root) if root else None, durable_volume=str(self.roots.durable_volume),
                                     claude_home=str(resolve_root(CLAUDE_HOME)), env=self.roots.env)

    def refusal(self) -> str:
        """Why this deployment may not run the sweep at all ("" when it may)."""
        if self.roots.env == Environment.DEVELOPMENT:
            return DEVELOPMENT_REFUSAL
        for name, verdict in (("transcripts root", self.transcripts_fence()), ("clones base", self.roots.fence("clones"))):
            if not verdict.sweepable:
                return f"{name}: {verdict.sentence}"
        return ""

    # ---- the orphan sweep -------------------------------------------------------------------

    async def run(self, budget: SweepBudget) -> SweepReport:
        started = self.now()
        report = await self._sweep(budget)
        await self.records.run(JOB, started_at=started, outcome=report.outcome, counts=counts_of(**report.counts),
                               bytes_freed=report.bytes_freed, note=report.note)
        self.metrics.run_recorded(JOB, outcome=report.outcome, counts=report.counts, bytes_freed=report.bytes_freed,
                                  finished_at=time.time())
        quiet = report.outcome == "ok"
        (log.info if quiet else log.warning)(
            "orphan transcript sweep" if quiet else "orphan transcript sweep left work for the next run",
            extra=kv(outcome=report.outcome, note=report.note, bytes_freed=report.bytes_freed,
                     removed=report.counts.get("removed", 0), **{k: v for k, v in report.counts.items()
                                                                 if k != "removed"}))
        return report

    async def _sweep(self, budget: SweepBudget) -> SweepReport:
        refused = self.refusal()
        if refused:
            return SweepReport("aborted", note=refused)
        root = str(self.roots.path("transcripts"))
        try:
            live = await self.snapshot()
        except SnapshotUnavailable as exc:
            return SweepReport("aborted", note=str(exc))
        try:
            free_before = await asyncio.to_thread(self.free_space, Path(root))
            cutoff = (self.now() - AGE_THRESHOLD).timestamp()
            reading = await asyncio.to_thread(classify_root, root, live, cutoff)
        except OSError as exc:
            return SweepReport("aborted", note=f"the transcripts root {root} cannot be read ({exc.strerror or exc})")
        chosen = select(reading.candidates, now=self.now(), limit=self.limit)
        counts = {**reading.counts, "too_young": len(chosen.too_young), "due": len(chosen.due),
                  "deferred": len(chosen.deferred), "turned_live": 0, "removed": 0, "failed": 0, "unreached": 0}
        report = SweepReport("ok", counts)
        if chosen.due:
            try:
                fresh = await self.snapshot()
            except SnapshotUnavailable as exc:
                report.outcome, report.note = "aborted", f"second look before deleting: {exc}"
                return report
            still = [c for c in chosen.due if fresh.classify(c.name).kind == "orphaned"]
            counts["turned_live"] = len(chosen.due) - len(still)
            for i, candidate in enumerate(still):
                try:
                    budget.check()
                except BudgetExhausted:
                    counts["unreached"] = len(still) - i
                    break
                problem = await asyncio.to_thread(remove_transcript_dir, root, candidate.name, candidate.newest,
                                                  job=JOB)
                if problem:
                    counts["failed"] += 1
                else:
                    counts["removed"] += 1
                    report.removed.append(candidate.name)
            report.bytes_freed = max(0, await asyncio.to_thread(self.free_space, Path(root)) - free_before)
        left = counts["deferred"] + counts["unreached"] + counts["failed"]
        if left:
            report.outcome = "partial"
        report.note = _sentence(counts, report.bytes_freed, budget)
        return report

    # ---- with the clone ---------------------------------------------------------------------

    async def reap(self, clone_path: Path) -> TranscriptReap:
        """The clone at `clone_path` is gone and the guard's second answer says nobody owns it:
        remove its transcript directory and every `-<subdir>` extension, except a name a different
        live clone claims (or one whose origin is ambiguous). Keeps everything when the fence says
        so or when what exists cannot be read; the orphan sweep judges those later."""
        fenced = self.transcripts_fence()
        if not fenced.sweepable:
            return TranscriptReap(reason=fenced.sentence)
        root = str(self.roots.path("transcripts"))
        path = posixpath.normpath(str(clone_path))
        parent = os.path.realpath(posixpath.dirname(path))
        names = {transcript_name(path), transcript_name(posixpath.join(parent, posixpath.basename(path)))}
        try:
            listing = await asyncio.to_thread(os.listdir, root)
        except OSError as exc:
            return TranscriptReap(reason=f"the transcripts root {root} cannot be listed ({exc.strerror or exc})")
        matches = sorted({m for name in names for m in extensions_of(name, listing)})
        if not matches:
            return TranscriptReap(reason="no transcript directory")
        try:
            live = await self.snapshot(require_clones=False)
        except SnapshotUnavailable as exc:
            log.warning("clone removed; its transcript directories are kept for the orphan sweep",
                        extra=kv(clone_path=path, kept=matches, reason=str(exc)))
            return TranscriptReap(kept=tuple(matches), reason=str(exc))
        removed, kept = [], []
        for name in matches:
            if live.classify(name).basis != "gone_clone":
                kept.append(name)
                continue
            newest = await asyncio.to_thread(newest_mtime, posixpath.join(root, name))
            problem = await asyncio.to_thread(remove_transcript_dir, root, name, newest, job=REAPER)
            (kept if problem else removed).append(name)
        if kept:
            log.info("clone's transcript directories kept: claimed by a live clone, or of unsure origin",
                     extra=kv(clone_path=path, kept=kept, removed=removed))
        return TranscriptReap(tuple(removed), tuple(kept))


def _sentence(counts: dict[str, int], bytes_freed: int, budget: SweepBudget) -> str:
    parts = [f"examined {counts['examined']:,} transcript directories: {counts['live']:,} live, "
             f"{counts['orphaned_gone_clone'] + counts['orphaned_ephemeral']:,} orphaned, {counts['unknown']:,} "
             f"unknown (kept); removed {counts['removed']:,} ({bytes_freed:,} bytes freed on the volume)"]
    if counts["too_young"]:
        parts.append(f"{counts['too_young']:,} orphaned but touched within {AGE_THRESHOLD}")
    if counts["turned_live"]:
        parts.append(f"{counts['turned_live']:,} live again at the second look")
    if counts["deferred"]:
        parts.append(f"{counts['deferred']:,} past this run's limit, for the next run")
    if counts["unreached"]:
        parts.append(f"{counts['unreached']:,} not reached within the {budget.seconds:.0f} s budget")
    if counts["failed"]:
        parts.append(f"{counts['failed']:,} could not be removed")
    return "; ".join(parts)
