"""The local report buffer: every report waits here, in order, until JetStream has acked it.

Bounded: when it is full the oldest report is dropped (a runtime cut off from the bus for hours
must not grow without limit); the caller counts the drops. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class OutgoingReport:
    """One report as it will be published: its subject, its idempotency key (the envelope id and
    the Nats-Msg-Id) and the envelope's bytes. Compared by identity: the sender removes exactly
    the report it published."""

    kind: str
    subject: str
    key: str
    body: bytes


class ReportBuffer:
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._items: deque[OutgoingReport] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def append(self, report: OutgoingReport) -> OutgoingReport | None:
        """Add `report` at the end; returns the report dropped to make room, if any."""
        dropped = self._items.popleft() if len(self._items) >= self.capacity else None
        self._items.append(report)
        return dropped

    def head(self) -> OutgoingReport | None:
        return self._items[0] if self._items else None

    def remove_sent(self, report: OutgoingReport) -> bool:
        """Remove `report` once it is stored. False when it is no longer at the head: it was dropped
        (overflow) while it was being published, and what is at the head now is not sent yet."""
        if self._items and self._items[0] is report:
            self._items.popleft()
            return True
        return False
