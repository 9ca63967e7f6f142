"""What the backlog asks spot-gate, over the service's bus (DESIGN §2: another service is reached
only over NATS, with the contracts). One object, built once by the bootstrap and handed to the
handlers that ask (`Starter`, `Puller`); the bus it asks on is the started service's."""

from __future__ import annotations

from zimmer_common.bus_link import BusLink
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


class SpotGateClient:
    def __init__(self, link: BusLink):
        self._link = link

    async def spawn(self, request: SpawnSession) -> SpawnResult:
        return await self._link.bus.request(SPAWN, request)

    async def session_by_key(self, idempotency_key: str) -> SessionView:
        return await self._link.bus.request(SESSION_BY_KEY, SessionByKey(idempotency_key=idempotency_key))

    async def session(self, session_id: int) -> SessionView:
        return await self._link.bus.request(GET_SESSION, SessionRef(session_id=session_id))

    async def policy(self, timeout: float) -> PolicyView:
        return await self._link.bus.request(GET_POLICY, PolicyQuery(), timeout=timeout)
