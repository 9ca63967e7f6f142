"""Lines the spot gate writes to a session's own log (seed 004 "What a pause does": "The session
log — a warning line naming the window, what it ran out of, and what brings the session back").

The session log is the sweeper's (`zimmer.ingest.logs`, the same subject the runtime writes its
lines to). A line is an outbox event of the transaction that paused, parked or resumed the
session: it exists if and only if that change committed, and its outbox id is its message id, so
a re-publish is dropped and the sweeper stores it once.
"""

from __future__ import annotations

from datetime import datetime

from zimmer_common.contracts.logs import INGEST_LOGS, LOG_LINE, LogLevel, LogLineIn
from zimmer_common.unit_of_work import UnitOfWork


async def write(uow: UnitOfWork, at: datetime, lines: list[tuple[int, LogLevel, str]]) -> None:
    """Append `(session_id, level, message)` lines to the sessions' logs, in this unit of work."""
    if lines:
        await uow.emit_many([(INGEST_LOGS, LOG_LINE, LogLineIn(session_id=sid, level=level, message=text, at=at))
                             for sid, level, text in lines])
