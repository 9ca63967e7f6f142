"""The health reader against a real nats-server (issue 15): what a consumer reads as (ready,
claimed, the oldest ready message's time and subject, last finished, pause), that the number of
JetStream requests does not grow with depth, ticks waiting and schedules installed, and a read
that fails is an unreadable reading."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from alerting import T0  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from nats.js.api import AckPolicy, ConsumerConfig

from zimmer_alerts.handlers import health_reader as reader
from zimmer_alerts.store import health_records
from zimmer_common.bus import Bus
from zimmer_common.contracts.subjects import Stream, job_subject, schedule_subject
from zimmer_common.db import create_engine, migrate
from zimmer_common.schedule import ALL, ScheduleEntry
from zimmer_common.streams import provision_streams
from zimmer_common.unit_of_work import UnitsOfWork

DEFAULT_LANE = "zimmer.jobs.backlog.default"


@pytest.fixture
async def bus(nats_url: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect([nats_url], service="alerts", instance_id="test", rpc_timeout=2.0)
    await provision_streams(bus)
    yield bus
    await bus.close()


def count_api_calls(bus: Bus) -> list[str]:
    """Record every `$JS.API` request the reader makes (the real request still goes out)."""
    calls: list[str] = []
    real = bus.js_api

    async def counted(api: str, body: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        calls.append(api)
        return await real(api, body, **kw)

    bus.js_api = counted  # type: ignore[method-assign]  # the test's stand-in
    return calls


async def add_consumer(bus: Bus, stream: Stream, durable: str, *filters: str, pool: int = -1) -> None:
    await bus.js.add_consumer(stream.value, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT,
                                                           filter_subjects=list(filters), max_ack_pending=pool))


async def stored_time(bus: Bus, stream: Stream, seq: int) -> datetime:
    resp = await bus.js_api(f"STREAM.MSG.GET.{stream.value}", {"seq": seq})
    return datetime.fromisoformat(resp["message"]["time"]).astimezone(UTC)


def only(readings: list[Any], consumer: str) -> Any:
    [found] = [r for r in readings if r.consumer == consumer]
    return found


async def test_a_job_lane_reads_ready_claimed_oldest_ready_last_finished_and_pause(bus: Bus) -> None:
    await add_consumer(bus, Stream.JOBS, "jobs_spot_default", "zimmer.jobs.spot.default.>", pool=2)
    seqs = [await bus.publish(job_subject("spot", "default", f"job{i}"), b"{}") for i in range(5)]
    fresh = only(await reader.read_consumers(bus), "jobs_spot_default")
    assert (fresh.ready, fresh.claimed, fresh.acked_total, fresh.last_finished_at) == (5, 0, 0, None)
    assert fresh.oldest_ready_subject == "zimmer.jobs.spot.default.job0"
    assert fresh.oldest_ready_at == await stored_time(bus, Stream.JOBS, seqs[0])

    sub = await bus.js.pull_subscribe_bind("jobs_spot_default", stream=Stream.JOBS.value)
    [done] = await sub.fetch(1)
    await done.ack_sync()
    [_held] = await sub.fetch(1)  # delivered, never acked: claimed
    before = datetime.now(UTC)
    lane = only(await reader.read_consumers(bus), "jobs_spot_default")
    assert (lane.stream, lane.lane, lane.service) == ("ZIMMER_JOBS", "default", "spot-gate")
    assert (lane.ready, lane.claimed, lane.pool, lane.acked_total) == (3, 1, 2, 1)
    assert lane.oldest_ready_subject == "zimmer.jobs.spot.default.job2"
    assert lane.oldest_ready_at == await stored_time(bus, Stream.JOBS, seqs[2])
    assert lane.last_finished_at is not None and lane.last_finished_at <= before
    assert not lane.paused and lane.paused_until is None

    until = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    resp = await bus.js_api(f"CONSUMER.PAUSE.{Stream.JOBS.value}.jobs_spot_default",
                            {"pause_until": until.isoformat().replace("+00:00", "Z")})
    assert resp["paused"] is True
    paused = only(await reader.read_consumers(bus), "jobs_spot_default")
    assert paused.paused and paused.paused_until == until

    await bus.js_api(f"CONSUMER.PAUSE.{Stream.JOBS.value}.jobs_spot_default", {})  # resume
    resumed = only(await reader.read_consumers(bus), "jobs_spot_default")
    assert not resumed.paused and resumed.paused_until is None


async def test_event_ingest_and_command_consumers_and_the_oldest_of_several_filters(bus: Bus) -> None:
    await add_consumer(bus, Stream.EVENTS, "sweeper_session_deleted", "zimmer.backlog.evt.a", "zimmer.spot.evt.b")
    await add_consumer(bus, Stream.INGEST, "spot_gate_spend", "zimmer.ingest.spend", pool=80)
    await add_consumer(bus, Stream.RUNTIME, "runtime_commands", "zimmer.runtime.cmd.>")
    first = await bus.publish("zimmer.spot.evt.b", b"{}")  # the second filter holds the oldest
    await bus.publish("zimmer.backlog.evt.a", b"{}")
    await bus.js.subscribe("zimmer.ingest.>", ordered_consumer=True)  # ephemeral: nobody's lane
    readings = await reader.read_consumers(bus)
    events = only(readings, "sweeper_session_deleted")
    assert (events.lane, events.service, events.ready, events.pool) == ("events", "sweeper", 2, None)
    assert events.oldest_ready_subject == "zimmer.spot.evt.b"
    assert events.oldest_ready_at == await stored_time(bus, Stream.EVENTS, first)
    ingest = only(readings, "spot_gate_spend")
    assert (ingest.lane, ingest.service, ingest.ready, ingest.pool, ingest.oldest_ready_at) == (
        "ingest", "spot-gate", 0, 80, None)
    commands = only(readings, "runtime_commands")
    assert (commands.lane, commands.service) == ("commands", None)
    assert {r.stream for r in readings} == {"ZIMMER_EVENTS", "ZIMMER_INGEST", "ZIMMER_RUNTIME"}


async def test_the_number_of_requests_does_not_grow_with_depth(bus: Bus) -> None:
    await add_consumer(bus, Stream.INGEST, "sweeper_log_lines", "zimmer.ingest.logs")
    await add_consumer(bus, Stream.EVENTS, "backlog_session_events", "zimmer.spot.evt.>")

    async def publish(n: int) -> None:
        for start in range(0, n, 500):
            batch = [("zimmer.ingest.logs", b"{}", f"log-{start}-{i}-{n}") for i in range(min(500, n - start))]
            batch += [("zimmer.spot.evt.x", b"{}", f"evt-{start}-{i}-{n}") for i in range(min(500, n - start))]
            await bus.publish_many(batch, timeout=10)

    calls = count_api_calls(bus)
    await publish(10)
    shallow = only(await reader.read_consumers(bus), "sweeper_log_lines")
    shallow_calls = list(calls)
    calls.clear()
    await publish(1_990)
    deep = only(await reader.read_consumers(bus), "sweeper_log_lines")
    assert (shallow.ready, deep.ready) == (10, 2_000)
    assert deep.oldest_ready_at == shallow.oldest_ready_at
    # Four lists and one message read per consumer with something ready, at either depth.
    assert sorted(calls) == sorted(shallow_calls) and len(calls) == 6


async def test_consumer_lists_are_read_a_page_at_a_time(bus: Bus) -> None:
    for i in range(300):  # more than one page of 256
        await bus.js_api(f"CONSUMER.CREATE.{Stream.EVENTS.value}.alerts_c{i:03d}", {
            "stream_name": Stream.EVENTS.value, "config": {"durable_name": f"alerts_c{i:03d}", "ack_policy": "explicit",
                                                          "filter_subject": f"zimmer.alerts.evt.c{i}"}})
    calls = count_api_calls(bus)
    readings = await reader.read_consumers(bus)
    assert len(readings) == 300 and {r.service for r in readings} == {"alerts"}
    assert calls.count(f"CONSUMER.LIST.{Stream.EVENTS.value}") == 2


async def test_waiting_ticks_and_schedule_installs(bus: Bus) -> None:
    entries = [ScheduleEntry("backlog", "outbox_prune", "0 */10 * * * *", "maintenance", ALL),
               ScheduleEntry("backlog", "recover_starting", "45 * * * * *", "default", ALL),
               ScheduleEntry("sweeper", "log_retention", "30 */10 * * * *", "maintenance", ALL)]
    await add_consumer(bus, Stream.JOBS, "jobs_backlog_default", f"{DEFAULT_LANE}.>", pool=2)
    waiting_seq = await bus.publish(job_subject("backlog", "maintenance", "outbox_prune"), b"{}")  # no worker yet
    await bus.publish(job_subject("backlog", "default", "recover_starting"), b"{}")
    sub = await bus.js.pull_subscribe_bind("jobs_backlog_default", stream=Stream.JOBS.value)
    await sub.fetch(1)  # running: still on the work queue until acked, but not waiting
    assert await reader.waiting_ticks(bus, entries) == {
        "backlog.outbox_prune": await stored_time(bus, Stream.JOBS, waiting_seq)}

    assert await reader.schedule_installed_at(bus, "backlog", "outbox_prune") is None
    seq = await bus.publish(schedule_subject("backlog", "outbox_prune"), json.dumps({"job": "outbox_prune"}).encode(),
                            headers={"Nats-Schedule": "@every 1h",
                                     "Nats-Schedule-Target": job_subject("backlog", "maintenance", "outbox_prune")})
    assert await reader.schedule_installed_at(bus, "backlog", "outbox_prune") == await stored_time(
        bus, Stream.JOBS, seq)


async def test_read_readings_records_the_server_and_says_when_it_cannot_read(bus: Bus, database_url: str) -> None:
    await migrate(database_url, "alerts", "zimmer_alerts.migrations")
    engine = create_engine(database_url)
    units = UnitsOfWork(SimpleNamespace(engine=engine, relay=None), "alerts")
    try:
        await add_consumer(bus, Stream.JOBS, "jobs_alerts_maintenance", "zimmer.jobs.alerts.maintenance.>", pool=2)
        readings = await reader.read_readings(bus, units, T0)
        assert readings.readable and readings.problem is None
        assert [c.consumer for c in readings.consumers] == ["jobs_alerts_maintenance"]
        assert readings.consumers[0].service == "alerts"
        server_id = await reader.nats_server_identity(bus)
        async with engine.connect() as conn:
            assert await health_records.nats_started_at(conn, server_id) == T0
        await reader.read_readings(bus, units, T0 + timedelta(hours=1))
        async with engine.connect() as conn:
            assert await health_records.nats_started_at(conn, server_id) == T0  # first sighting kept

        await bus.js_api(f"STREAM.DELETE.{Stream.RUNTIME.value}")
        broken = await reader.read_readings(bus, units, T0)
        assert not broken.readable and "CONSUMER.LIST.ZIMMER_RUNTIME" in (broken.problem or "")
        assert "stream not found" in (broken.problem or "")
        await bus.close()
        gone = await reader.read_readings(bus, units, T0)
        assert not gone.readable and "did not answer" in (gone.problem or "")
    finally:
        await engine.dispose()
