"""OrphanCloneFilesystemCleanupJob and its urgent gear (seed 003, "One job owns the clones
directory", "Clone pruning has a second, urgent gear", "Both clone sweeps reap deletion tombstones").

"Which directory under the clones base does no session own?" is asked here and nowhere else: a
second sweep on a shorter bar is #709, and two answers to "what is safe to delete" is how a pruner
eats a live session's working directory (#808, #811).

- `sweep` (per host, six-hourly, maintenance lane): tombstones reaped first (one unbudgeted unit),
  then up to BATCH_LIMIT (20) directories past AGE_THRESHOLD (48 h), oldest first, inside
  SWEEP_BUDGET_SECONDS (5 min) checked at the top of each unit; what it does not reach is logged at
  WARN and left to the next tick (the sweep is level-triggered).
- `reclaim_space(target_free_bytes)` (the `reclaim_space.<host>` RPC and the free-space monitor):
  takes a requirement, never a directory (it resolves the clones base itself); tombstones first,
  returning early if they clear it; then the oldest orphans past PRESSURE_AGE_THRESHOLD (2 h), at
  most PRESSURE_BATCH_LIMIT (20), re-probing free space after every removal and stopping the moment
  the volume has enough, inside RECLAIM_BUDGET_SECONDS (60).

Both share every other guard: the tracked-path check (a basename any session row names is never a
candidate, whatever its status), live clone paths, the fence, and the guard at the instant of each
deletion. A listing or an ownership answer that cannot be had aborts the run: nothing is deleted
on a guess. A removal that raises is logged and skipped.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

from zimmer_common import deadline
from zimmer_common.budget import BudgetExhausted, SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.contracts.clones import CLONE_OWNERSHIP, OWNERSHIP_BATCH_MAX, CloneOwnershipQuery
from zimmer_common.contracts.disk import ReclaimReport, RemovedDirectory
from zimmer_common.logs import kv
from zimmer_sweeper.clones import listing as clone_listing
from zimmer_sweeper.clones.domain import (
    AGE_THRESHOLD,
    BATCH_LIMIT,
    PRESSURE_AGE_THRESHOLD,
    PRESSURE_BATCH_LIMIT,
    RECLAIM_BUDGET_SECONDS,
    OrphanChoice,
    aged_clone_directories,
    choose_orphans,
)
from zimmer_sweeper.clones.guard import CloneReaper, ReapResult
from zimmer_sweeper.disk.domain import SWEEP_BUDGET_SECONDS, DirEntry, is_tombstone
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.removal import reap_tombstones
from zimmer_sweeper.disk.sweep_run import SweepRun, record
from zimmer_sweeper.disk.volumes import FreeSpace, Roots, list_root, statvfs_free
from zimmer_sweeper.disk.watch import RECLAIM_JOB

log = logging.getLogger("zimmer.sweeper.orphans")

SWEEP_JOB = "orphan_clone_sweep"


class SnapshotUnavailable(Exception):
    """The listing or an ownership answer could not be had: the run deletes nothing."""


class OrphanCloneSweep:
    def __init__(self, *, bus: BusLink, reaper: CloneReaper, roots: Roots, records: DiskRecords,
                 metrics: DiskMetrics, clock: Clock, free_space: FreeSpace = statvfs_free):
        self._bus = bus
        self.reaper = reaper
        self.roots = roots
        self.records = records
        self.metrics = metrics
        self.clock = clock
        self.free_space = free_space
        self._reclaiming = asyncio.Lock()  # one reclaim at a time; the second then finds the space there

    # ---- the scheduled sweep ---------------------------------------------------------------

    async def sweep(self, budget: SweepBudget | None = None) -> SweepRun:
        budget = budget or SweepBudget(SWEEP_BUDGET_SECONDS, self.clock)
        run = SweepRun(SWEEP_JOB, self.clock.now())
        base = await self._base(run)
        if base is not None:
            free_before = self._probe(base)
            await self._reap(base, run)
            try:
                choice = await self._snapshot(base, run, age_bar=AGE_THRESHOLD, limit=BATCH_LIMIT)
            except SnapshotUnavailable as exc:
                run.mark("aborted", f"Nothing deleted: {exc}.")
            else:
                await self._remove_each(choice.candidates, run, budget)
            if run.counts["removed"] or run.counts["tombstones_reaped"]:  # the volume moves with others' writes too
                run.bytes_freed = max(0, self._probe(base) - free_before)
        await record(run, self.records, self.metrics, self.clock.now())
        return run

    async def _remove_each(self, candidates: list[DirEntry], run: SweepRun, budget: SweepBudget) -> None:
        for i, entry in enumerate(candidates):
            try:
                budget.check()
            except BudgetExhausted:
                unreached = [e.path for e in candidates[i:]]
                run.counts["unreached"] += len(unreached)
                run.mark("partial", f"Out of its {budget.seconds:.0f} s budget with {len(unreached)} left for the "
                                    "next tick.")
                log.warning("orphan clone sweep out of budget; left for the next tick",
                            extra=kv(job=run.job, unreached=unreached))
                return
            result = await self._remove(entry, run)
            if result is not None and result.outcome == "unanswered":
                run.counts["unreached"] += len(candidates) - i - 1
                run.mark("aborted", "Stopped: spot-gate stopped answering who owns a clone.")
                return

    # ---- the urgent gear ---------------------------------------------------------------------

    async def reclaim_space(self, target_free_bytes: int, budget: SweepBudget | None = None) -> ReclaimReport:
        async with self._reclaiming:
            return await self._reclaim(target_free_bytes, budget or SweepBudget(RECLAIM_BUDGET_SECONDS, self.clock))

    async def _reclaim(self, target: int, budget: SweepBudget) -> ReclaimReport:
        run = SweepRun(RECLAIM_JOB, self.clock.now())
        removed: list[RemovedDirectory] = []
        refused: list[str] = []
        failed: list[str] = []
        base = await self._base(run)
        free_before = free = self._probe(base) if base is not None else 0
        tombstones = 0
        exhausted = False
        if base is not None and free < target:
            tombstones = await self._reap(base, run)
            free = self._probe(base)
            if free < target:
                try:
                    choice = await self._snapshot(base, run, age_bar=PRESSURE_AGE_THRESHOLD,
                                                  limit=PRESSURE_BATCH_LIMIT)
                except SnapshotUnavailable as exc:
                    run.mark("aborted", f"No orphan removed: {exc}.")
                    choice = OrphanChoice()
                for i, entry in enumerate(choice.candidates):
                    if free >= target:
                        break
                    if budget.exhausted() or _deadline_passed():
                        exhausted = True
                        run.counts["unreached"] += len(choice.candidates) - i
                        log.warning("reclaim out of budget; left for the next reclaim",
                                    extra=kv(unreached=[e.path for e in choice.candidates[i:]]))
                        break
                    result = await self._remove(entry, run)
                    after = self._probe(base)
                    if result is not None and result.removed:
                        removed.append(RemovedDirectory(path=entry.path, bytes=max(0, after - free),
                                                        mtime=entry.mtime))
                    elif result is not None and result.outcome in ("refused", "unanswered"):
                        refused.append(entry.path)
                        if result.outcome == "unanswered":
                            run.mark("aborted", "Stopped: spot-gate stopped answering who owns a clone.")
                            break
                    elif result is None:
                        failed.append(entry.path)
                    free = after
        reached = base is not None and free >= target
        if removed or tombstones:
            run.bytes_freed = max(0, free - free_before)
        run.counts["reached"] = int(reached)
        sentence = _reclaim_sentence(base, target, free_before, free, tombstones, len(removed), len(refused),
                                     len(failed), exhausted, run)
        if not reached and run.outcome == "ok":
            run.mark("partial", sentence)
        else:
            run.notes.insert(0, sentence)
        await record(run, self.records, self.metrics, self.clock.now())
        return ReclaimReport(target_free_bytes=target, free_before=free_before, free_after=free, reached=reached,
                             tombstones_reaped=tombstones, removed=removed, refused=refused, failed=failed,
                             budget_exhausted=exhausted, sentence=sentence)

    # ---- shared -------------------------------------------------------------------------------

    async def _base(self, run: SweepRun) -> Path | None:
        base = self.roots.sweepable("clones")
        if base is None:
            run.mark("aborted", f"Clones base not swept: {self.roots.fence('clones').sentence}.")
        elif not base.is_dir():  # missing or unmounted: never read as "nothing there", nor probed
            run.mark("aborted", f"Clones base {base} is not a directory here; nothing deleted.")
            return None
        return base

    def _probe(self, base: Path) -> int:
        return self.free_space(base)

    async def _reap(self, base: Path, run: SweepRun) -> int:
        try:
            reap = await reap_tombstones(base, job=run.job)
        except OSError as exc:
            run.mark("failed", f"Tombstones not reaped: {exc}.")
            return 0
        run.counts["tombstones_reaped"] += reap.reaped
        run.counts["tombstones_failed"] += reap.failed
        run.counts["tombstones_left"] += reap.left
        return reap.reaped

    async def _snapshot(self, base: Path, run: SweepRun, *, age_bar: timedelta, limit: int) -> OrphanChoice:
        try:
            entries = await asyncio.to_thread(list_root, base)
        except OSError as exc:
            raise SnapshotUnavailable(f"the clones base {base} could not be listed ({exc})") from exc
        run.counts["examined"] += sum(1 for e in entries if e.is_dir and not is_tombstone(e.name))
        aged = aged_clone_directories(entries, now=self.clock.now(), age_bar=age_bar)
        run.counts["kept_young"] += run.counts["examined"] - len(aged)
        if not aged:
            return OrphanChoice()
        tracked = await self._tracked([e.name for e in aged], run)
        try:
            live = [c.clone_path for c in await clone_listing.all_clones(self._bus.bus, scope="live")]
        except Exception as exc:  # noqa: BLE001 - no live list, no deletion
            raise SnapshotUnavailable(f"spot-gate did not list the live clones ({str(exc)[:200]})") from exc
        choice = choose_orphans(aged, tracked=tracked, live_clone_paths=live, limit=limit)
        run.counts["kept_tracked"] += len(choice.tracked)
        run.counts["kept_live"] += len(choice.live)
        run.counts["kept_unanswered"] += len(choice.unanswered)
        run.counts["over_limit"] += len(choice.over_limit)
        return choice

    async def _tracked(self, names: list[str], run: SweepRun) -> dict[str, bool]:
        """Basename → whether any session row (any status) tracks it, asked unscoped of spot-gate."""
        tracked: dict[str, bool] = {}
        for start in range(0, len(names), OWNERSHIP_BATCH_MAX):
            batch = names[start:start + OWNERSHIP_BATCH_MAX]
            try:
                answer = await self._bus.bus.request(CLONE_OWNERSHIP, CloneOwnershipQuery(paths=batch))
            except Exception as exc:  # noqa: BLE001 - no answer, no deletion
                raise SnapshotUnavailable(f"spot-gate did not say who owns the clones ({str(exc)[:200]})") from exc
            for a in answer.answers:
                tracked[a.path] = bool(a.tracked_by)
                if a.drift:
                    run.counts["drift"] += 1
                    log.warning("clone path drift: kept by its basename while the stored clone_path points "
                                "elsewhere (#671)", extra=kv(basename=a.path, sessions=a.drift, job=run.job))
        return tracked

    async def _remove(self, entry: DirEntry, run: SweepRun) -> ReapResult | None:
        """One candidate through the guard; None when the removal raised (logged and skipped)."""
        try:
            result = await self.reaper.remove_clone(Path(entry.path), job=run.job)
        except Exception as exc:  # noqa: BLE001 - the run goes on with the next candidate
            run.counts["failed"] += 1
            log.warning("orphan clone removal failed; skipped", extra=kv(path=entry.path, job=run.job,
                                                                        error=repr(exc)[:300]))
            return None
        run.counts[{"removed": "removed", "refused": "refused", "unanswered": "unanswered",
                    "absent": "vanished", "fenced": "fenced"}[result.outcome]] += 1
        return result


def _deadline_passed() -> bool:
    """Served as an RPC, the reclaim also stops when its caller's deadline is about to pass."""
    return deadline.passed(margin=1.0)


def _reclaim_sentence(base: Path | None, target: int, before: int, after: int, tombstones: int, removed: int,
                      refused: int, failed: int, exhausted: bool, run: SweepRun) -> str:
    if base is None:
        return run.note
    if before >= target:
        return f"{after:,} bytes free already meets the {target:,}-byte target: nothing removed."
    what = f"reaped {tombstones} tombstone{'s' if tombstones != 1 else ''} and removed {removed} orphan " \
           f"clone{'s' if removed != 1 else ''}"
    extra = "".join([f"; {refused} refused by the guard" if refused else "",
                     f"; {failed} failed" if failed else "",
                     "; out of its budget" if exhausted else ""])
    verdict = "reached" if after >= target else "did not reach"
    return f"{verdict.capitalize()} the {target:,}-byte target: {what}{extra}; {before:,} → {after:,} bytes free."

