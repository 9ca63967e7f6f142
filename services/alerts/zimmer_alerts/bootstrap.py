"""The alerts service's composition root: every dependency is built here, once, and handed to the
handlers that need it as an explicit constructor argument; then what the service serves (RPC),
consumes (pages, job runs, heartbeats) and schedules (jobs) is registered on it, in start-up
order. `service.py` owns only the lifecycle (the notifier's and the health monitor's loops).

The handlers hold no engine: each gets the one `UnitsOfWork` factory and opens a unit of work per
operation, or reads with `units.read()`; a consumer works in its own transaction. A handler that
talks to NATS gets the `BusLink` (the started service's connection).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.handlers.health import HealthReporter
from zimmer_alerts.handlers.health_metrics import HealthMetrics
from zimmer_alerts.handlers.lane_history import LaneHistory
from zimmer_alerts.handlers.maintenance import QueuedMaintenance
from zimmer_alerts.handlers.monitor import HealthMonitor
from zimmer_alerts.handlers.notifier import AlertMetrics, Notifier
from zimmer_alerts.handlers.recovery import QueueRecoveryMode, RecoveryMetrics
from zimmer_alerts.handlers.sinks import Sinks
from zimmer_alerts.jobs import alerts_jobs
from zimmer_alerts.store import health_records, ledger, ledger_pages
from zimmer_alerts.store.tables import SCHEMA
from zimmer_common.bus_link import BusLink
from zimmer_common.byte_pages import answer_budget
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import alerts as a
from zimmer_common.contracts import charts as ch
from zimmer_common.contracts import health as h
from zimmer_common.contracts import ops
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.subjects import Stream
from zimmer_common.history_store import PointsGauge
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service
from zimmer_common.tls import client_tls
from zimmer_common.unit_of_work import UnitsOfWork


@dataclass(frozen=True)
class Alerts:
    """What bootstrap built, for the lifecycle (`service.py`) and the tests."""

    config: AlertSettings
    notifier: Notifier
    reporter: HealthReporter
    monitor: HealthMonitor
    recovery: QueueRecoveryMode
    maintenance: QueuedMaintenance
    http: httpx.AsyncClient
    history: LaneHistory  # the Health charts' lane history (issue 32 #4), recorded from the monitor's checks


def bootstrap(service: Service, config: AlertSettings) -> Alerts:
    """Build the alerts service's handlers over `service` (not started yet) and register them on it."""
    units = UnitsOfWork(service, SCHEMA)
    link = BusLink(service)
    pager = attach_pager(service)
    # The health report and the monitor that pages on it (issue 15).
    health_metrics = HealthMetrics(service.metrics.registry)
    reporter = HealthReporter(link, units, service.clock, service.settings.env, disabled_keys=config.disabled_keys(),
                              metrics=health_metrics, ceilings=config.lane_ceilings())
    monitor = HealthMonitor(reporter, pager, units=units, metrics=health_metrics)

    @service.rpc(h.SYSTEM_HEALTH)
    async def system_health(_q: h.HealthQuery) -> h.HealthReport:
        return await reporter.report()

    metrics = AlertMetrics(service.metrics.registry)
    # Queue recovery mode and queued-message maintenance (issue 15): their RPCs and the expiry job.
    recovery = QueueRecoveryMode(units, link, service.clock, pager, RecoveryMetrics(service.metrics.registry))
    _serve_recovery(service, recovery)
    history = LaneHistory(units, service.clock, PointsGauge(service.metrics.registry, "health_lanes"))
    service.rpc(ch.GET_HEALTH_HISTORY)(history.read)
    service.job_specs.extend(alerts_jobs(units, recovery, history))
    maintenance = QueuedMaintenance(link, service.clock, service.page_error)
    _serve_maintenance(service, maintenance)
    # The one paging path (issue 11): the ledger, its notifier and the sinks.
    http = httpx.AsyncClient(verify=client_tls())
    notifier = Notifier(units, Sinks(config, http), service.settings.env, service.clock.now, metrics)
    _consume(service, metrics)
    _serve_ledger(service, units, link, metrics)
    return Alerts(config, notifier, reporter, monitor, recovery, maintenance, http, history)


def _serve_recovery(service: Service, mode: QueueRecoveryMode) -> None:
    """Enter, exit and read queue recovery mode (the job that lifts it is in `jobs`)."""

    async def exit_(req: h.ExitQueueRecoveryMode) -> h.QueueRecoveryStatus:
        return await mode.exit(req.actor)

    async def status(_req: h.HealthQuery) -> h.QueueRecoveryStatus:
        return await mode.status()

    service.rpc(h.ENTER_QUEUE_RECOVERY)(mode.enter)
    service.rpc(h.EXIT_QUEUE_RECOVERY)(exit_)
    service.rpc(h.QUEUE_RECOVERY_STATUS)(status)


def _serve_maintenance(service: Service, maintenance: QueuedMaintenance) -> None:
    """Preview, discard and reschedule the messages waiting on ZIMMER_JOBS."""
    service.rpc(h.PREVIEW_QUEUED)(maintenance.preview)
    service.rpc(h.DISCARD_QUEUED)(maintenance.discard)
    service.rpc(h.RESCHEDULE_QUEUED)(maintenance.reschedule)


def _consume(service: Service, metrics: AlertMetrics) -> None:
    """Pages into the ledger; and what the health rules read besides JetStream (issue 15): job runs
    and heartbeats. Each in its consumer's own transaction."""

    @service.consume(ConsumerSpec("alerts_pages", Stream.EVENTS, (a.PAGE,)))
    async def on_page(conn: AsyncConnection, event: EventEnvelope) -> None:
        page = a.Page.model_validate(event.data)
        if await ledger.record(conn, page, event.id, service.clock.now()):
            metrics.pages.labels(page.level, page.source).inc()
        await metrics.observe_ledger(conn)  # the Alerts panel's "N of M still paging"

    @service.consume(ConsumerSpec("alerts_job_runs", Stream.EVENTS, (ops.JOB_RUN,)))
    async def on_job_run(conn: AsyncConnection, event: EventEnvelope) -> None:
        await health_records.record_job_run(conn, ops.JobRun.model_validate(event.data))

    @service.consume(ConsumerSpec("alerts_heartbeats", Stream.EVENTS, (ops.HEARTBEAT,)))
    async def on_heartbeat(conn: AsyncConnection, event: EventEnvelope) -> None:
        await health_records.record_heartbeat(conn, ops.Heartbeat.model_validate(event.data))


def _serve_ledger(service: Service, units: UnitsOfWork, link: BusLink, metrics: AlertMetrics) -> None:
    """The ledger's read, a page at a time, and resolving a condition by hand."""

    async def list_alerts(q: a.AlertQuery) -> a.AlertList:
        # The issues that fit one answer (issue 27 #13), their conditions and notices: one snapshot.
        async with units.snapshot() as conn:
            return await ledger_pages.read(conn, q, answer_budget(link.bus.payload_room()))

    async def resolve(req: a.ResolveCondition) -> a.ConditionView:
        async with units.begin() as uow:
            resolved = await ledger.resolve(uow.conn, req.condition_key, service.clock.now())
            await metrics.observe_ledger(uow.conn)  # it no longer pages: one fewer still paging
            return resolved

    service.rpc(a.LIST_ALERTS)(list_alerts)
    service.rpc(a.RESOLVE_CONDITION)(resolve)
