"""Spot-gate's session events, as the backlog consumes them (durable consumers on EVENTS): the
counts in flight come from them, for the sessions this backlog produced. Each runs in its
consumer's transaction (`UnitsOfWork.join`), which also records the message processed."""

from __future__ import annotations

from zimmer_backlog.handlers.start import SPAWNED_BY
from zimmer_backlog.store import queue
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SessionDeleted, SessionEvent
from zimmer_common.unit_of_work import UnitOfWork


async def on_session_event(uow: UnitOfWork, event: EventEnvelope) -> None:
    """A session created or its status changed: recorded against the item that produced it."""
    session = SessionEvent.model_validate(event.data).session
    if session.metadata.get("spawned_by") != SPAWNED_BY or "work_backlog_item_id" not in session.metadata:
        return
    await queue.record_session(uow.conn, session.id, int(session.metadata["work_backlog_item_id"]), session.status,
                               queue.spot_held(session), session.updated_at, session.version)


async def on_session_deleted(uow: UnitOfWork, event: EventEnvelope) -> None:
    """A session this backlog produced was deleted: it has ended (else it would count in flight
    forever, since no status event will ever come for it again)."""
    deleted = SessionDeleted.model_validate(event.data)
    await queue.session_deleted(uow.conn, deleted.session_id, deleted.deleted_at)
