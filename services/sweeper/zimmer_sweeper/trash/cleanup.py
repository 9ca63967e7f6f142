"""The trash pipeline on archive (the seed's DeferredCloneCleanupJob): the only thing that reclaims an
archived session's clone inside its reversible window.

The session_archived consumer only records the session (with its deadline, `trash_after` = archive
+ 4 days); this per-host job does the work, one record at a time, each attempt counted before it
starts: re-read whether the session is live again (an unarchived session is not reaped), the dirty
check under bounded git, preserve a dirty (or unknown) clone as a bundle and a filtered patch, the
mangled-tree guard, delete through the guard (CloneReaper asks who owns the path at the instant of
deletion), and the artifact question before the deadline may be cleared.

Re-running any step is safe: every branch re-reads the session and re-checks the disk, the artifacts
are renamed into place whole, and the guard asks again. Failures retry quietly (MAX_ATTEMPTS 5,
RETRY_WAIT 30 s): only the fifth is loud, because a cleanup cut short by a deploy resolves itself.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Row

from zimmer_common.budget import SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.contracts.clones import SESSIONS_EXIST, SessionIdsAnswer, SessionIdsQuery
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.paging import page_or_log
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.clones.guard import CloneReaper
from zimmer_sweeper.disk.domain import SWEEP_BUDGET_SECONDS
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.sweep_run import SweepRun, record
from zimmer_sweeper.disk.volumes import FreeSpace, Roots, statvfs_free
from zimmer_sweeper.trash import store
from zimmer_sweeper.trash.domain import (
    GIT_TIMEOUT_SECONDS,
    AfterFailure,
    Finding,
    State,
    after_failure,
    failure_log_level,
    restorable_left,
)
from zimmer_sweeper.trash.git_artifacts import Git, GitTimedOut, Preserved, artifacts_exist, dirty_check, is_repository, preserve
from zimmer_sweeper.trash.metrics import TrashMetrics

JOB = "deferred_clone_cleanup"
log = logging.getLogger("zimmer.sweeper.trash")


@dataclass
class TrashDeps:
    """What the trash jobs share: this host's roots and records, the guard, spot-gate over the bus."""

    units: UnitsOfWork
    bus: BusLink
    host: str
    roots: Roots
    guard: CloneReaper
    records: DiskRecords
    disk_metrics: DiskMetrics
    metrics: TrashMetrics
    pager: Pager | None
    clock: Clock
    free_space: FreeSpace = statvfs_free  # the host's reading of its volume (injectable, as the sweeps')
    git_timeout: float = GIT_TIMEOUT_SECONDS
    git_binary: str = "git"

    def artifacts_dir(self, session_id: int) -> Path | None:
        root = self.roots.path("artifacts")
        return root / str(session_id) if root else None

    def session_dirs(self, session_id: int) -> list[Path]:
        """The session's own directories besides its clone (scratch, prompt attachments): named by id."""
        return [root / str(session_id) for root in (self.roots.path("scratch"), self.roots.path("attachments")) if root]

    def storage_exists(self, session_id: int) -> bool:
        return any(p.exists() for p in self.session_dirs(session_id))

    async def protected(self, session_ids: list[int]) -> SessionIdsAnswer:
        """Spot-gate's answer, now: which of these sessions exist and which are live or reap-protected.
        Raises when there is none (the caller retries; nothing is deleted on a guess)."""
        return await self.bus.bus.request(SESSIONS_EXIST, SessionIdsQuery(ids=session_ids))

    def free_bytes(self) -> int | None:
        base = self.roots.path("clones")
        try:
            return self.free_space(base) if base else None
        except OSError:
            return None


class CleanupFailed(Exception):
    """An attempt that cannot finish now (retried quietly until the attempts run out)."""


class DeferredCloneCleanup:
    def __init__(self, deps: TrashDeps):
        self.d = deps

    async def run(self, budget: SweepBudget | None = None) -> SweepRun:
        """Work every due pending record, within the sweeps' 5-minute budget checked per session;
        what is not reached waits for the next tick (its attempt was not counted). A run that found
        nothing due writes no run record: it ticks every 30 seconds."""
        budget = budget or SweepBudget(SWEEP_BUDGET_SECONDS, self.d.clock)
        run = SweepRun(JOB, self.d.clock.now())
        while True:
            if budget.exhausted():
                run.counts["deferred"] = await self._due_count()
                log.warning("deferred clone cleanup stopped at its budget; the rest wait for the next tick",
                            extra=kv(host=self.d.host, deferred=run.counts["deferred"], budget_seconds=budget.seconds))
                run.mark("partial", f"{run.counts['deferred']} due session(s) left for the next tick at the budget.")
                break
            async with self.d.units.begin() as uow:
                claim = await store.claim_cleanup(uow.conn, host=self.d.host, now=self.d.clock.now())
            if claim is None:
                break
            row, may_try = claim
            run.counts["examined"] += 1
            if not may_try:
                await self._exhausted(row, "its attempts were spent by runs that never finished (killed or cut "
                                           "short each time)", run)
                continue
            await self.clean_one(row, run)
        if run.counts:
            c = run.counts
            run.notes.insert(0, f"{c['examined']} archived session(s): {c['trashed'] + c['done']} clone(s) removed, "
                                f"{c['preserved']} preserved, {c['mangled']} defused, {c['held']} held, "
                                f"{c['failed']} to retry, {c['exhausted']} exhausted.")
            await record(run, self.d.records, self.d.disk_metrics, self.d.clock.now())
        return run

    async def clean_one(self, row: Row[Any], run: SweepRun) -> None:
        try:
            state, fields = await self._attempt(row, run)
        except Exception as exc:  # noqa: BLE001 - any failure is this attempt's: quiet until the last
            await self._failed(row, exc, run)
            return
        async with self.d.units.begin() as uow:
            if not await store.finish_cleanup(uow.conn, row, now=self.d.clock.now(), state=state.value, **fields):
                log.info("trash record changed while its cleanup ran (unarchived or archived again); left to it",
                         extra=kv(session_id=row.session_id))
                return
        run.counts[state.value] += 1
        run.counts["removed"] += bool(fields.get("clone_removed"))
        run.bytes_freed += fields.get("freed_bytes", 0)
        self.d.metrics.cleanups.labels(state.value).inc()

    async def _attempt(self, row: Row[Any], run: SweepRun) -> tuple[State, dict[str, Any]]:
        sid = row.session_id
        answer = await self.d.protected([sid])
        if not answer.any_sessions:
            raise CleanupFailed("spot-gate's sessions table is empty (a restore from nothing, or the wrong "
                                "database): nothing is reaped on its word")
        if sid in answer.protected:
            log.info("archived session is live again; its clone is not trash", extra=kv(session_id=sid))
            return State.CANCELLED, dict(outcome="the session was live again before its clone was reaped",
                                         trash_after=None)
        clone = Path(row.clone_path) if row.clone_path else None
        fields: dict[str, Any] = {}
        if clone is None or not await asyncio.to_thread(clone.exists):
            fields["finding"] = Finding.ABSENT.value
        elif not await asyncio.to_thread(is_repository, clone):
            return self._hold(row, Finding.NOT_A_REPOSITORY, "the clone directory holds no git repository: nothing "
                                                             "git can preserve, so it is kept for the reversible "
                                                             "window")
        else:
            git = Git(clone, timeout=self.d.git_timeout, binary=self.d.git_binary)
            finding = await dirty_check(git)
            fields["finding"] = finding.value
            if finding in (Finding.DIRTY, Finding.UNKNOWN):
                dest = self.d.artifacts_dir(sid)
                if dest is None:
                    return self._hold(row, finding, "no artifacts directory is configured on this host, so its "
                                                    "unpreserved work is kept on disk for the reversible window",
                                      fields)
                try:
                    preserved = await preserve(git, dest, now=self.d.clock.now())
                except GitTimedOut as exc:
                    self.d.metrics.git_timeouts.inc()
                    return self._hold(row, Finding.UNKNOWN, f"git timed out, so the clone cannot be preserved and "
                                                            f"is kept for the reversible window ({exc})", fields)
                run.counts["preserved"] += 1
                fields.update(self._preserved(row, preserved, dest))
                if preserved.mangled:
                    run.counts["mangled"] += 1
                    await self._defused(row, preserved)
            free_before = self.d.free_bytes()
            removal = await self.d.guard.remove_clone(clone, job=JOB)
            fields["freed_bytes"] = freed_between(free_before, self.d.free_bytes())
            if removal.outcome in ("refused", "fenced"):
                return self._hold(row, Finding(fields["finding"]), f"its clone was not deleted: {removal.reason}",
                                  fields)
            if removal.outcome == "unanswered":
                raise CleanupFailed(removal.reason)
            fields["clone_removed"] = removal.outcome == "removed"
        return self._finalized(row, fields)

    def _finalized(self, row: Row[Any], fields: dict[str, Any]) -> tuple[State, dict[str, Any]]:
        """The artifact question: the deadline is cleared only when neither the preserved bundle and
        patch nor the session's scratch and attachments are left."""
        sid = row.session_id
        kept = artifacts_exist(self.d.artifacts_dir(sid))
        gone = "clone removed" if fields.get("clone_removed") else "no clone on disk"
        if restorable_left(artifacts_exist=kept, session_storage_exists=self.d.storage_exists(sid)):
            what = "its preserved work" if kept else "its scratch and attachments"
            return State.TRASHED, dict(fields, outcome=f"{gone}; {what} kept until the deadline")
        return State.DONE, dict(fields, trash_after=None, outcome=f"{gone}; nothing restorable was left")

    def _hold(self, row: Row[Any], finding: Finding, why: str,
              fields: dict[str, Any] | None = None) -> tuple[State, dict[str, Any]]:
        """Holding a clone costs disk for four days; the other answer destroys the only copy of
        someone's unpushed work. EmptyTrash takes it at the deadline."""
        log.warning("clone held for the reversible window", extra=kv(session_id=row.session_id,
                                                                     clone_path=row.clone_path, reason=why))
        return State.HELD, dict(fields or {}, finding=finding.value, outcome=why)

    def _preserved(self, row: Row[Any], preserved: Preserved, dest: Path) -> dict[str, Any]:
        self.d.metrics.preserved_bytes.inc(preserved.bytes)
        log.info("clone preserved", extra=kv(session_id=row.session_id, artifacts=str(dest),
                                             bundle=preserved.manifest.bundle, patch=preserved.manifest.patch,
                                             bytes=preserved.bytes))
        return dict(artifacts_path=str(dest), bundle_preserved=preserved.manifest.bundle,
                    patch_preserved=preserved.manifest.patch, preserved_bytes=preserved.bytes,
                    finding=Finding.MANGLED.value if preserved.mangled else Finding.DIRTY.value)

    async def _defused(self, row: Row[Any], preserved: Preserved) -> None:
        """A tree of only deletions is self-healing once dropped, so it is WARN, never ERROR: nine
        pages in one afternoon were nine sessions that archived fine. The marker makes the rate
        countable long after the line has aged out."""
        dropped = preserved.manifest.dropped_deletions
        log.warning("mangled clone defused: a working tree of only deletions of tracked files was not preserved; "
                    "the bundle still travels", extra=kv(session_id=row.session_id, clone_path=row.clone_path,
                                                         dropped_deletions=dropped))
        async with self.d.units.begin() as uow:
            await store.record_defusal(uow.conn, session_id=row.session_id, archived_at=row.archived_at,
                                       host=self.d.host, dropped_deletions=dropped, now=self.d.clock.now())
        self.d.metrics.defused.inc()
        self.d.metrics.dropped_deletions.inc(dropped)

    async def _failed(self, row: Row[Any], exc: Exception, run: SweepRun) -> None:
        error = f"{type(exc).__name__}: {exc}"[:2000]
        if after_failure(row.attempts) is AfterFailure.EXHAUSTED:
            await self._exhausted(row, error, run)
            return
        run.counts["failed"] += 1
        run.mark("partial", f"session {row.session_id}'s attempt {row.attempts} failed and is retried.")
        self.d.metrics.attempt_failures.inc()
        async with self.d.units.begin() as uow:
            await store.finish_cleanup(uow.conn, row, now=self.d.clock.now(), last_error=error)
        level = logging.INFO if failure_log_level(row.attempts) == "info" else logging.WARNING
        log.log(level, "clone cleanup attempt failed; retried", extra=kv(
            session_id=row.session_id, attempt=row.attempts, next_attempt_at=row.next_attempt_at.isoformat(),
            error=error))

    async def _exhausted(self, row: Row[Any], error: str, run: SweepRun) -> None:
        """The one loud outcome: five failures are a real problem. The clone then waits for EmptyTrash
        and the hourly stale reap after its deadline."""
        run.counts["exhausted"] += 1
        run.mark("partial", f"session {row.session_id}'s cleanup exhausted its attempts (paged).")
        self.d.metrics.cleanups.labels(State.EXHAUSTED.value).inc()
        async with self.d.units.begin() as uow:
            await store.finish_cleanup(uow.conn, row, now=self.d.clock.now(), state=State.EXHAUSTED.value,
                                       last_error=error, outcome="the cleanup failed on every attempt")
        # The raw error (git's stderr, a path) goes through the snippet builder into its own field,
        # redacted and bounded; the prose names what happened (seed 003 "The log snippet").
        message = (f"the clone cleanup of archived session {row.session_id} failed {row.attempts} times; its clone "
                   f"waits for EmptyTrash after {row.trash_after}. The last error is in the snippet.")
        pager = self.d.pager
        if pager is None:
            await page_or_log(None, "Clone cleanup failed", message, ["sweeper", JOB, "exhausted"],
                              session_id=row.session_id)
            return
        await pager.report(title="Clone cleanup failed", fingerprint=["sweeper", JOB, "exhausted"], message=message,
                           context={"session_id": row.session_id, "host": self.d.host, "clone_path": row.clone_path,
                                    "attempts": row.attempts}, snippet_source=error)

    async def _due_count(self) -> int:
        async with self.d.units.read() as conn:
            return await store.count_due(conn, host=self.d.host, now=self.d.clock.now())


def freed_between(free_before: int | None, free_after: int | None) -> int:
    """Bytes a removal gave back, read off the volume (never summed per file: the volume is what fills)."""
    if free_before is None or free_after is None:
        return 0
    return max(0, free_after - free_before)
