"""What the health incident tests share: driving lane consumers, ticks, heartbeats and job runs on
real JetStream and PostgreSQL, and reading what was paged."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from zimmer_alerts.handlers.health import HealthReporter
from zimmer_alerts.handlers.monitor import HealthMonitor
from zimmer_alerts.store import health_records
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import ops
from zimmer_common.contracts.alerts import LIST_ALERTS, AlertQuery
from zimmer_common.contracts.subjects import Stream, job_subject, lane_filter
from zimmer_common.settings import Environment
from zimmer_common.unit_of_work import UnitsOfWork


def monitor_of(service: Any, clock: FrozenClock) -> HealthMonitor:
    # The service's own loop waits a minute before its first check; the test drives one directly.
    reporter = HealthReporter(BusLink(service), UnitsOfWork(service, "alerts"), clock, Environment.TEST)
    return HealthMonitor(reporter, service.pager, reporter.units)


async def lane_consumer(service: Any, ctx: str, lane: str, pool: int) -> Any:
    durable = f"jobs_{ctx}_{lane}"
    await service.bus.js.add_consumer(Stream.JOBS.value, ConsumerConfig(
        durable_name=durable, filter_subject=lane_filter(ctx, lane), ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL, max_ack_pending=pool, ack_wait=6 * 3600, max_deliver=-1))
    return await service.bus.js.pull_subscribe_bind(durable, stream=Stream.JOBS.value)


async def enqueue(service: Any, ctx: str, lane: str, jobs: list[str]) -> None:
    for job in jobs:  # one waiting tick per job subject: distinct jobs make depth
        await service.bus.publish(job_subject(ctx, lane, job), json.dumps({"job": job}).encode())


async def heartbeat(service: Any, clock: FrozenClock, name: str = "spot-gate") -> None:
    async with service.engine.begin() as conn:
        await health_records.record_heartbeat(conn, ops.Heartbeat(
            service=name, instance_id=f"{name}-1", version="test", at=clock.now(), uptime_seconds=3600, lanes=[]))


async def started(service: Any, job: str, lane: str, at: datetime, run_id: str) -> None:
    async with service.engine.begin() as conn:
        await health_records.record_job_run(conn, ops.JobRun(
            service="spot-gate", job=job, lane=lane, run_id=run_id, state=ops.JobRunState.STARTED, at=at,
            instance_id="spot-gate-1", enqueued_at=at, started_at=at))


async def pages(service: Any, title: str) -> list[Any]:
    found = (await service.bus.request(LIST_ALERTS, AlertQuery())).issues
    return [i for i in found if i.title == title]


async def paged(service: Any, title: str) -> bool:
    return bool(await pages(service, title))


async def condition(service: Any, key: str) -> Any:
    """The alerts ledger's condition `key` (None: never reported)."""
    found = (await service.bus.request(LIST_ALERTS, AlertQuery())).conditions
    return next((c for c in found if c.condition_key == key), None)


