"""What the backlog asks spot-gate, over the service's bus (DESIGN §2: another service is reached
only over NATS, with the contracts). One object, built once by the bootstrap and handed to the
handlers that ask (`Starter`, `Puller`); the bus it asks on is the started service's."""

from __future__ import annotations

from typing import Protocol

from zimmer_common.bus import Bus
from zimmer_common.contracts.spot import (
    GET_SESSION,
    SESSION_BY_KEY,
    SPAWN,
    SessionByKey,
    SessionRef,
    SessionView,
    SpawnResult,
    SpawnSession,
)
from zimmer_common.contracts.spot_policy import GET_POLICY, PolicyQuery, PolicyView


class Connected(Protocol):
    """Where the bus is once the service has started (`zimmer_common.service.Service` is one)."""

    bus: Bus | None


class SpotGateClient:
    def __init__(self, connected: Connected):
        self._connected = connected

    @property
    def bus(self) -> Bus:
        bus = self._connected.bus
        if bus is None:
            raise RuntimeError("spot-gate is asked before the backlog service started")
        return bus

    async def spawn(self, request: SpawnSession) -> SpawnResult:
        return await self.bus.request(SPAWN, request)

    async def session_by_key(self, idempotency_key: str) -> SessionView:
        return await self.bus.request(SESSION_BY_KEY, SessionByKey(idempotency_key=idempotency_key))

    async def session(self, session_id: int) -> SessionView:
        return await self.bus.request(GET_SESSION, SessionRef(session_id=session_id))

    async def policy(self, timeout: float) -> PolicyView:
        return await self.bus.request(GET_POLICY, PolicyQuery(), timeout=timeout)
