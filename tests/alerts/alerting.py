"""What the alerts tests share besides fixtures: the frozen clock's start, a bounded wait, and the
alerts service in-process with its notifier driven by the test."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.service import build
from zimmer_common.contracts.alerts import LIST_ALERTS, AlertQuery
from zimmer_common.settings import Environment

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def eventually(check: Callable[[], Awaitable[bool]], what: str, tries: int = 200) -> None:
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def alerts_service(settings_factory: Any, clock: Any, env: Environment, **sinks: Any) -> Any:
    # The test drives the notifier; the health monitor (whose frozen-clock readings of real
    # JetStream would be nonsense here) does not check within a test's length.
    config = AlertSettings(alert_sink_attempts=2, alert_check_seconds=3600, health_check_seconds=3600, **sinks)
    service = build(settings_factory(env=env), clock=clock, alert_settings=config)
    service.app.sinks.backoff = 0.01
    await service.start()
    return service


async def issues(service: Any) -> list[Any]:
    return (await service.bus.request(LIST_ALERTS, AlertQuery())).issues
