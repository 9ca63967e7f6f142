"""Deleting a session (an operator's DELETE /api/v1/sessions/{id}; seed 003 "A deleted session takes
its directories with it"): a different door from the trash. The row goes at once with its own
history (enqueued messages, gate decisions, wakes, warnings: the foreign keys cascade), its
children and forks lose their link to it, and `session_deleted` announces it in the same
transaction, so the sweeper takes the directories keyed by its id and the logs go with them.
A running turn is stopped (halt) as archiving stops one.

Serialized with every admission under the admission lock, taken before the row lock (the order
every batch takes): of concurrent deletes of one session exactly one finds the row."""

from __future__ import annotations

import logging
from typing import Any

from zimmer_common.contracts.clones import SessionDeletion
from zimmer_common.contracts.runtime import STOP_TURN, StopTurn
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted, SessionRef
from zimmer_common.logs import kv
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.model import SessionStatus
from zimmer_spot_gate.handlers.turns import TurnGate, run_edges
from zimmer_spot_gate.store import clones, quota, replay_records
from zimmer_spot_gate.store import sessions as store

log = logging.getLogger("zimmer.spot_gate")


class Deletion:
    def __init__(self, units: UnitsOfWork, gate: TurnGate):
        self.units = units
        self.gate = gate

    async def delete(self, req: SessionRef) -> SessionDeletion:
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)
            before = await store.fetch(conn, req.session_id, lock=True)  # not_found: never was, or already gone
            unlinked = await clones.unlink_descendants(conn, req.session_id)
            deleted_at = await clones.delete_session(conn, req.session_id)
            assert deleted_at is not None, "the row was locked by this transaction"
            running = before.status == SessionStatus.RUNNING.value
            if running:  # its run ends here; the run log keeps it (what ran stays what ran)
                overrides = (await quota.policy(conn)).overrides
                await replay_records.record_run_edges(conn, run_edges(before._mapping, "archived", overrides),
                                                      self.gate.now())
            events: list[tuple[str, str, Any]] = [
                (SESSION_DELETED, "session_deleted",
                 SessionDeleted(session_id=req.session_id, deleted_at=deleted_at, reason="deleted"))]
            if running:
                events.append((STOP_TURN, "stop_turn", StopTurn(session_id=req.session_id, mode="halt",
                                                                reason="the session was deleted")))
            await uow.emit_many(events)
        log.info("session deleted", extra=kv(session_id=req.session_id, status=before.status,
                                             clone_path=before.clone_path, stopped_turn=running, unlinked=unlinked))
        return SessionDeletion(session_id=req.session_id, deleted_at=deleted_at, stopped_turn=running)
