"""The restore on unarchive: the session_unarchived consumer records the request; the per-host cleanup
job (restores first, then due cleanups, so the two never work one clone at once) rebuilds the clone
at its path from what the pipeline preserved, then tells spot-gate (`unarchive_restored`), which drops
the session's unarchive stamp.

The clone is built beside its path (`<clone>.restoring-<session id>`) and renamed into place whole,
so a failed or interrupted restore never leaves a half-tree wearing the clone's name. A failed
restore logs ERROR and pages: unlike the archive side's refusals, these are the paths that can still
leave a session broken. The preserved artifacts are deleted only after a restore that worked.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import Row

from zimmer_common.contracts.clones import UNARCHIVE_RESTORED, UnarchiveRestored
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.logs import kv
from zimmer_common.paging import page_or_log
from zimmer_sweeper.disk.removal import remove_atomically
from zimmer_sweeper.disk.sweep_run import SweepRun, record
from zimmer_sweeper.trash import store
from zimmer_sweeper.trash.cleanup import TrashDeps
from zimmer_sweeper.trash.domain import State
from zimmer_sweeper.trash.git_artifacts import GitFailed, GitTimedOut, read_manifest, rebuild_clone

JOB = "unarchive_restore"
Outcome = Literal["restored", "nothing_preserved", "failed"]
log = logging.getLogger("zimmer.sweeper.restore")


class UnarchiveRestore:
    def __init__(self, deps: TrashDeps):
        self.d = deps

    async def run(self) -> SweepRun:
        """Every restore this host owes: done (once) and reported (until spot-gate has the answer).
        A run that owed nothing writes no run record (it rides the cleanup's 30-second tick)."""
        run = SweepRun(JOB, self.d.clock.now())
        async with self.d.units.read() as conn:
            rows = await store.restores_due(conn, host=self.d.host)
        for row in rows:
            if row.restore_outcome is None:
                outcome, detail = await self._restore(row)
                async with self.d.units.begin() as uow:
                    if not await store.finish_restore(uow.conn, row, now=self.d.clock.now(), restore_outcome=outcome,
                                                      restore_detail=detail[:4000]):
                        continue  # archived again meanwhile: the new cycle owns the record
                run.counts[outcome] += 1
                self.d.metrics.restores.labels(outcome).inc()
                if outcome == "failed":
                    run.mark("partial", f"session {row.session_id}'s restore failed (paged).")
                    await self._page(row, detail)
            else:
                outcome, detail = row.restore_outcome, row.restore_detail
            if not await self._report(row, outcome, detail):
                run.counts["unreported"] += 1
                run.mark("partial", f"spot-gate was not told of session {row.session_id}'s restore; asked again.")
        if rows:
            c = run.counts
            run.notes.insert(0, f"{len(rows)} unarchived session(s): {c['restored']} restored, "
                                f"{c['nothing_preserved']} with nothing preserved, {c['failed']} failed.")
            await record(run, self.d.records, self.d.disk_metrics, self.d.clock.now())
        return run

    async def _restore(self, row: Row[Any]) -> tuple[Outcome, str]:
        if not row.clone_path:
            return "nothing_preserved", "the session has no clone path: there is nothing to rebuild"
        clone = Path(row.clone_path)
        dest = self.d.artifacts_dir(row.session_id)
        manifest = read_manifest(dest) if dest else None
        if await asyncio.to_thread(os.path.lexists, clone):
            if not row.clone_removed:
                kept = f"; what was preserved is kept at {dest}" if manifest else ""
                return "restored", f"the clone was never removed: it is still at {clone}{kept}"
            # This cycle deleted the clone, so whatever is there now was built by someone else.
            return "failed", (f"a directory is already at {clone}, built after this sweeper removed the clone; the "
                              f"preserved work at {dest} was not replayed onto it and is kept")
        if manifest is None:
            return "nothing_preserved", (f"no clone at {clone} and nothing preserved for it (it was clean, so its "
                                         "remote holds everything, or its trash was emptied)")
        assert dest is not None
        staging = clone.with_name(f"{clone.name}.restoring-{row.session_id}")
        await self.d.guard.discard_created(staging, job=JOB)  # an interrupted attempt's leftovers
        try:
            said = await rebuild_clone(dest, staging, manifest, timeout=self.d.git_timeout, binary=self.d.git_binary)
            await asyncio.to_thread(os.rename, staging, clone)
        except (GitTimedOut, GitFailed, OSError) as exc:
            await self.d.guard.discard_created(staging, job=JOB)
            return "failed", f"rebuilding {clone} from {dest} failed ({exc}); the preserved work is kept there"
        log.info("clone restored from what was preserved", extra=kv(session_id=row.session_id, clone_path=str(clone),
                                                                    detail=said))
        await remove_atomically(dest, job=JOB)  # it is in the clone now
        return "restored", f"{said} at {clone}"

    async def _report(self, row: Row[Any], outcome: Outcome, detail: str) -> bool:
        """Tell spot-gate; on no answer the record stays `restoring` and the next tick asks again."""
        try:
            await self.d.bus.bus.request(UNARCHIVE_RESTORED, UnarchiveRestored(
                session_id=row.session_id, outcome=outcome, detail=detail[:4000]))
        except Exception as exc:  # noqa: BLE001 - no answer is "ask again"; a deleted session needs none
            if not (isinstance(exc, ZimmerError) and exc.code == ErrorCode.NOT_FOUND):
                log.warning("restore finished but spot-gate was not told; asked again next tick",
                            extra=kv(session_id=row.session_id, error=str(exc)[:300]))
                return False
        async with self.d.units.begin() as uow:
            await store.finish_restore(uow.conn, row, now=self.d.clock.now(), state=State.RESTORED.value)
        return True

    async def _page(self, row: Row[Any], detail: str) -> None:
        pager = self.d.pager
        if pager is None:
            await page_or_log(None, "Unarchive restore failed", f"session {row.session_id}'s clone was not restored",
                              ["sweeper", JOB, "failed"], session_id=row.session_id)
            return
        # The raw detail (git's stderr) goes through the snippet builder, redacted and bounded.
        await pager.report(title="Unarchive restore failed", fingerprint=["sweeper", JOB, "failed"],
                           message=f"session {row.session_id} was unarchived but its clone was not restored; "
                                   "why is in the snippet.",
                           context={"session_id": row.session_id, "host": self.d.host, "clone_path": row.clone_path},
                           snippet_source=detail)
