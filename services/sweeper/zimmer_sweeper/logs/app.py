"""Wiring of the session logs (seed 003 "Log retention"): the ingest from `zimmer.ingest.logs`, the
session timeline, retention by whole day partitions, deleted sessions' lines purged, and the
readings behind the Health page's Log Retention panel.

Two steps, so `bootstrap` keeps the service's start-up order: `build_logs` makes the operations
from their collaborators (first, as their metrics are the sweeper's first), `serve_logs` registers
what they serve, consume and schedule (after the disk, trash and transcript duties)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.budget import SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.byte_pages import answer_budget
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import logs as c
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.outage import Outages
from zimmer_common.pager import Pager
from zimmer_common.paging import PageFn
from zimmer_common.service import Service
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.logs import health, timeline
from zimmer_sweeper.logs.config import LogIngestSettings
from zimmer_sweeper.logs.ingest import BatchOutcome, BatchSizing, LogIngest
from zimmer_sweeper.logs.ingest_lag import IngestLag
from zimmer_sweeper.logs.known_sessions import KnownSessions
from zimmer_sweeper.logs.metrics import SweeperMetrics
from zimmer_sweeper.logs.retention import BUDGET_SECONDS, LogRetention, request_purge

HOUSEKEEPING_SECONDS = 10.0  # ledger prune; readings and the ingest lag check every third round
log = logging.getLogger("zimmer.sweeper")


@dataclass(frozen=True)
class LogsApp:
    ingest: LogIngest
    retention: LogRetention
    lag: IngestLag
    metrics: SweeperMetrics


def build_logs(config: LogIngestSettings, *, units: UnitsOfWork, bus: BusLink, clock: Clock, pager: Pager,
               page: PageFn, outages: Outages, registry: CollectorRegistry) -> LogsApp:
    metrics = SweeperMetrics(registry)

    def batch_written(outcome: BatchOutcome, seconds: float, next_size: int) -> None:
        metrics.lines.labels("written").inc(outcome.written)
        metrics.lines.labels("skipped").inc(outcome.skipped)
        metrics.lines.labels("refused").inc(outcome.refused)
        metrics.batch_seconds.observe(seconds)
        metrics.batch_size.set(next_size)

    sizing = BatchSizing(size=min(max(500, config.batch_min), config.batch_max), minimum=config.batch_min,
                         maximum=config.batch_max)
    ingest = LogIngest(bus, units, clock.now, outages=outages, sizing=sizing,
                       ack_wait_seconds=config.ack_wait_seconds, on_batch=batch_written, page=page,
                       sessions=KnownSessions(bus))
    retention = LogRetention(
        units, clock.now, pager,
        on_dropped=lambda klass, rows: (metrics.dropped.labels(klass).inc(),
                                        metrics.dropped_rows.labels(klass).inc(rows)),
        on_failed=lambda klass: metrics.drop_failures.labels(klass).inc(),
        on_purged=metrics.purged_rows.inc)
    # JetStream stamps messages with the NATS server's wall clock, so the lag is read against the
    # real one (a test's frozen clock would make every line look months old).
    lag = IngestLag(bus, lambda: datetime.now(UTC), pager)
    return LogsApp(ingest, retention, lag, metrics)


def serve_logs(service: Service, logs: LogsApp, *, units: UnitsOfWork, bus: BusLink) -> None:
    ingest, retention, lag, metrics = logs.ingest, logs.retention, logs.lag, logs.metrics

    async def session_logs(req: c.LogQuery) -> c.LogPage:
        return await timeline.page(units.engine, req, answer_budget(bus.bus.payload_room()))

    async def retention_health(req: c.RetentionHealthQuery) -> c.LogRetentionHealth:
        return await health.read(units.engine, service.clock.now(), lag.oldest_unwritten_age)

    service.rpc(c.GET_SESSION_LOGS)(session_logs)
    service.rpc(c.LOG_RETENTION_HEALTH)(retention_health)

    def purge_soon() -> None:
        if service.runner is not None:
            asyncio.ensure_future(_enqueue(service, "log_retention"))

    @service.consume(ConsumerSpec("sweeper_session_deleted", Stream.EVENTS, (SESSION_DELETED,),
                                  after_commit=purge_soon))
    async def on_session_deleted(conn: AsyncConnection, event: EventEnvelope) -> None:
        deleted = SessionDeleted.model_validate(event.data)
        await request_purge(conn, deleted.session_id, deleted.reason, service.clock.now())

    async def log_retention(ctx: JobContext) -> None:
        report = await retention.run(SweepBudget(BUDGET_SECONDS, service.clock))
        log.info("log retention tick", extra=kv(dropped=len(report.dropped), failed=len(report.failed),
                                                purged_rows=report.purged_rows,
                                                budget_exhausted=report.budget_exhausted))

    async def log_partitions(ctx: JobContext) -> None:
        await retention.create_ahead()

    service.job_specs.append(JobSpec("log_retention", "maintenance", log_retention))
    service.job_specs.append(JobSpec("log_partitions", "maintenance", log_partitions))

    async def housekeeping() -> None:
        rounds = 0
        while not service.stopping:
            try:
                await ingest.prune_ledger()
                if rounds % 3 == 0:
                    reading = await health.read(units.engine, service.clock.now(), lag.check)
                    metrics.observe(reading)
            except Exception as exc:  # noqa: BLE001 - a missed round keeps the last readings
                if service.outages.report(exc, where="sweeper housekeeping") is None:
                    log.warning("sweeper housekeeping failed", extra=kv(error=repr(exc)))
            rounds += 1
            await service.pause(HOUSEKEEPING_SECONDS)

    @service.on_start
    async def start_ingest(svc: Service) -> None:
        await ingest.start()
        # The day partitions are the job's to create, after the deploy: ask for a run now rather
        # than on the boot path (ingest creates today's itself if a line arrives first).
        await _enqueue(svc, "log_partitions")
        svc.spawn(housekeeping(), "sweeper-housekeeping")

    @service.on_stop
    async def stop_ingest(svc: Service) -> None:
        await ingest.stop(grace=svc.settings.shutdown_grace_seconds)


async def _enqueue(service: Service, job: str) -> None:
    try:
        await service.enqueue(job)
    except Exception as exc:  # noqa: BLE001 - its schedule runs it anyway
        log.warning("could not ask for a job run now; its schedule will run it", extra=kv(job=job, error=repr(exc)))
