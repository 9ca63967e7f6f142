"""The backlog's composition root: every dependency is built here, once, and handed to the handlers
that need it as an explicit constructor argument; then what the service serves (RPC), consumes
(spot-gate's session events) and schedules (`jobs.backlog_jobs`) is registered on it, in that
order. `service.py` owns only the lifecycle.

The handlers hold no engine and no bus: each gets the one `UnitsOfWork` factory and opens a unit of
work per operation (transaction, outbox events and idempotency keys, committed together), or,
consuming an event, works in the consumer's own transaction (`units.join`); what they ask spot-gate
they ask through `SpotGateClient`, over the started service's bus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_backlog.config import GithubSettings
from zimmer_backlog.handlers import session_events
from zimmer_backlog.handlers.backlog import Backlog
from zimmer_backlog.handlers.holds import Holds
from zimmer_backlog.handlers.pull import Puller
from zimmer_backlog.handlers.spot import SpotGateClient
from zimmer_backlog.handlers.start import Starter
from zimmer_backlog.jobs import backlog_jobs
from zimmer_backlog.jobs.liveness import LivenessSweep
from zimmer_backlog.jobs.snapshot import GithubSnapshot
from zimmer_backlog.metrics import BacklogMetrics
from zimmer_backlog.store.tables import SCHEMA
from zimmer_common.bus_link import BusLink
from zimmer_common.byte_pages import answer_budget
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_CREATED, SESSION_DELETED, SESSION_STATUS_CHANGED
from zimmer_common.contracts.subjects import Stream
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service
from zimmer_common.unit_of_work import UnitsOfWork


@dataclass(frozen=True)
class BacklogApp:
    """The backlog's operations, as the bootstrap wires them (for hooks and tests)."""

    backlog: Backlog
    puller: Puller
    starter: Starter
    metrics: BacklogMetrics
    holds: Holds
    liveness: LivenessSweep
    snapshot: GithubSnapshot
    units: UnitsOfWork


def bootstrap(service: Service, github: GithubSettings) -> BacklogApp:
    """Build the backlog's handlers over `service` (not started yet) and register them on it.
    Returns the application, also set as `service.app`."""
    pager = attach_pager(service)
    units = UnitsOfWork(service, SCHEMA)
    metrics = BacklogMetrics(service.metrics.registry)
    github_client = github.client(on_request=metrics.github_request)
    spot = SpotGateClient(BusLink(service))

    def on_removed(reason: str) -> None:
        metrics.removals.labels(reason).inc()

    def on_listed(repo: str, n: int) -> None:
        metrics.github_open_issues.labels(repo).set(n)

    backlog = Backlog(units, service.clock, service.outages, on_appended=metrics.appends.inc, on_removed=on_removed)
    backlog.batcher.bound(service.settings.max_batch_pending, "backlog appends",
                          service.metrics.batch_pending.labels(service.name, "appends").set,
                          service.metrics.batch_size.labels(service.name, "appends").observe)
    starter = Starter(units, spot)
    app = BacklogApp(
        backlog, Puller(units, spot, starter, on_removed=on_removed), starter, metrics, Holds(units, service.clock),
        LivenessSweep(units, github_client, pager, service.clock, metrics),
        GithubSnapshot(units, github_client, service.clock, github.repos(), on_listed=on_listed), units)
    service.app = app

    def rows_budget() -> int:
        """One answer's rows, in bytes, on the bus this service answers on (issue 27 #13)."""
        assert service.bus is not None, "used before start"
        return answer_budget(service.bus.payload_room())

    _serve(service, app, rows_budget)
    _consume(service, units)
    service.job_specs.extend(backlog_jobs(app.starter, app.liveness, app.snapshot))
    return app


def _serve(service: Service, app: BacklogApp, rows_budget: Callable[[], int]) -> None:
    """The queue's operations: list, append, pull, start now, pin, remove, hold, the Issues view."""
    metrics = app.metrics

    async def pull(req: c.PullItems) -> c.PullResult:
        result = await app.puller.pull(req)
        metrics.pulled.labels("pull").inc(len(result.started))
        return result

    async def start_now(req: c.ItemRef) -> c.StartNowResult:
        result = await app.puller.start_now(req)
        metrics.pulled.labels("start_now").inc()
        return result

    async def list_items(req: c.ItemQuery) -> c.ItemList:
        return await app.backlog.list(req, rows_budget())

    service.rpc(c.GET_ITEMS)(list_items)
    service.rpc(c.APPEND)(app.backlog.append)
    service.rpc(c.APPEND_MANY)(app.backlog.append_many)
    service.rpc(c.PULL)(pull)
    service.rpc(c.START_NOW)(start_now)
    service.rpc(c.PIN)(app.backlog.pin)
    service.rpc(c.UNPIN)(app.backlog.unpin)
    service.rpc(c.REMOVE)(app.backlog.remove)

    async def hold(req: c.HoldItem) -> c.ItemView:
        item = await app.holds.hold(req)
        metrics.holds.inc()
        return item

    async def view_issues(req: c.IssuesViewQuery) -> c.IssuesView:
        return await app.snapshot.view(req.limit, rows_budget(), stranded_offset=req.stranded_offset,
                                       awaiting_offset=req.awaiting_offset)

    service.rpc(c.HOLD)(hold)
    service.rpc(c.ISSUES_VIEW)(view_issues)


def _consume(service: Service, units: UnitsOfWork) -> None:
    """Spot-gate's session events, each in its consumer's transaction."""

    @service.consume(ConsumerSpec("backlog_session_events", Stream.EVENTS, (SESSION_CREATED, SESSION_STATUS_CHANGED)))
    async def on_session_event(conn: AsyncConnection, event: EventEnvelope) -> None:
        await session_events.on_session_event(units.join(conn), event)

    @service.consume(ConsumerSpec("backlog_session_deleted", Stream.EVENTS, (SESSION_DELETED,)))
    async def on_session_deleted(conn: AsyncConnection, event: EventEnvelope) -> None:
        await session_events.on_session_deleted(units.join(conn), event)
