"""Spot-gate's composition root: every dependency is built here, once, and handed to the handlers
that need it as an explicit constructor argument; then what the service serves (RPC), consumes
(ingest) and schedules (jobs) is registered on it. `service.py` owns only the lifecycle.

The handlers hold no engine: each gets the one `UnitsOfWork` factory and opens a unit of work per
operation (transaction, outbox events and idempotency keys, committed together), or, consuming
ingest, works in the consumer's own transaction (`units.join`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.byte_pages import answer_budget
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import charts as ch
from zimmer_common.contracts import clones as k
from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.clones import CloneReport
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.policy_dry_run import DRY_RUN
from zimmer_common.contracts.runtime import (
    INGEST_QUOTA_READING,
    INGEST_SESSION_STATUS,
    INGEST_SPEND,
    QuotaReadingIn,
    SessionStatusReport,
    SpendReport,
)
from zimmer_common.contracts.subjects import Stream
from zimmer_common.history_store import PointsGauge
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.config import PriceBook, SpotSettings
from zimmer_spot_gate.handlers.admissions import Admissions
from zimmer_spot_gate.handlers.clones import Clones
from zimmer_spot_gate.handlers.deletion import Deletion
from zimmer_spot_gate.handlers.dry_run import DryRuns
from zimmer_spot_gate.handlers.history import PoolHistoryOps
from zimmer_spot_gate.handlers.parks import Parks
from zimmer_spot_gate.handlers.policy import PolicyOps
from zimmer_spot_gate.handlers.queue_ops import QueueOps
from zimmer_spot_gate.handlers.sessions import SpotGate
from zimmer_spot_gate.handlers.snapshot import PoolCache
from zimmer_spot_gate.handlers.trash import Trash
from zimmer_spot_gate.handlers.turns import SCHEMA, TurnGate
from zimmer_spot_gate.handlers.wakes import Wakes
from zimmer_spot_gate.jobs import spot_jobs
from zimmer_spot_gate.jobs.ceiling import CeilingSweep
from zimmer_spot_gate.jobs.stranded_sleep import StrandedSleepSweep
from zimmer_spot_gate.metrics import SpotMetrics
from zimmer_spot_gate.store import quota


def bootstrap(service: Service) -> SpotGate:
    """Build the spot gate's handlers over `service` (not started yet) and register them on it.
    Returns the application, also set as `service.app`."""
    now = service.clock.now
    pager = attach_pager(service)
    units = UnitsOfWork(service, SCHEMA)
    metrics = SpotMetrics(service.metrics.registry)
    prices = PriceBook(SpotSettings().price_table())

    def rows_budget() -> int:
        """One answer's rows, in bytes, on the bus this service answers on (issue 27 #13)."""
        assert service.bus is not None, "used before start"
        return answer_budget(service.bus.payload_room())

    gate = TurnGate(now, PoolCache(units, now), on_decision=lambda reason: metrics.decisions.labels(reason).inc())
    admissions = Admissions(units, gate)
    admissions.batcher.bound(service.settings.max_batch_pending, "spot-gate admissions",
                             service.metrics.batch_pending.labels(service.name, "admissions").set,
                             service.metrics.batch_size.labels(service.name, "admissions").observe)
    wakes = Wakes(units, gate, now, page=service.page_error)
    app = SpotGate(
        units, now, gate, admissions, prices, wakes,
        policy=PolicyOps(units, now, admissions, prices, rows_budget),
        ceiling=CeilingSweep(units, gate, now, on_outcome=lambda kind, n: metrics.ceiling.labels(kind).inc(n)),
        parks=Parks(units, gate, now), stranded_sleep=StrandedSleepSweep(units, gate, now, pager), metrics=metrics)
    service.app = app

    _serve(service, app, rows_budget)
    service.rpc(DRY_RUN)(DryRuns(units, now, on_answer=metrics.dry_run).dry_run)  # the policy dry-run (issue 32 #5)
    trash = Trash(units, gate, on_ended=metrics.session_ended)
    _serve_queue(service, app, QueueOps(units, gate, now), trash, Deletion(units, gate))
    clones = Clones(units)
    _serve_clones(service, clones)
    _consume(service, app, units, clones)
    _schedule(service, app, units)
    _serve_history(service, PoolHistoryOps(units, now, PointsGauge(service.metrics.registry, "spot_pool")))
    return app


def _serve(service: Service, app: SpotGate, rows_budget: Callable[[], int]) -> None:
    """Sessions, turns and the quota pool; the policy, triggers and costs."""
    service.rpc(c.SPAWN)(app.spawn)
    service.rpc(c.GET_SESSION)(app.get)
    service.rpc(c.SESSION_BY_KEY)(app.by_key)

    async def list_sessions(q: c.SessionQuery) -> c.SessionList:
        return await app.search(q, rows_budget())

    async def enqueued_messages(q: c.EnqueuedQuery) -> c.EnqueuedList:
        return await app.enqueued(q, rows_budget())

    service.rpc(c.LIST_SESSIONS)(list_sessions)
    service.rpc(c.UPDATE_SESSION)(app.update)
    service.rpc(c.REORDER)(app.reorder)
    service.rpc(c.REQUEST_TURN)(app.request_turn)
    service.rpc(c.REPORT_STATUS)(app.report_status)
    service.rpc(c.GATE_DECISIONS)(app.decisions)
    service.rpc(c.ENQUEUED)(enqueued_messages)
    service.rpc(c.RECORD_READING)(app.record_reading)

    policy = app.policy
    service.rpc(p.GET_POLICY)(policy.get)
    service.rpc(p.SET_POLICY)(policy.set)
    service.rpc(p.GENESIS_ACTION)(policy.genesis_action)
    service.rpc(p.CREATE_TRIGGER)(policy.create_trigger)
    service.rpc(p.UPDATE_TRIGGER)(policy.update_trigger)
    service.rpc(p.FIRE_TRIGGER)(policy.fire)
    service.rpc(p.INVOKE_TRIGGER)(policy.invoke)

    async def search_triggers(q: p.TriggerQuery) -> p.TriggerList:
        return await policy.search_triggers(q, rows_budget())

    service.rpc(p.SEARCH_TRIGGERS)(search_triggers)
    service.rpc(p.GET_COSTS)(policy.costs)


def _serve_queue(service: Service, app: SpotGate, queue_ops: QueueOps, trash: Trash, deletion: Deletion) -> None:
    """The spot queue's doors, wall-clock pauses, auth-outage parks, the trash and deletion."""
    service.rpc(c.PAUSE_INTO_SPOT_QUEUE)(queue_ops.pause_into_spot_queue)
    service.rpc(c.START_NOW)(queue_ops.start_now)
    service.rpc(c.PAUSE_UNTIL)(app.wakes.pause_until)
    service.rpc(c.RESTART)(app.wakes.restart)
    service.rpc(c.PARK_FOR_AUTH_OUTAGE)(app.parks.park)
    service.rpc(c.ARCHIVE)(trash.archive)
    service.rpc(c.UNARCHIVE)(trash.unarchive)
    service.rpc(k.DELETE_SESSION)(deletion.delete)


def _serve_clones(service: Service, clones: Clones) -> None:
    """What the sweepers ask before they delete anything (issue 16)."""
    service.rpc(k.CLONE_OWNERSHIP)(clones.ownership)
    service.rpc(k.SESSIONS_EXIST)(clones.sessions_exist)
    service.rpc(k.SESSION_CLONES)(clones.session_clones)
    service.rpc(k.RECORD_SESSION_WARNING)(clones.record_warning)
    service.rpc(k.UNARCHIVE_RESTORED)(clones.unarchive_restored)


def _consume(service: Service, app: SpotGate, units: UnitsOfWork, clones: Clones) -> None:
    """The runtime's reports (ingest), each in its consumer's transaction."""

    @service.consume(ConsumerSpec("spot_gate_session_status", Stream.INGEST, (INGEST_SESSION_STATUS,)))
    async def on_status(conn: AsyncConnection, event: EventEnvelope) -> None:
        await app.apply_status(units.join(conn), SessionStatusReport.model_validate(event.data))

    @service.consume(ConsumerSpec("spot_gate_quota_readings", Stream.INGEST, (INGEST_QUOTA_READING,),
                                  after_commit=app.gate.pool.invalidate))
    async def on_reading(conn: AsyncConnection, event: EventEnvelope) -> None:
        await quota.record_reading(conn, QuotaReadingIn.model_validate(event.data), app.now())

    @service.consume(ConsumerSpec("spot_gate_spend", Stream.INGEST, (INGEST_SPEND,)))
    async def on_spend(conn: AsyncConnection, event: EventEnvelope) -> None:
        await app.record_spend_in(conn, SpendReport.model_validate(event.data))

    @service.consume(ConsumerSpec("spot_gate_clones", Stream.INGEST, (k.INGEST_CLONE,)))
    async def on_clone(conn: AsyncConnection, event: EventEnvelope) -> None:
        await clones.record_report(conn, CloneReport.model_validate(event.data), event.occurred_at)


def _schedule(service: Service, app: SpotGate, units: UnitsOfWork) -> None:
    """The jobs (seed 003's cron table names when each runs)."""
    service.job_specs.extend(spot_jobs(units, app.gate, app.now, prices=app.prices.table, page=service.page_error))

    async def fire_wakes(ctx: JobContext) -> None:
        await app.wakes.fire_due()

    async def auth_unpark(ctx: JobContext) -> None:
        await app.parks.unpark()

    async def stranded_sleep_sweep(ctx: JobContext) -> None:
        await app.stranded_sleep.run()

    async def ceiling_sweep(ctx: JobContext) -> None:
        await app.ceiling.run()

    service.job_specs.extend([JobSpec("fire_wakes", "default", fire_wakes),
                              JobSpec("auth_unpark", "default", auth_unpark),
                              JobSpec("stranded_sleep_sweep", "default", stranded_sleep_sweep),
                              JobSpec("ceiling_sweep", "default", ceiling_sweep)])


def _serve_history(service: Service, history: PoolHistoryOps) -> None:
    """The Quotas and Costs charts' history (issue 32 #4): its two reads, the minute's recording and
    the bounded retention (DESIGN §9 "History for charts")."""
    service.rpc(ch.GET_POOL_HISTORY)(history.pool_history)
    service.rpc(ch.GET_COSTS_HISTORY)(history.costs_history)

    async def record_pool_history(ctx: JobContext) -> None:
        await history.record()

    async def pool_history_retention(ctx: JobContext) -> None:
        await history.retain(ctx.progress)

    service.job_specs.extend([JobSpec("record_pool_history", "default", record_pool_history),
                              JobSpec("pool_history_retention", "maintenance", pool_history_retention)])
