"""The service's NATS connection as a collaborator, beside the unit of work (`unit_of_work.py`):
a service's bootstrap builds its handlers before the service starts (and connects), so a handler
that talks to NATS is handed this link, typed, rather than the service or a thunk; `bus` is the
started service's connection. Handlers read `link.bus` when they ask something."""

from __future__ import annotations

from typing import Protocol

from zimmer_common.bus import Bus


class Connected(Protocol):
    """Where the bus is once the service has started (`zimmer_common.service.Service` is one)."""

    bus: Bus | None


class BusLink:
    def __init__(self, service: Connected):
        self._service = service

    @property
    def bus(self) -> Bus:
        bus = self._service.bus
        if bus is None:
            raise RuntimeError("the bus is used before the service started")
        return bus
