"""Archive (the Ranked view's Trash, seed 004) and unarchive: the sweeper's trash pipeline consumes
the events. Archiving ends the session (it takes no more turns; a running turn is stopped; a hold
or pause is dropped, since an ended session waits for nothing, and kept aside on the row);
unarchiving brings it back to the status it had (a stopped turn: needs_input) with what the archive
dropped, so the Undo restores exactly what the Trash took: a held session comes back held, with
its turn and prompt, and the re-check starts it. Both are idempotent in effect: archiving an
archived session changes nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func

from zimmer_common.contracts.runtime import STOP_TURN, StopTurn
from zimmer_common.contracts.spot import (
    SESSION_ARCHIVED,
    SESSION_STATUS_CHANGED,
    SESSION_UNARCHIVED,
    SessionEvent,
    SessionRef,
    SessionView,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.model import SessionStatus
from zimmer_spot_gate.handlers.turns import TurnGate, run_edges
from zimmer_spot_gate.store import quota, replay_records
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.store.ended_spend import Observe, observe_if_ended

ARCHIVED = SessionStatus.ARCHIVED.value
NOTHING_WAITED_FOR = dict(spot_hold_reason=None, spot_hold_retry_at=None, held_turn_kind=None, held_prompt=None,
                          held_attachments=None, paused_by=None, spot_pause_at=None, spot_pause_reason=None,
                          spot_pause_detail=None, spot_pause_acked_at=None)


WHEN_FIELDS = frozenset({"spot_hold_retry_at", "spot_pause_at", "spot_pause_acked_at"})


def archived_fields(before: Any) -> dict[str, Any]:
    """What archiving writes, however it comes (the Trash, or the runtime's own report): the time
    and the status it came from, no stamp, nothing waited for, and what it dropped (unarchive puts
    all of it back)."""
    dropped = {name: getattr(before, name) for name in NOTHING_WAITED_FOR if getattr(before, name) is not None}
    kept = {name: value.isoformat() if isinstance(value, datetime) else value for name, value in dropped.items()}
    return dict(status=ARCHIVED, archived_at=func.now(), archived_from_status=before.status,
                unarchive_started_at=None, archived_waits=kept or None, **NOTHING_WAITED_FOR)


def restored_fields(row: Any) -> dict[str, Any]:
    """What unarchiving writes: the status it had and what the archive dropped, as it was."""
    waits = {name: value for name, value in (row.archived_waits or {}).items() if name in NOTHING_WAITED_FOR}
    waits = {name: datetime.fromisoformat(value) if name in WHEN_FIELDS and value else value
             for name, value in waits.items()}
    return dict(status=restored_status(row), archived_at=None, archived_from_status=None, archived_waits=None,
                unarchive_started_at=func.now(), **waits)


def restored_status(row: Any) -> str:
    """As it was before the trash (a stopped turn: needs_input); archived some other way (a status
    report): needs_input if it has run, else waiting."""
    previous = row.archived_from_status
    if previous == SessionStatus.RUNNING.value:
        return SessionStatus.NEEDS_INPUT.value
    if previous in (SessionStatus.WAITING.value, SessionStatus.NEEDS_INPUT.value, SessionStatus.FAILED.value):
        return str(previous)
    return SessionStatus.NEEDS_INPUT.value if row.ever_started else SessionStatus.WAITING.value


class Trash:
    def __init__(self, units: UnitsOfWork, gate: TurnGate, on_ended: Observe | None = None):
        self.units = units
        self.gate = gate
        self.on_ended = on_ended  # metrics: the spend of a session the Trash ended (store.ended_spend)

    async def archive(self, req: SessionRef) -> SessionView:
        return await self._move(req.session_id, archive=True)

    async def unarchive(self, req: SessionRef) -> SessionView:
        return await self._move(req.session_id, archive=False)

    async def _move(self, session_id: int, *, archive: bool) -> SessionView:
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)  # before the row lock: the order every batch takes
            before = await store.fetch(conn, session_id, lock=True)
            overrides = (await quota.policy(conn)).overrides
            if (before.status == ARCHIVED) == archive:
                if archive:
                    return store.to_view(before, overrides)  # already in the trash: nothing to do
                raise ZimmerError(ErrorCode.REFUSED, f"session {session_id} is {before.status}, not archived",
                                  {"status": before.status})
            # The unarchive stamp protects the clone the sweeper is about to rebuild, whatever the
            # status says (seed 003 "The unarchive window"), until it says the restore finished
            # (unarchive_restored), 30 minutes pass, or the session is archived again.
            fields = archived_fields(before) if archive else restored_fields(before)
            view = store.to_view(await store.update_fields(conn, session_id, **fields), overrides)
            if self.on_ended is not None:
                await observe_if_ended(uow, before.status, view, self.on_ended)
            await replay_records.record_run_edges(conn, run_edges(before._mapping, view.status, overrides),
                                                  self.gate.now())
            spawned_by = (before.metadata or {}).get("spawned_by")
            events: list[tuple[str, str, Any]] = [
                (SESSION_STATUS_CHANGED, "session_status_changed",
                 SessionEvent(session=view, previous={"status": before.status}, spawned_by=spawned_by)),
                (SESSION_ARCHIVED if archive else SESSION_UNARCHIVED,
                 "session_archived" if archive else "session_unarchived",
                 SessionEvent(session=view, previous={"status": before.status}, spawned_by=spawned_by))]
            if archive and before.status == SessionStatus.RUNNING.value:
                events.append((STOP_TURN, "stop_turn", StopTurn(session_id=session_id, mode="halt",
                                                                reason="the session was archived")))
            await uow.emit_many(events)
        return view
