"""Wiring of the alerts service: what it serves, consumes and runs, in start-up order.

The one paging path (seed 003 "Alerts"; issue 11): pages arrive on `zimmer.alerts.cmd.page`
from every service's outbox, are recorded in the ledger (issues by fingerprint, conditions by
key, page groups by title), and a notifier loop sends what is due to the sinks the environment
allows. Owns the PostgreSQL schema `alerts`; talks to other services only over NATS.
"""

from __future__ import annotations

import logging

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_alerts import health_records, ledger, ledger_pages
from zimmer_alerts.config import AlertSettings
from zimmer_alerts.notifier import AlertMetrics, Notifier
from zimmer_alerts.maintenance import attach_maintenance
from zimmer_alerts.monitor import attach_health
from zimmer_alerts.recovery import attach_recovery
from zimmer_alerts.sinks import Sinks
from zimmer_common.byte_pages import answer_budget
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import alerts as a
from zimmer_common.contracts import ops
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

log = logging.getLogger("zimmer.alerts")
NAME = "alerts"
SCHEMA = "alerts"


def build(settings: Settings, clock: Clock | None = None, alert_settings: AlertSettings | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_alerts.migrations",
                      jobs=[outbox_prune_job(SCHEMA), health_records_prune_job()], clock=clock)
    attach_pager(service)
    config = alert_settings or AlertSettings()
    # The health report's RPC and the monitor that pages on it (issue 15).
    attach_health(service, config.disabled_keys(), config.health_check_seconds, config.lane_ceilings())
    metrics = AlertMetrics(service.metrics.registry)
    # Queue recovery mode and queued-message maintenance (issue 15): their RPCs and the expiry job.
    service.recovery = attach_recovery(service, service.metrics.registry)  # type: ignore[attr-defined]
    service.maintenance = attach_maintenance(service)  # type: ignore[attr-defined]

    def engine() -> AsyncEngine:
        assert service.engine is not None, "used before start"
        return service.engine

    http = httpx.AsyncClient()
    notifier = Notifier(engine, Sinks(config, http), settings.env, service.clock.now, metrics)
    service.app = notifier

    @service.consume(ConsumerSpec("alerts_pages", Stream.EVENTS, (a.PAGE,)))
    async def on_page(conn: AsyncConnection, event: EventEnvelope) -> None:
        page = a.Page.model_validate(event.data)
        if await ledger.record(conn, page, event.id, service.clock.now()):
            metrics.pages.labels(page.level, page.source).inc()

    # What the health rules read besides JetStream (issue 15): job runs and heartbeats.
    @service.consume(ConsumerSpec("alerts_job_runs", Stream.EVENTS, (ops.JOB_RUN,)))
    async def on_job_run(conn: AsyncConnection, event: EventEnvelope) -> None:
        await health_records.record_job_run(conn, ops.JobRun.model_validate(event.data))

    @service.consume(ConsumerSpec("alerts_heartbeats", Stream.EVENTS, (ops.HEARTBEAT,)))
    async def on_heartbeat(conn: AsyncConnection, event: EventEnvelope) -> None:
        await health_records.record_heartbeat(conn, ops.Heartbeat.model_validate(event.data))

    @service.rpc(a.LIST_ALERTS)
    async def list_alerts(q: a.AlertQuery) -> a.AlertList:
        assert service.bus is not None, "served before start"
        async with engine().connect() as conn:  # the issues that fit one answer (issue 27 #13)
            return await ledger_pages.read(conn, q, answer_budget(service.bus.payload_room()))

    @service.rpc(a.RESOLVE_CONDITION)
    async def resolve(req: a.ResolveCondition) -> a.ConditionView:
        async with engine().begin() as conn:
            return await ledger.resolve(conn, req.condition_key, service.clock.now())

    async def notify_loop() -> None:
        while not service.stopping:
            try:
                await notifier.run_once()
            except Exception as exc:  # noqa: BLE001 - the next pass retries; the loop never dies
                log.warning("alert notifier pass failed", extra=kv(error=repr(exc)))
            await service.pause(config.alert_check_seconds)

    @service.on_start
    async def start_notifier(svc: Service) -> None:
        svc.spawn(notify_loop(), "alert-notifier")

    @service.on_stop
    async def close_http(_svc: Service) -> None:
        await http.aclose()

    return service


def health_records_prune_job() -> JobSpec:
    """Bound the health records: runs past 14 days, heartbeats past a day."""

    async def run(ctx: JobContext) -> None:
        assert ctx.engine is not None
        async with ctx.engine.begin() as conn:
            runs, beats = await health_records.prune(conn, ctx.clock.now())
        log.info("health records pruned", extra=kv(runs=runs, heartbeats=beats))

    return JobSpec("health_records_prune", "maintenance", run)
