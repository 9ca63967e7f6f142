"""The service's bus, as the sweeper's handlers reach it: the one collaborator besides the unit of
work that exists only once the service has started (`Service.start` connects it, after `bootstrap`
built everything). Handlers are handed this link at construction and read `link.bus` when they ask
something; they never hold the service. Every concept's (like `schema.py`)."""

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
            raise RuntimeError("the sweeper's bus is used before the service started")
        return bus
