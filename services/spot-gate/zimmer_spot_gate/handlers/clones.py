"""The sweeper's questions about sessions' clones, and the runtime's clone reports (seed 003; the
contracts are zimmer_common.contracts.clones). Each handler is one transaction over the store.

These answers decide deletions: they read every row whatever its status, and protection is the
store's one `REAP_PROTECTED` expression (live, or an unarchive stamped within 30 minutes)."""

from __future__ import annotations

import logging
from datetime import datetime
from itertools import groupby

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.clones import (
    CloneOwnershipAnswer,
    CloneOwnershipQuery,
    CloneReport,
    SessionClone,
    SessionClonesPage,
    SessionClonesQuery,
    SessionIdsAnswer,
    SessionIdsQuery,
    SessionWarning,
    SessionWarningIn,
    StampCleared,
    UnarchiveRestored,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.logs import kv
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.clones import (
    Match,
    ReportOutcome,
    StoredClone,
    asked_path_problem,
    judge_report,
    ownership,
    report_problem,
)
from zimmer_spot_gate.store import clones as store

log = logging.getLogger("zimmer.spot_gate.clones")


def _not_found(session_id: int) -> ZimmerError:
    return ZimmerError(ErrorCode.NOT_FOUND, f"session {session_id} does not exist", {"session_id": session_id})


class Clones:
    def __init__(self, units: UnitsOfWork):
        self.units = units

    # ---- ingest ---------------------------------------------------------------------------

    async def record_report(self, conn: AsyncConnection, report: CloneReport,
                            sent_at: datetime) -> ReportOutcome | None:
        """Store what the runtime says of a session's clone, in the consumer's transaction.
        Idempotent: the same clone again writes nothing, and a report older than the one stored
        (a late redelivery) never rolls a re-clone back. A report for a session that does not
        exist (deleted since) is logged and dropped: waiting will not bring the row back."""
        problem = report_problem(report.clone_path, report.agent_subdirectory)
        if problem:
            raise ZimmerError(ErrorCode.INVALID, f"clone report for session {report.session_id}: {problem}",
                              {"field": "clone_path" if problem.startswith("clone_path") else "agent_subdirectory"})
        stored = await store.stored_clone(conn, report.session_id)
        if stored is None:
            log.warning("clone report for a session that does not exist; dropped",
                        extra=kv(session_id=report.session_id, clone_path=report.clone_path))
            return None
        reported = StoredClone(report.clone_path, report.agent_subdirectory or None, report.scaffolded, report.host,
                               report.at or sent_at)
        outcome = judge_report(stored, reported)
        if outcome is ReportOutcome.RECORDED:
            await store.record_clone(conn, report.session_id, reported)
        elif outcome is ReportOutcome.STALE:
            log.info("clone report older than the one stored; kept the newer",
                     extra=kv(session_id=report.session_id, clone_path=report.clone_path,
                              stored_path=stored.clone_path))
        return outcome

    # ---- the sweeper's questions ------------------------------------------------------------

    async def ownership(self, q: CloneOwnershipQuery) -> CloneOwnershipAnswer:
        bad = [(i, problem) for i, path in enumerate(q.paths) if (problem := asked_path_problem(path))]
        if bad:
            i, problem = bad[0]
            raise ZimmerError(ErrorCode.INVALID, f"paths[{i}] {problem}",
                              {"field": "paths", "index": i, "refused": len(bad)})
        async with self.units.read() as conn:
            rows = await store.ownership(conn, q.paths)
        answers = []
        for _ord, group in groupby(rows, key=lambda r: r.ord):
            found = list(group)
            matches = [Match(r.id, r.clone_path, bool(r.protected)) for r in found if r.id is not None]
            answers.append(ownership(found[0].path, found[0].basename, matches))
        return CloneOwnershipAnswer(answers=answers)

    async def sessions_exist(self, q: SessionIdsQuery) -> SessionIdsAnswer:
        async with self.units.read() as conn:
            rows = await store.existing(conn, sorted(set(q.ids)))
            # A row found is a row there: only an answer with none asks whether any exists.
            any_sessions = bool(rows) or await store.any_sessions(conn)
        return SessionIdsAnswer(existing=[r.id for r in rows], protected=[r.id for r in rows if r.protected],
                                any_sessions=any_sessions)

    async def session_clones(self, q: SessionClonesQuery) -> SessionClonesPage:
        async with self.units.read() as conn:
            rows = await store.clones_page(conn, live_only=q.scope == "live", host=q.host, after_id=q.after_id,
                                           limit=q.limit)
        page = rows[:q.limit]
        return SessionClonesPage(clones=[SessionClone(**r._mapping) for r in page],
                                 next_after_id=page[-1].session_id if len(rows) > q.limit else None)

    async def record_warning(self, req: SessionWarningIn) -> SessionWarning:
        async with self.units.begin() as uow:
            row = await store.record_warning(uow.conn, req.session_id, req.kind, req.message, req.source)
        if row is None:
            raise _not_found(req.session_id)
        log.warning("warning left on a session", extra=kv(session_id=req.session_id, kind=req.kind,
                                                         source=req.source))
        return SessionWarning(**row._mapping)

    async def unarchive_restored(self, req: UnarchiveRestored) -> StampCleared:
        """The sweeper finished restoring an unarchived session's clone (whatever came of it): the
        stamp that protected the clone while it was rebuilt is dropped."""
        async with self.units.begin() as uow:
            cleared = await store.clear_unarchive_stamp(uow.conn, req.session_id)
        if cleared is None:
            raise _not_found(req.session_id)
        (log.warning if req.outcome == "failed" else log.info)(
            "unarchive restore finished; stamp dropped",
            extra=kv(session_id=req.session_id, outcome=req.outcome, detail=req.detail, had_stamp=cleared))
        return StampCleared(session_id=req.session_id, cleared=cleared)
