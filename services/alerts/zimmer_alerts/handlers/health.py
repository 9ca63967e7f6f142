"""The health report, computed live on every call (issue 15; seed 003 "Queues" … "workers",
"cron freshness"): read JetStream and the alerts records once (health_reader, health_records),
then apply the pure rules (domain.queues, .cron, .workers, .overall).

The report is answered by the alerts service's request handler (core NATS request/reply, not a
job lane), so it answers while every job lane is stalled or paused; the gateway answers for it
when this service is what stopped (zimmer_gateway.health_report). Its cost is bounded by the
number of consumers and scheduled keys, never by the depth of a queue (bench: health_report).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from zimmer_alerts.domain import cron, lanes, overall, queues, workers
from zimmer_alerts.domain.readings import Readings
from zimmer_alerts.handlers import health_reader
from zimmer_alerts.handlers.health_metrics import HealthMetrics
from zimmer_alerts.handlers.recovery import recovery_status
from zimmer_alerts.store import health_records
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.contracts import health as h
from zimmer_common.contracts.subjects import Stream, ctx_of, job_subject, split_host_service
from zimmer_common.schedule import SCHEDULE, ScheduleEntry
from zimmer_common.settings import Environment
from zimmer_common.unit_of_work import UnitsOfWork

REPORT_BUDGET_SECONDS = 4.0  # under the gateway's 5 s: a slow read answers "unreadable", not a timeout


def scheduled_entries(env: Environment, schedule: Iterable[ScheduleEntry] = SCHEDULE) -> list[ScheduleEntry]:
    return [e for e in schedule if env in e.environments]


class HealthReporter:
    def __init__(self, bus: BusLink, units: UnitsOfWork, clock: Clock, env: Environment, *,
                 schedule: Iterable[ScheduleEntry] = SCHEDULE, disabled_keys: Iterable[str] = (),
                 metrics: HealthMetrics | None = None, ceilings: Mapping[str, timedelta] | None = None):
        self.link = bus
        self.units = units
        self.clock = clock
        self.entries = scheduled_entries(env, schedule)
        self.disabled_keys = frozenset(disabled_keys)
        self.ceilings = dict(ceilings or {})
        self.metrics = metrics
        self._inflight: asyncio.Future[h.HealthReport] | None = None

    async def report(self) -> h.HealthReport:
        """The report, computed now. Callers that arrive while one is being computed share it (it
        is at most one report's time older than their own would be): a burst of N dashboards costs
        JetStream one report, not N, at the moment the system is least able to pay for N."""
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._compute())
        return await asyncio.shield(self._inflight)

    async def note_server(self) -> None:
        """Record the NATS server this connection is on: its first sighting is a lower bound of
        cron freshness (a restarted server fires no missed ticks)."""
        server_id = await health_reader.nats_server_identity(self.link.bus)
        async with self.units.begin() as uow:
            await health_records.record_server(uow.conn, server_id, self.clock.now())

    async def _compute(self) -> h.HealthReport:
        t0 = time.perf_counter()
        now = self.clock.now()
        try:
            (readings, cron_health), nats = await asyncio.wait_for(
                asyncio.gather(self._read(now), health_reader.read_cluster(self.link.bus)), REPORT_BUDGET_SECONDS)
        except TimeoutError:
            problem = f"JetStream and the health records did not answer within {REPORT_BUDGET_SECONDS:g}s"
            readings = Readings(now=now, consumers=[], claimed_runs=[], heartbeats=[], readable=False, problem=problem,
                                ceilings=self.ceilings)
            cron_health = h.CronHealth(readable=False, problem=problem, status="critical")
            nats = h.ClusterHealth(readable=False, problem=problem, status="critical", summary=problem)
        report = await self._assemble(readings, cron_health, nats, now)
        if self.metrics is not None:
            self.metrics.observe(report)
            self.metrics.report_seconds.observe(time.perf_counter() - t0)
        return report

    async def _read(self, now: datetime) -> tuple[Readings, h.CronHealth]:
        readings = replace(await health_reader.read_readings(self.link.bus, self.units, now), ceilings=self.ceilings)
        if not readings.readable:
            return readings, h.CronHealth(readable=False, problem=readings.problem, status="critical")
        try:
            bus = self.link.bus
            entries = await health_reader.per_host_entries(bus, self.entries)
            waiting = await health_reader.waiting_ticks(bus, entries)
        except Exception as exc:  # noqa: BLE001 - the monitor pages on an unreadable check
            return readings, h.CronHealth(readable=False, problem=f"{type(exc).__name__}: {exc}", status="critical")
        readings = with_waiting(readings, entries, waiting)
        try:
            cron_health = await self._cron(readings, entries, waiting, now)
        except Exception as exc:  # noqa: BLE001 - the monitor pages on an unreadable check
            cron_health = h.CronHealth(readable=False, problem=f"{type(exc).__name__}: {exc}", status="critical")
        return readings, cron_health

    async def _assemble(self, readings: Readings, cron_health: h.CronHealth, nats: h.ClusterHealth,
                        now: datetime) -> h.HealthReport:
        worker_stats = workers.worker_statistics(readings.heartbeats, now)
        stats = queues.queue_statistics(readings)
        verdict = queues.queue_verdict(stats, readings, worker_stats)
        try:
            async with self.units.read() as conn:
                recovery = await recovery_status(conn, now)
        except Exception:  # noqa: BLE001 - unknown is reported as off; the banner says nothing
            recovery = h.QueueRecoveryStatus(active=False)
        status = overall.worst(overall.overall_status(verdict, cron_health, worker_stats, stats.readable), nats.status)
        summary = overall.summary_prose(status, stats, verdict, cron_health, worker_stats, recovery)
        summary += f"\nNATS cluster: {nats.status}: {nats.summary}"
        return h.HealthReport(generated_at=now, overall_status=status, summary=summary, queue=stats, verdict=verdict,
                              cron=cron_health, workers=worker_stats, queue_recovery_mode=recovery, cluster=nats)

    async def _cron(self, readings: Readings, entries: list[ScheduleEntry], waiting: dict[str, datetime],
                    now: datetime) -> h.CronHealth:
        """Every scheduled key judged: its record, its waiting tick (reckoned by its lane's last
        finish, `domain.lanes`), its lower bounds; witnesses are read only for keys whose owed
        ticks are past their grace."""
        bus = self.link.bus
        installed = await asyncio.gather(*(health_reader.schedule_installed_at(bus, ctx_of(e.service), e.job)
                                           for e in entries))
        server_id = await health_reader.nats_server_identity(bus)
        by_consumer = {c.consumer: c for c in readings.consumers if c.stream == Stream.JOBS.value}
        key_waiting = {}
        for e in entries:
            if e.key in waiting:
                c = by_consumer.get(lane_consumer(e))
                key_waiting[e.key] = lanes.waiting_since(c.last_finished_at if c else None, c.created_at if c else None,
                                                         [lanes.WaitingTick(waiting[e.key], e.cadence)])
        async with self.units.read() as conn:
            records = await health_records.key_records(conn, [e.key for e in entries], key_waiting)
            nats_since = await health_records.nats_started_at(conn, server_id)
            worker_stats = workers.worker_statistics(readings.heartbeats, now)
            keys = []
            for entry, schedule_at in zip(entries, installed, strict=True):
                record = records.get(entry.key)
                newest_start = workers.newest_live_start(worker_stats, split_host_service(entry.service)[0])
                lower = cron.lower_bound_for(record, server_started_at=nats_since, installed_at=schedule_at,
                                             newest_worker_start=newest_start)
                owed = cron.owed_ticks(entry, record, now, lower)
                seen = await health_records.witnessed(conn, entry.key, owed) if owed else set()
                disabled = bool({entry.key, f"{split_host_service(entry.service)[0]}.{entry.job}"} & self.disabled_keys)
                lane = by_consumer.get(lane_consumer(entry))
                keys.append(cron.judge_key(entry, record, now, lower, seen, disabled=disabled,
                                           exempt=entry.freshness_exempt,
                                           ceiling=queues.execution_ceiling(entry.lane, self.ceilings),
                                           lane_paused=bool(lane and lane.paused)))
        return cron.cron_health(keys)


def lane_consumer(entry: ScheduleEntry) -> str:
    """The durable consumer of the lane a key's ticks wait on (`JobRunner.consumer_name`)."""
    return f"{health_reader.JOB_CONSUMER_PREFIX}{ctx_of(entry.service)}_{entry.lane}"


def with_waiting(readings: Readings, entries: list[ScheduleEntry], waiting: dict[str, datetime]) -> Readings:
    """Each job lane's `waiting_since`: its waiting scheduled ticks reckoned from its last finish by
    their cadences, and a message enqueued by hand (not one of those ticks) from its own time."""
    by_consumer: dict[str, list[ScheduleEntry]] = {}
    for e in entries:
        by_consumer.setdefault(lane_consumer(e), []).append(e)
    consumers = []
    for c in readings.consumers:
        if c.stream != Stream.JOBS.value or c.ready <= 0:
            consumers.append(c)
            continue
        mine = by_consumer.get(c.consumer, [])
        ticks = [lanes.WaitingTick(waiting[e.key], e.cadence) for e in mine if e.key in waiting]
        scheduled = {job_subject(ctx_of(e.service), e.lane, e.job) for e in mine if e.key in waiting}
        if c.oldest_ready_at is not None and c.oldest_ready_subject not in scheduled:
            ticks.append(lanes.WaitingTick(c.oldest_ready_at))
        consumers.append(replace(c, waiting_since=lanes.waiting_since(c.last_finished_at, c.created_at, ticks)))
    return replace(readings, consumers=consumers)
