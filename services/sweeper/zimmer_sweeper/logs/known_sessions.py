"""Which sessions exist, as spot-gate (which owns them) answers, remembered once known.

The log ingest refuses lines for a session that never existed (issue 26 #10): in the seed a log
row belonged to its session by foreign key, so such a line could not be written; here the logs
live in the sweeper's schema, and without the question they would be stored and kept for 90 days
under an id no session page will ever show. A session, once it exists, exists until it is deleted
(and a deleted session's late lines are dropped by `log_purges` already), so a known id is
remembered and never asked about again: spot-gate hears from the ingest once per new session, not
once per batch. An id spot-gate does not know is not remembered: it is asked about each time it
comes, which only a bad sender makes happen. No answer (spot-gate down, a timeout) is not "does
not exist": the batch waits in JetStream and is tried again.
"""

from __future__ import annotations

from collections.abc import Iterable

from zimmer_common.bus_link import BusLink
from zimmer_common.contracts.clones import IDS_BATCH_MAX, SESSIONS_EXIST, SessionIdsQuery

# Sessions remembered; past it the oldest are forgotten (asked about again if they log again).
CAPACITY = 200_000


class SessionsUnanswered(Exception):
    """spot-gate did not say which sessions exist: the batch is retried, not judged."""


class KnownSessions:
    def __init__(self, bus: BusLink, *, timeout: float | None = None, capacity: int = CAPACITY):
        self._bus = bus
        self.timeout = timeout
        self.capacity = capacity
        self._known: dict[int, None] = {}  # insertion-ordered: the oldest is forgotten first
        self.asked = 0  # questions sent to spot-gate (the tests read it: known ids are not asked again)

    async def missing(self, session_ids: Iterable[int]) -> set[int]:
        """The ids among `session_ids` that name no session. Raises `SessionsUnanswered`."""
        unknown = sorted({sid for sid in session_ids if sid not in self._known})
        if not unknown:
            return set()
        existing: set[int] = set()
        for start in range(0, len(unknown), IDS_BATCH_MAX):
            chunk = unknown[start:start + IDS_BATCH_MAX]
            self.asked += 1
            try:
                answer = await self._bus.bus.request(SESSIONS_EXIST, SessionIdsQuery(ids=chunk), timeout=self.timeout)
            except Exception as exc:  # noqa: BLE001 - any failure to answer is "not answered", never "missing"
                raise SessionsUnanswered(f"spot-gate did not say whether sessions exist: {exc!r}"[:300]) from exc
            existing.update(answer.existing)
        for sid in existing:
            self._known[sid] = None
        while len(self._known) > self.capacity:
            del self._known[next(iter(self._known))]
        return set(unknown) - existing
