"""StaleCloneCleanupJob (seed 003, "A deleted session takes its directories with it" and "One job
owns the clones directory"): hourly, per host, on the maintenance lane.

1. The per-session pass: clones of archived sessions whose trash deadline passed, through the trash
   pipeline's own function (`reap_due_archived`, plugged in at wiring; it goes through the guard).
2. Deletion tombstones, in the clones base and in each swept root: they have no owner to reason
   about, which is all this job does in the clones base (orphan clones are one job's question).
3. The scratch and prompt-attachment orphan sweep, the safety net for sessions deleted by a path
   that skipped `session_deleted`: the directory name under each root is the session id, so an
   orphan is a set difference, and every fence of the seed's table holds: only names like a session
   id; list before asking, so a session created in between is in the answer; ask "which of these
   ids exist?", never "list every id"; younger than an hour survives; an empty sessions table
   aborts the whole sweep; at most 200 a root a run, the overflow logged; only the deployment that
   owns the volume; each id asked again immediately before its directory goes; every removal logged
   with path and mtime first. Scratch and attachments have no remote to come back from.

`remove_session_directories` is the other, immediate door: a deleted session's scratch and
attachment directories go as soon as `session_deleted` arrives (spot-gate publishes it after the
delete commits, so a delete that rolled back never reaches here).

Budgeted like the other maintenance sweeps: SWEEP_BUDGET_SECONDS checked at the top of each unit,
what is not reached logged at WARN for the next tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from zimmer_common.budget import BudgetExhausted, SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.contracts.clones import IDS_BATCH_MAX, SESSIONS_EXIST, SessionIdsAnswer, SessionIdsQuery
from zimmer_common.contracts.disk import RootName
from zimmer_common.logs import kv
from zimmer_common.paging import PageFn, page_or_log
from zimmer_sweeper.clones.domain import orphan_session_directories, session_directory_candidates
from zimmer_sweeper.disk.domain import SWEEP_BUDGET_SECONDS, DirEntry
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.removal import Removal, reap_tombstones, remove_atomically
from zimmer_sweeper.disk.sweep_run import SweepRun, record
from zimmer_sweeper.disk.volumes import FreeSpace, Roots, list_root, statvfs_free

log = logging.getLogger("zimmer.sweeper.stale")

JOB = "stale_clone_cleanup"
DELETED_JOB = "session_deleted"
SESSION_ROOTS: tuple[RootName, ...] = ("scratch", "attachments")
# The trash pipeline's per-session pass: reap the clones of archived sessions whose deadline passed,
# within the budget; returns counts to add to this run's record (`bytes_freed` to its bytes).
ArchivedReaper = Callable[[SweepBudget], Awaitable[Mapping[str, int]]]


class SweepAborted(Exception):
    """The whole scratch and attachment sweep stops, deleting nothing more."""


class StaleCloneCleanup:
    def __init__(self, *, bus: BusLink, roots: Roots, records: DiskRecords, metrics: DiskMetrics,
                 clock: Clock, free_space: FreeSpace = statvfs_free, reap_due_archived: ArchivedReaper | None = None,
                 page: PageFn | None = None):
        self._bus = bus
        self.page = page
        self.roots = roots
        self.records = records
        self.metrics = metrics
        self.clock = clock
        self.free_space = free_space
        self.reap_due_archived = reap_due_archived

    async def run(self, budget: SweepBudget | None = None) -> SweepRun:
        budget = budget or SweepBudget(SWEEP_BUDGET_SECONDS, self.clock)
        run = SweepRun(JOB, self.clock.now())
        await self._archived(run, budget)
        for name in ("clones", *SESSION_ROOTS):
            await self._reap(name, run)
        try:
            for name in SESSION_ROOTS:
                await self._sweep_root(name, run, budget)
        except SweepAborted as exc:
            run.mark("aborted", f"Scratch and attachment sweep aborted, nothing more deleted: {exc}.")
            log.warning("scratch and attachment sweep aborted", extra=kv(job=JOB, reason=str(exc)))
        except BudgetExhausted:
            pass  # _sweep_root logged what it left
        await record(run, self.records, self.metrics, self.clock.now())
        return run

    async def remove_session_directories(self, session_id: int) -> list[Removal]:
        """A deleted session's scratch and attachment directories, at once (behind the fence, and
        only if spot-gate confirms the id is gone). Raises when spot-gate cannot confirm it or a
        removal fails, so the event is retried."""
        targets = [(name, root / str(session_id)) for name in SESSION_ROOTS
                   if (root := self.roots.sweepable(name)) is not None]
        present = [(name, path) for name, path in targets if path.exists()]
        if not present:
            return []
        answer = await self._ask([session_id])
        if session_id in answer.existing:
            log.warning("session_deleted for a session spot-gate still has; its directories are kept",
                        extra=kv(session_id=session_id))
            return []
        removed = []
        for _name, path in present:
            removal = await remove_atomically(path, job=DELETED_JOB)
            if removal is not None:
                removed.append(removal)
        self.metrics.removed.labels(DELETED_JOB).inc(len(removed))
        return removed

    async def _archived(self, run: SweepRun, budget: SweepBudget) -> None:
        if self.reap_due_archived is None:
            return
        try:
            counts = await self.reap_due_archived(budget)
        except BudgetExhausted:
            run.mark("partial", "The archived sessions' clones were not all reached within the budget.")
            return
        except Exception as exc:  # noqa: BLE001 - the other passes still run
            await page_or_log(self.page, "Archived sessions' clone pass failed", f"{JOB}'s pass over archived "
                              "sessions' clones failed; the other passes ran, and the next tick retries it",
                              ["sweeper", JOB, "archived_pass"], snippet_source=exc, job=JOB)
            run.mark("failed", f"The archived sessions' clone pass failed: {exc!r}"[:300] + ".")
            return
        for key, value in counts.items():
            if key == "bytes_freed":
                run.bytes_freed += int(value)
            else:
                run.counts[f"archived_{key}"] += int(value)

    async def _reap(self, name: RootName, run: SweepRun) -> None:
        root = self.roots.sweepable(name)
        if root is None or not root.is_dir():
            return
        try:
            reap = await reap_tombstones(root, job=JOB)
        except OSError as exc:
            run.mark("failed", f"Tombstones under {root} not reaped: {exc}.")
            return
        run.counts["tombstones_reaped"] += reap.reaped
        run.counts["tombstones_failed"] += reap.failed
        run.counts["tombstones_left"] += reap.left

    async def _sweep_root(self, name: RootName, run: SweepRun, budget: SweepBudget) -> None:
        root = self.roots.path(name)
        if root is None:
            return
        if not self.roots.fence(name).sweepable:
            run.notes.append(f"{name.capitalize()} not swept: {self.roots.fence(name).sentence}.")
            return
        try:
            entries = await asyncio.to_thread(list_root, root)  # before asking: a session made meanwhile is in the answer
        except OSError as exc:
            run.mark("aborted", f"{name.capitalize()} root {root} could not be listed ({exc}); nothing deleted there.")
            return
        candidates = session_directory_candidates(entries, now=self.clock.now())
        run.counts[f"{name}_examined"] += len(entries)
        if not candidates:
            return
        existing: set[int] = set()
        for start in range(0, len(candidates), IDS_BATCH_MAX):
            answer = await self._ask_or_abort([sid for sid, _ in candidates[start:start + IDS_BATCH_MAX]])
            existing.update(answer.existing)
        choice = orphan_session_directories(candidates, existing)
        run.counts[f"{name}_kept_existing"] += len(candidates) - len(choice.orphans) - choice.overflow
        if choice.overflow:
            run.counts[f"{name}_overflow"] += choice.overflow
            log.warning("more orphaned session directories than one run removes; the rest go next hour",
                        extra=kv(job=JOB, root=str(root), overflow=choice.overflow, limit=len(choice.orphans)))
        free_before = self._free(root)
        removed_before = run.counts["removed"]
        try:
            for i, (sid, entry) in enumerate(choice.orphans):
                try:
                    budget.check()
                except BudgetExhausted:
                    unreached = [e.path for _, e in choice.orphans[i:]]
                    run.counts[f"{name}_unreached"] += len(unreached)
                    run.mark("partial", f"Out of its {budget.seconds:.0f} s budget with {len(unreached)} {name} "
                                        "directories left for the next tick.")
                    log.warning("stale clone cleanup out of budget; left for the next tick",
                                extra=kv(job=JOB, root=str(root), unreached=unreached))
                    raise
                await self._remove_orphan(name, sid, entry, run)
        finally:
            free_after = self._free(root)
            if free_before is not None and free_after is not None and run.counts["removed"] > removed_before:
                run.bytes_freed += max(0, free_after - free_before)

    async def _remove_orphan(self, name: RootName, sid: int, entry: DirEntry, run: SweepRun) -> None:
        # Asked again immediately before the bytes go, rather than trusting the snapshot.
        again = await self._ask_or_abort([sid])
        if sid in again.existing or sid in again.protected:
            run.counts[f"{name}_kept_on_recheck"] += 1
            return
        try:
            removal = await remove_atomically(Path(entry.path), job=JOB)
        except OSError as exc:
            run.counts[f"{name}_failed"] += 1
            log.warning("orphaned session directory not removed; skipped", extra=kv(
                job=JOB, path=entry.path, error=repr(exc)[:300]))
            return
        if removal is not None:
            run.counts[f"{name}_removed"] += 1
            run.counts["removed"] += 1

    async def _ask(self, ids: list[int]) -> SessionIdsAnswer:
        return await self._bus.bus.request(SESSIONS_EXIST, SessionIdsQuery(ids=ids))

    async def _ask_or_abort(self, ids: list[int]) -> SessionIdsAnswer:
        try:
            answer = await self._ask(ids)
        except Exception as exc:  # noqa: BLE001 - no answer, no deletion
            raise SweepAborted(f"spot-gate did not say which sessions exist ({str(exc)[:200]})") from exc
        if not answer.any_sessions:
            raise SweepAborted("spot-gate's sessions table is empty (a restore from nothing, or the wrong database)")
        return answer

    def _free(self, root: Path) -> int | None:
        try:
            return self.free_space(root)
        except OSError:
            return None
