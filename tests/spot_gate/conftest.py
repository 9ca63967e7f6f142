"""A spot-gate service in-process on real PostgreSQL and NATS, with a clock the test moves."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from zimmer_common.bus import Bus
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn
from zimmer_common.contracts.subjects import Stream
from zimmer_spot_gate.service import build

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class SpotHarness:
    def __init__(self, service, clock: FrozenClock, bus: Bus):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        self.service = service
        self.clock = clock
        self.bus = bus
        self.app = service.app
        self.app.gate.jitter = lambda: 0.0  # deterministic ladder; jitter bounds are unit-tested
        self.app.gate.pool.ttl = 0.0  # tests change readings with SQL behind the cache's back

    async def sql(self, query: str, **params):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        async with self.service.engine.begin() as conn:
            return (await conn.execute(text(query), params)).all() if query.lstrip().upper().startswith("SELECT") \
                else await conn.execute(text(query), params)

    async def spend(self, report) -> bool:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        """Record spend as the ingest consumer does, in its own transaction."""
        async with self.service.engine.begin() as conn:
            return await self.app.record_spend_in(conn, report)

    async def readings(self, *utilizations: tuple[float, float], resets_in_minutes: float = 120) -> None:
        from datetime import timedelta

        for i, (u5, u7) in enumerate(utilizations):
            await self.app.record_reading(QuotaReadingIn(
                account=f"acct-{i}", status="active", read_at=self.clock.now(),
                five_hour=WindowReadingIn(utilization=u5, resets_at=self.clock.now() + timedelta(minutes=resets_in_minutes)),
                seven_day=WindowReadingIn(utilization=u7, resets_at=self.clock.now() + timedelta(days=3))))

    async def run_job(self, name: str, done) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        """Enqueue a job as its schedule would and wait until `done()` says it took effect."""
        await self.service.runner.enqueue(name)
        for _ in range(200):
            if await done():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{name} did not take effect")

    async def start_turn_commands(self) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
        """Every start_turn the gate has issued, once the outbox has relayed them."""
        return await self.messages(Stream.RUNTIME, "start_turn")

    async def messages(self, stream: Stream, suffix: str) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
        """The `data` of every message on `stream` whose subject ends with `suffix`, in order, once
        the outbox has relayed everything."""
        import base64
        import json

        for _ in range(100):
            if await self.service.relay.pending() == 0:
                break
            await asyncio.sleep(0.05)
        info = await self.bus.js_api(f"STREAM.INFO.{stream.value}")
        out = []
        first, last = info["state"]["first_seq"], info["state"]["last_seq"]
        for seq in range(first, last + 1) if info["state"]["messages"] else []:
            msg = await self.bus.js_api(f"STREAM.MSG.GET.{stream.value}", {"seq": seq})
            if "message" in msg and msg["message"]["subject"].endswith(suffix):
                out.append(json.loads(base64.b64decode(msg["message"]["data"]))["data"])
        return out

    async def log_lines(self, session_id: int) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
        """The lines the gate wrote to a session's log (zimmer.ingest.logs, the sweeper's input)."""
        return [line for line in await self.messages(Stream.INGEST, "ingest.logs") if line["session_id"] == session_id]


@pytest.fixture
async def spot(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    clock = FrozenClock(T0)
    service = build(settings_factory(), clock=clock)
    await service.start()
    bus = await Bus.connect([service.settings.nats_url], service="probe", instance_id="p", rpc_timeout=5)
    try:
        yield SpotHarness(service, clock, bus)
    finally:
        await bus.close()
        await service.stop()
