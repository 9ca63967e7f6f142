"""The queue-recovery banner's cache on the live pages (web/recovery_banner.py, issue 32 #1), in
process: a change alerts announces makes the next page read the mode again (also when it lands
while a read is out), and an active mode's expiry is announced by a timer when its window ends."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import health as h
from zimmer_gateway.web.recovery_banner import RecoveryBanner

NOW = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


class Alerts:
    """The alerts service's answer to QUEUE_RECOVERY_STATUS, counted; `gate` holds a read open;
    `failing` reads time out."""

    def __init__(self, status: h.QueueRecoveryStatus) -> None:
        self.status, self.reads, self.failing = status, 0, 0
        self.gate: asyncio.Event | None = None

    async def request(self, _spec: Any, _query: Any, timeout: float = 0) -> h.QueueRecoveryStatus:
        self.reads += 1
        if self.failing:
            self.failing -= 1
            raise TimeoutError("alerts did not answer")
        status = self.status  # as it stood when asked
        if self.gate is not None:
            await self.gate.wait()
        return status


class Gateway:
    def __init__(self, alerts: Alerts) -> None:
        self.bus, self.clock = alerts, FrozenClock(NOW)


def on(minutes: float) -> h.QueueRecoveryStatus:
    return h.QueueRecoveryStatus(active=True, entered_by="operator", reason="test", entered_at=NOW,
                                 expires_at=NOW + timedelta(minutes=minutes), lanes=["pollers"])


async def test_an_announced_change_is_read_again_even_one_that_lands_during_a_read() -> None:
    alerts = Alerts(h.QueueRecoveryStatus(active=False))
    banner = RecoveryBanner(Gateway(alerts))  # type: ignore[arg-type]  # a stand-in with the two attributes it reads
    assert await banner.current() is None and alerts.reads == 1
    alerts.status = on(30)  # entered through another gateway
    assert await banner.current() is None and alerts.reads == 1  # cached: nothing announced yet
    banner.changed()
    assert (await banner.current()) == alerts.status and alerts.reads == 2

    alerts.gate = asyncio.Event()
    banner.changed()
    reading = asyncio.create_task(banner.current())
    while alerts.reads < 3:
        await asyncio.sleep(0)
    alerts.status = h.QueueRecoveryStatus(active=False)  # lifted while that read was out
    banner.changed()
    alerts.gate.set()
    await reading
    assert await banner.current() is None and alerts.reads == 4  # that read was not kept as fresh


async def test_the_end_of_the_window_is_announced_with_no_event() -> None:
    alerts = Alerts(h.QueueRecoveryStatus(active=False))
    gateway = Gateway(alerts)
    banner = RecoveryBanner(gateway)  # type: ignore[arg-type]  # a stand-in with the two attributes it reads
    announced = asyncio.Event()
    banner.announce = announced.set
    banner.remember(on(30))
    banner.remember(on(0.001))  # read again, ending sooner: the timer follows the last read
    await asyncio.wait_for(announced.wait(), timeout=10)
    gateway.clock.advance(1)
    assert await banner.current() is None and alerts.reads == 0  # from the cache: the window is over


async def test_a_failed_read_is_tried_again_and_the_pages_told_when_it_finds_the_mode_on(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    import zimmer_gateway.web.recovery_banner as module

    monkeypatch.setattr(module, "RETRY_SECONDS", 0.01)
    alerts = Alerts(h.QueueRecoveryStatus(active=False))
    banner = RecoveryBanner(Gateway(alerts))  # type: ignore[arg-type]  # a stand-in with the two attributes it reads
    announced: list[int] = []
    banner.announce = lambda: announced.append(1)
    assert await banner.current() is None
    alerts.status, alerts.failing = on(30), 2  # entered elsewhere; alerts too slow to answer twice
    banner.changed()
    assert await banner.current() is None and alerts.reads == 2  # the failed read: no banner, for now
    while not announced:  # tried again in the background: failed once more, then read
        await asyncio.sleep(0.005)
    assert alerts.reads == 4 and (await banner.current()) == alerts.status and alerts.reads == 4
    await asyncio.sleep(0.1)  # read: nothing more is tried or announced
    assert (alerts.reads, len(announced)) == (4, 1)

    # A page's first read failing with the mode off: tried again, read, and nothing to tell.
    quiet = Alerts(h.QueueRecoveryStatus(active=False))
    quiet.failing = 1
    other = RecoveryBanner(Gateway(quiet))  # type: ignore[arg-type]  # a stand-in with the two attributes it reads
    told: list[int] = []
    other.announce = lambda: told.append(1)
    assert await other.current() is None
    while quiet.reads < 2:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)
    assert (quiet.reads, told) == (2, [])
