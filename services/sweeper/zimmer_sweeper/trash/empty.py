"""EmptyTrash (per host, hourly): once an archived session's reversible window has passed, take what
the trash still holds of it on this disk: the preserved bundle and patch, its scratch directory,
its prompt attachments, and a clone still there (held, or never cleaned) through the guard.

Scratch, attachments and preserved artifacts have no remote to come back from, and the guard cannot
cover them (they are keyed by session, not by a path a session owns), so spot-gate is asked whether
the session is reap-protected immediately before each session's directories go, never from a
snapshot taken at the top of the run. A root inside the durable volume is emptied only by the
deployment that owns it (the fence): these directories are named by session id, and another
database's ids would name a live deployment's directories.

The run holds its maintenance thread for at most SWEEP_BUDGET_SECONDS (5 min) plus one session,
checked at the top of each; what it does not reach is logged at WARN and waits for the next tick.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Row

from zimmer_common.budget import SweepBudget
from zimmer_common.contracts.clones import IDS_BATCH_MAX
from zimmer_common.contracts.disk import RootName
from zimmer_common.logs import kv
from zimmer_sweeper.disk.domain import SWEEP_BUDGET_SECONDS
from zimmer_sweeper.disk.removal import remove_atomically
from zimmer_sweeper.disk.sweep_run import SweepRun, record
from zimmer_sweeper.trash import store
from zimmer_sweeper.trash.cleanup import TrashDeps, freed_between
from zimmer_sweeper.trash.domain import State

JOB = "empty_trash"
# The per-session directories named by id that the trash holds besides the clone.
SESSION_ROOTS: tuple[RootName, ...] = ("artifacts", "scratch", "attachments")
log = logging.getLogger("zimmer.sweeper.empty_trash")


class KeepForNow(Exception):
    """This session's trash cannot be emptied now (no answer, a removal that failed): next tick."""


class EmptyTrash:
    def __init__(self, deps: TrashDeps):
        self.d = deps

    async def run(self, budget: SweepBudget | None = None) -> SweepRun:
        budget = budget or SweepBudget(SWEEP_BUDGET_SECONDS, self.d.clock)
        run = SweepRun(JOB, self.d.clock.now())
        async with self.d.units.read() as conn:
            due = await store.expired(conn, host=self.d.host, now=self.d.clock.now(), limit=IDS_BATCH_MAX)
        for n, row in enumerate(due):
            if budget.exhausted():
                run.counts["deferred"] = len(due) - n
                self.d.metrics.emptied.labels("deferred").inc(len(due) - n)
                log.warning("empty trash stopped at its budget; the rest wait for the next tick",
                            extra=kv(host=self.d.host, deferred=len(due) - n, budget_seconds=budget.seconds))
                run.mark("partial", f"{len(due) - n} session(s) past their deadline left for the next tick.")
                break
            run.counts["examined"] += 1
            try:
                await self._empty_one(row, run)
            except KeepForNow as exc:
                run.counts["failed"] += 1
                run.mark("partial", f"session {row.session_id}: {exc}")
                log.warning("trash not emptied; the next tick tries again",
                            extra=kv(session_id=row.session_id, reason=str(exc)))
        c = run.counts
        run.notes.insert(0, f"{c['examined']} session(s) past their deadline: {c['emptied']} emptied, "
                            f"{c['kept']} kept (reap-protected), {c['failed']} to retry.")
        await record(run, self.d.records, self.d.disk_metrics, self.d.clock.now())
        return run

    async def _empty_one(self, row: Row[Any], run: SweepRun) -> None:
        sid = row.session_id
        try:
            answer = await self.d.protected([sid])
        except Exception as exc:  # noqa: BLE001 - no answer deletes nothing
            raise KeepForNow(f"spot-gate did not say whether it is reap-protected ({exc})") from exc
        if not answer.any_sessions:
            raise KeepForNow("spot-gate's sessions table is empty (a restore from nothing, or the wrong database)")
        if sid in answer.protected:
            log.info("trash past its deadline kept: the session is reap-protected (live, or being unarchived)",
                     extra=kv(session_id=sid))
            await self._finish(row, run, State.KEPT, "reap-protected at its deadline: its directories are not trash")
            return
        free_before = self.d.free_bytes()
        gone, fenced = [], []
        for name, path in self._session_directories(sid):
            if self.d.roots.sweepable(name) is None:
                fenced.append(f"{name} ({self.d.roots.fence(name).sentence})")
                continue
            try:
                if await remove_atomically(path, job=JOB) is not None:
                    gone.append(name)
            except OSError as exc:
                raise KeepForNow(f"its {name} directory {path} could not be removed ({exc!r})") from exc
        if row.clone_path and await asyncio.to_thread(os.path.lexists, row.clone_path):
            reaped = await self.d.guard.remove_clone(Path(row.clone_path), job=JOB)
            if reaped.outcome in ("refused", "unanswered"):
                raise KeepForNow(f"the guard kept its clone: {reaped.reason}")
            if reaped.removed:
                gone.append("clone")
            elif reaped.outcome == "fenced":
                fenced.append(f"clone ({reaped.reason})")
        run.bytes_freed += freed_between(free_before, self.d.free_bytes())
        run.counts["removed"] += len(gone)
        run.counts["fenced"] += len(fenced)
        said = f"emptied after its deadline: {', '.join(gone) or 'nothing was left on disk'}"
        await self._finish(row, run, State.EMPTIED, said + (f"; not this deployment's to delete: {'; '.join(fenced)}"
                                                            if fenced else ""))

    def _session_directories(self, session_id: int) -> list[tuple[RootName, Path]]:
        out = []
        for name in SESSION_ROOTS:
            root = self.d.roots.path(name)
            if root is not None:
                out.append((name, root / str(session_id)))
        return out

    async def _finish(self, row: Row[Any], run: SweepRun, state: State, outcome: str) -> None:
        async with self.d.units.begin() as uow:
            if not await store.finish_expired(uow.conn, row, now=self.d.clock.now(), state=state.value,
                                              outcome=outcome[:2000]):
                return  # unarchived or archived again meanwhile: the new event owns the record
        run.counts[state.value] += 1
        self.d.metrics.emptied.labels(state.value).inc()
