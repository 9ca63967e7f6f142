"""A job run's lifecycle event the bus does not take is retried until it lands, once, or given up
after the horizon with a warning (the failover suite found runs ticked during a stream leader's
election whose events were lost: alerts recorded no run for a tick that ran)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from zimmer_cli.embedded import start_nats
from zimmer_common.bus import Bus
from zimmer_common.contracts.ops import JOB_RUN, JobRun, JobRunState
from zimmer_common.contracts.subjects import Stream
from zimmer_common.outage import Outages
from zimmer_common.retried_events import RetriedEvents
from zimmer_common.streams import provision_streams

pytestmark = pytest.mark.network  # a nats-server of its own

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
RUN = JobRun(service="gateway", job="readiness_probe", lane="pollers", run_id="7", state=JobRunState.FINISHED,
             at=NOW, instance_id="gateway-1")


async def until(check, within: float = 20.0) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    end = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < end, "not reached in time"
        await asyncio.sleep(0.05)


async def test_an_event_the_bus_did_not_take_lands_once_when_it_can(tmp_path: Path) -> None:
    server = await asyncio.to_thread(start_nats, tmp_path / "nats")
    bus = await Bus.connect([server.url], service="test", instance_id="t", rpc_timeout=2)
    try:
        events = RetriedEvents(bus, Outages())
        # No stream takes the subject yet (as while ZIMMER_EVENTS has no leader): not taken.
        await events.publish(JOB_RUN, "job_run", RUN, event_id="jobrun.gateway.readiness_probe.7.finished",
                             occurred_at=NOW, where="job_run event")
        assert events.retrying == 1
        await provision_streams(bus)
        await until(lambda: events.retrying == 0)
        # And again under the same id (the first attempt's ack lost): JetStream keeps one.
        await events.publish(JOB_RUN, "job_run", RUN, event_id="jobrun.gateway.readiness_probe.7.finished",
                             occurred_at=NOW, where="job_run event")
        info = await bus.js.stream_info(Stream.EVENTS.value, subjects_filter=JOB_RUN)
        assert (info.state.subjects or {}).get(JOB_RUN) == 1
    finally:
        await bus.close()
        await asyncio.to_thread(server.stop)


async def test_an_event_is_given_up_after_the_horizon_with_a_warning(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    server = await asyncio.to_thread(start_nats, tmp_path / "nats")
    bus = await Bus.connect([server.url], service="test", instance_id="t", rpc_timeout=2)
    try:
        events = RetriedEvents(bus, Outages(), horizon=1.0)
        with caplog.at_level(logging.WARNING, logger="zimmer.bus"):
            await events.publish("zimmer.nowhere.evt.x", "job_run", RUN, event_id="lost", occurred_at=NOW,
                                 where="job_run event")
            await until(lambda: events.retrying == 0)
        assert any(r.getMessage() == "event lost: the bus did not take it" for r in caplog.records)
    finally:
        await bus.close()
        await asyncio.to_thread(server.stop)
