"""Wiring of the spot-gate service: what it serves, consumes and schedules, in start-up order.

Sessions, the quota pool and the spot gate (seed 004). Owns the PostgreSQL schema `spot_gate`;
talks to other services only over NATS.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common.byte_pages import answer_budget
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.contracts import clones as k
from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.clones import CloneReport
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.runtime import (
    INGEST_QUOTA_READING, INGEST_SESSION_STATUS, INGEST_SPEND, QuotaReadingIn, SessionStatusReport, SpendReport)
from zimmer_common.contracts.subjects import Stream
from zimmer_common.outbox import OutboxRelay
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings
from zimmer_spot_gate.clones import Clones
from zimmer_spot_gate.config import PriceBook, SpotSettings
from zimmer_spot_gate.deletion import Deletion
from zimmer_spot_gate.handlers import SpotGate
from zimmer_spot_gate.ceiling import CeilingSweep
from zimmer_spot_gate.jobs import spot_jobs
from zimmer_spot_gate.queue_ops import QueueOps
from zimmer_spot_gate.parks import Parks
from zimmer_spot_gate.stranded_sleep import StrandedSleepSweep
from zimmer_spot_gate.trash import Trash
from zimmer_spot_gate.wakes import Wakes
from zimmer_spot_gate.metrics import REFRESH_SECONDS, SpotMetrics
from zimmer_spot_gate.policy import PolicyOps
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.snapshot import PoolCache
from zimmer_spot_gate.turns import TurnGate

log = logging.getLogger("zimmer.spot_gate")
NAME = "spot-gate"
SCHEMA = "spot_gate"


def build(settings: Settings, clock: Clock | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_spot_gate.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    attach_pager(service)

    def engine() -> AsyncEngine:
        assert service.engine is not None, "used before start"
        return service.engine

    def relay() -> OutboxRelay | None:
        return service.relay

    def kick() -> None:
        if service.relay:
            service.relay.kick()

    gate = TurnGate(now=service.clock.now, pool=PoolCache(engine, service.clock.now))
    app = SpotGate(engine, service.clock.now, gate, relay, prices=PriceBook(SpotSettings().price_table()))
    app.admissions.batcher.bound(settings.max_batch_pending, "spot-gate admissions",
                                 service.metrics.batch_pending.labels(NAME, "admissions").set,
                                 service.metrics.batch_size.labels(NAME, "admissions").observe)
    service.app = app
    service.job_specs.extend(spot_jobs(engine, gate, service.clock.now,
                                       on_commit=kick,
                                       prices=app.prices.table, page=service.page_error))

    service.rpc(c.SPAWN)(app.spawn)
    service.rpc(c.GET_SESSION)(app.get)
    service.rpc(c.SESSION_BY_KEY)(app.by_key)

    def budget() -> int:
        """One answer's rows, in bytes, on the bus this service answers on (issue 27 #13)."""
        assert service.bus is not None, "used before start"
        return answer_budget(service.bus.payload_room())

    async def list_sessions(q: c.SessionQuery) -> c.SessionList:
        return await app.search(q, budget())

    async def enqueued_messages(q: c.EnqueuedQuery) -> c.EnqueuedList:
        return await app.enqueued(q, budget())

    service.rpc(c.LIST_SESSIONS)(list_sessions)
    service.rpc(c.UPDATE_SESSION)(app.update)
    service.rpc(c.REORDER)(app.reorder)
    service.rpc(c.REQUEST_TURN)(app.request_turn)
    service.rpc(c.REPORT_STATUS)(app.report_status)
    service.rpc(c.GATE_DECISIONS)(app.decisions)
    service.rpc(c.ENQUEUED)(enqueued_messages)
    service.rpc(c.RECORD_READING)(app.record_reading)

    policy = PolicyOps(engine, service.clock.now, app)
    policy.rows_budget = budget
    app.policy = policy
    service.rpc(p.GET_POLICY)(policy.get)
    service.rpc(p.SET_POLICY)(policy.set)
    service.rpc(p.GENESIS_ACTION)(policy.genesis_action)
    service.rpc(p.CREATE_TRIGGER)(policy.create_trigger)
    service.rpc(p.UPDATE_TRIGGER)(policy.update_trigger)
    service.rpc(p.FIRE_TRIGGER)(policy.fire)
    service.rpc(p.INVOKE_TRIGGER)(policy.invoke)

    async def search_triggers(q: p.TriggerQuery) -> p.TriggerList:
        return await policy.search_triggers(q, budget())

    service.rpc(p.SEARCH_TRIGGERS)(search_triggers)
    service.rpc(p.GET_COSTS)(policy.costs)

    @service.consume(ConsumerSpec("spot_gate_session_status", Stream.INGEST, (INGEST_SESSION_STATUS,)))
    async def on_status(conn: AsyncConnection, event: EventEnvelope) -> None:
        await app.apply_status(conn, SessionStatusReport.model_validate(event.data))

    @service.consume(ConsumerSpec("spot_gate_quota_readings", Stream.INGEST, (INGEST_QUOTA_READING,),
                                  after_commit=gate.pool.invalidate))
    async def on_reading(conn: AsyncConnection, event: EventEnvelope) -> None:
        await quota.record_reading(conn, QuotaReadingIn.model_validate(event.data), service.clock.now())

    @service.consume(ConsumerSpec("spot_gate_spend", Stream.INGEST, (INGEST_SPEND,)))
    async def on_spend(conn: AsyncConnection, event: EventEnvelope) -> None:
        await app.record_spend_in(conn, SpendReport.model_validate(event.data))

    metrics = SpotMetrics(service.metrics.registry)
    app.metrics = metrics
    gate.on_decision = lambda reason: metrics.decisions.labels(reason).inc()

    ceiling = CeilingSweep(engine, gate, service.clock.now,
                           on_commit=kick,
                           on_outcome=lambda kind, n: metrics.ceiling.labels(kind).inc(n))
    app.ceiling = ceiling
    queue_ops = QueueOps(engine, gate, service.clock.now, kick=kick)
    service.rpc(c.PAUSE_INTO_SPOT_QUEUE)(queue_ops.pause_into_spot_queue)
    service.rpc(c.START_NOW)(queue_ops.start_now)
    wakes = Wakes(engine, gate, service.clock.now, kick=kick, page=service.page_error)
    app.wakes = wakes
    service.rpc(c.PAUSE_UNTIL)(wakes.pause_until)
    service.rpc(c.RESTART)(wakes.restart)

    async def fire_wakes(ctx: JobContext) -> None:
        await wakes.fire_due()

    service.job_specs.append(JobSpec("fire_wakes", "default", fire_wakes))
    parks = Parks(engine, gate, service.clock.now, kick=kick)
    app.parks = parks
    service.rpc(c.PARK_FOR_AUTH_OUTAGE)(parks.park)

    async def auth_unpark(ctx: JobContext) -> None:
        await parks.unpark()

    service.job_specs.append(JobSpec("auth_unpark", "default", auth_unpark))
    sleepers = StrandedSleepSweep(engine, gate, service.clock.now, pager=lambda: service.pager,
                                  kick=kick)
    app.stranded_sleep = sleepers

    async def stranded_sleep_sweep(ctx: JobContext) -> None:
        await sleepers.run()

    service.job_specs.append(JobSpec("stranded_sleep_sweep", "default", stranded_sleep_sweep))
    trash = Trash(engine, gate, kick=kick)
    service.rpc(c.ARCHIVE)(trash.archive)
    service.rpc(c.UNARCHIVE)(trash.unarchive)
    deletion = Deletion(engine, gate, kick=kick)
    service.rpc(k.DELETE_SESSION)(deletion.delete)

    # What the sweepers ask before they delete anything (issue 16), and the runtime's clone reports.
    clones = Clones(engine)
    service.rpc(k.CLONE_OWNERSHIP)(clones.ownership)
    service.rpc(k.SESSIONS_EXIST)(clones.sessions_exist)
    service.rpc(k.SESSION_CLONES)(clones.session_clones)
    service.rpc(k.RECORD_SESSION_WARNING)(clones.record_warning)
    service.rpc(k.UNARCHIVE_RESTORED)(clones.unarchive_restored)

    @service.consume(ConsumerSpec("spot_gate_clones", Stream.INGEST, (k.INGEST_CLONE,)))
    async def on_clone(conn: AsyncConnection, event: EventEnvelope) -> None:
        await clones.record_report(conn, CloneReport.model_validate(event.data), event.occurred_at)

    async def ceiling_sweep(ctx: JobContext) -> None:
        await ceiling.run()

    service.job_specs.append(JobSpec("ceiling_sweep", "default", ceiling_sweep))

    async def refresh_metrics() -> None:
        while not service.stopping:
            try:
                metrics.observe(await policy.get())
                metrics.observe_costs(await policy.costs())
            except Exception as exc:  # noqa: BLE001 - a missed refresh leaves the last values
                log.warning("spot metrics refresh failed", extra=kv(error=repr(exc)))
            await service.pause(REFRESH_SECONDS)

    @service.on_start
    async def start_metrics(svc: Service) -> None:
        svc.spawn(refresh_metrics(), "spot-metrics")

    return service
