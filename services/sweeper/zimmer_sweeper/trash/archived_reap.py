"""The hourly StaleCloneCleanup's archived-session scope: clones of archived sessions still on this
disk, which the trash pipeline is not already keeping for a reversible window.

Spot-gate lists this host's clones with their status; for each archived one still on disk, and not
reap-protected, the session is read again (its version) and the trash record decides
(`archived_clone_action`): an archive the pipeline never saw (an event lost, a session archived
before this existed, or archived again while the event is in flight) is adopted into the pipeline,
so it still gets its four days and its preservation; a clone whose deadline passed, or whose cycle
ended with nothing to keep, is reaped through the guard; anything else is left to the pipeline.
StaleCloneCleanup calls `sweep` with its own budget (plugged in as its `reap_due_archived`, which
prefixes these counts with `archived_`); the unit of work is one clone.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from zimmer_common.budget import SweepBudget
from zimmer_common.contracts.clones import SESSION_CLONES, SessionClone, SessionClonesQuery
from zimmer_common.contracts.spot import GET_SESSION, SessionRef
from zimmer_common.logs import kv
from zimmer_sweeper.trash import store
from zimmer_sweeper.trash.cleanup import TrashDeps, freed_between
from zimmer_sweeper.trash.domain import ArchivedCloneAction, RecordView, State, archived_clone_action

JOB = "stale_clone_cleanup"
log = logging.getLogger("zimmer.sweeper.archived_reap")


class ArchivedCloneReap:
    def __init__(self, deps: TrashDeps, *, on_adopted: Callable[[], None] = lambda: None):
        self.d = deps
        self.on_adopted = on_adopted  # asks for a deferred_clone_cleanup run now

    async def sweep(self, budget: SweepBudget) -> Mapping[str, int]:
        """This pass's counts (`bytes_freed` among them). Raises when spot-gate's listing cannot be
        had: nothing is decided on a guess, and the caller's run says so."""
        counts: Counter[str] = Counter()
        after_id: int | None = 0
        while after_id is not None and not budget.exhausted():
            page = await self.d.bus.bus.request(SESSION_CLONES, SessionClonesQuery(scope="all", host=self.d.host,
                                                                                   after_id=after_id))
            for clone in page.clones:
                if budget.exhausted():
                    counts["deferred"] += 1
                    continue
                if clone.status != "archived" or clone.reap_protected:
                    continue
                if not await asyncio.to_thread(os.path.lexists, clone.clone_path):
                    continue
                counts["on_disk"] += 1
                counts["bytes_freed"] += await self._one(clone, counts)
            after_id = page.next_after_id
        if counts["deferred"] or after_id is not None:
            log.warning("archived clone reap stopped at its budget; the rest wait for the next tick",
                        extra=kv(host=self.d.host, deferred=counts["deferred"], budget_seconds=budget.seconds))
        if counts["adopted"]:
            self.on_adopted()
        return counts

    async def _one(self, clone: SessionClone, counts: Counter[str]) -> int:
        sid = clone.session_id
        try:
            view = await self.d.bus.bus.request(GET_SESSION, SessionRef(session_id=sid))
        except Exception as exc:  # noqa: BLE001 - not answered: nothing decided for it this hour
            counts["unread"] += 1
            log.warning("archived clone left: its session could not be read", extra=kv(session_id=sid,
                                                                                      error=str(exc)[:300]))
            return 0
        async with self.d.units.read() as conn:
            row = (await store.records_for(conn, [sid])).get(sid)
        record = RecordView(State(row.state), row.trash_after, row.session_version) if row is not None else None
        action = archived_clone_action(record, session_version=view.version, now=self.d.clock.now())
        if action is ArchivedCloneAction.LEAVE:
            counts["left_to_pipeline"] += 1
            return 0
        if action is ArchivedCloneAction.ADOPT:
            if view.status != "archived" or view.archived_at is None:
                return 0  # unarchived since the listing
            async with self.d.units.begin() as uow:
                adopted = await store.record_archive(uow.conn, session_id=sid, host=self.d.host,
                                                     clone_path=view.clone_path or clone.clone_path,
                                                     archived_at=view.archived_at, version=view.version,
                                                     now=self.d.clock.now())
            if adopted:
                counts["adopted"] += 1
                log.info("archived clone adopted into the trash pipeline", extra=kv(session_id=sid,
                                                                                    clone_path=clone.clone_path))
            return 0
        free_before = self.d.free_bytes()
        reaped = await self.d.guard.remove_clone(Path(clone.clone_path), job=JOB)
        counts[reaped.outcome] += 1
        return freed_between(free_before, self.d.free_bytes()) if reaped.removed else 0
