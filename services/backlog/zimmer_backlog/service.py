"""Wiring of the backlog service: what it serves, consumes and schedules, in start-up order.

The ranked work backlog (seed 000). Owns the PostgreSQL schema `backlog`; talks to other
services only over NATS: it spawns sessions through spot-gate and learns their status from
spot-gate's session events.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_backlog import store
from zimmer_backlog.backlog import SCHEMA, Backlog
from zimmer_backlog.config import GithubSettings
from zimmer_backlog.holds import Holds
from zimmer_backlog.liveness import LivenessSweep
from zimmer_backlog.snapshot import GithubSnapshot, issues_view
from zimmer_backlog.importer import ImportSourceUnavailable, import_once_at_start
from zimmer_backlog.metrics import BacklogMetrics
from zimmer_backlog.pull import Puller
from zimmer_backlog.start import Starter
from zimmer_common.bus import Bus
from zimmer_common.byte_pages import answer_budget
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.spot import SESSION_CREATED, SESSION_DELETED, SESSION_STATUS_CHANGED
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.pager import attach_pager
from zimmer_common.paging import page_or_log
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "backlog"


@dataclass(frozen=True)
class BacklogApp:
    """The backlog's operations, as the service wires them (for hooks and tests)."""

    backlog: Backlog
    puller: Puller
    starter: Starter
    metrics: BacklogMetrics
    holds: Holds
    liveness: LivenessSweep
    snapshot: GithubSnapshot

METRICS_REFRESH_SECONDS = 15.0
log = logging.getLogger("zimmer.backlog")


def build(settings: Settings, clock: Clock | None = None, github: GithubSettings | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_backlog.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    pager = attach_pager(service)
    github = github or GithubSettings()

    def engine() -> AsyncEngine:
        assert service.engine is not None, "used before start"
        return service.engine

    def bus() -> Bus:
        assert service.bus is not None, "used before start"
        return service.bus

    def kick() -> None:
        if service.relay:
            service.relay.kick()

    metrics = BacklogMetrics(service.metrics.registry)
    github_client = github.client(on_request=metrics.github_request)
    backlog = Backlog(engine, lambda: service.relay, clock=service.clock, outages=service.outages)
    backlog.batcher.bound(settings.max_batch_pending, "backlog appends",
                          service.metrics.batch_pending.labels(NAME, "appends").set,
                          service.metrics.batch_size.labels(NAME, "appends").observe)
    backlog.on_appended = metrics.appends.inc
    backlog.on_removed = lambda reason: metrics.removals.labels(reason).inc()
    starter = Starter(engine, bus, kick)
    puller = Puller(engine, bus, starter, kick, on_removed=backlog.on_removed)
    holds = Holds(engine, service.clock, kick)
    sweep = LivenessSweep(engine, lambda: github_client, lambda: pager, service.clock, metrics)
    snapshot = GithubSnapshot(engine, lambda: github_client, service.clock, github.repos(),
                              on_listed=lambda repo, n: metrics.github_open_issues.labels(repo).set(n))
    service.app = BacklogApp(backlog, puller, starter, metrics, holds, sweep, snapshot)

    async def pull(req: c.PullItems) -> c.PullResult:
        result = await puller.pull(req)
        metrics.pulled.labels("pull").inc(len(result.started))
        return result

    async def start_now(req: c.ItemRef) -> c.StartNowResult:
        result = await puller.start_now(req)
        metrics.pulled.labels("start_now").inc()
        return result

    async def list_items(req: c.ItemQuery) -> c.ItemList:
        return await backlog.list(req, answer_budget(bus().payload_room()))

    service.rpc(c.GET_ITEMS)(list_items)
    service.rpc(c.APPEND)(backlog.append)
    service.rpc(c.APPEND_MANY)(backlog.append_many)
    service.rpc(c.PULL)(pull)
    service.rpc(c.START_NOW)(start_now)
    service.rpc(c.PIN)(backlog.pin)
    service.rpc(c.UNPIN)(backlog.unpin)
    service.rpc(c.REMOVE)(backlog.remove)

    async def hold(req: c.HoldItem) -> c.ItemView:
        item = await holds.hold(req)
        metrics.holds.inc()
        return item

    async def view_issues(req: c.IssuesViewQuery) -> c.IssuesView:
        return await issues_view(engine(), service.clock.now(), req.limit, answer_budget(bus().payload_room()),
                                 stranded_offset=req.stranded_offset, awaiting_offset=req.awaiting_offset)

    service.rpc(c.HOLD)(hold)
    service.rpc(c.ISSUES_VIEW)(view_issues)
    service.consume(ConsumerSpec("backlog_session_events", Stream.EVENTS,
                                 (SESSION_CREATED, SESSION_STATUS_CHANGED)))(backlog.on_session_event)
    service.consume(ConsumerSpec("backlog_session_deleted", Stream.EVENTS, (SESSION_DELETED,)))(
        backlog.on_session_deleted)

    async def recover_starting(ctx: JobContext) -> None:
        """Finish or roll back items an interrupted start left `starting`, with the same key."""
        outcomes = await starter.recover()
        if outcomes:
            log.info("recovered starting items", extra=kv(outcomes=[type(o).__name__ for o in outcomes]))

    service.job_specs.append(JobSpec("recover_starting", "default", recover_starting))

    async def liveness_sweep(ctx: JobContext) -> None:
        await sweep.run()

    async def github_snapshot(ctx: JobContext) -> None:
        await snapshot.run()

    service.job_specs.append(JobSpec("liveness_sweep", "pollers", liveness_sweep))
    service.job_specs.append(JobSpec("github_snapshot", "pollers", github_snapshot))

    async def refresh_metrics() -> None:
        while not service.stopping:
            try:
                async with engine().connect() as conn:
                    metrics.observe(await store.status_counts(conn), await store.counts(conn, service.clock.now()))
                metrics.observe_view(await issues_view(engine(), service.clock.now(), limit=1))
            except Exception as exc:  # noqa: BLE001 - a missed refresh keeps the last values
                log.warning("backlog metrics refresh failed", extra=kv(error=repr(exc)))
            await service.pause(METRICS_REFRESH_SECONDS)

    async def one_time_import() -> None:
        """The one-time import, as a start-up task beside the service rather than in front of
        it. In production an unreadable source fails the task loudly (an ERROR line, the ledger
        row) and the next start tries again; it does not take the queue down with it."""
        try:
            report = await import_once_at_start(engine(), settings)
            if report is not None:
                log.info("work backlog imported", extra=kv(source=report.source, inserted=report.inserted,
                                                           skipped=len(report.skipped), error=report.error))
        except ImportSourceUnavailable as exc:
            await page_or_log(service.page_error, "Work backlog import failed", "the one-time import's source could "
                              "not be read; the next start tries again", ["import", "source_unavailable"],
                              snippet_source=str(exc))
        except Exception as exc:  # noqa: BLE001 - the import is a task; its failure pages, it is not fatal
            await page_or_log(service.page_error, "Work backlog import failed", "the one-time import failed; the "
                              "next start tries again", ["import", type(exc).__name__], snippet_source=exc)

    @service.on_start
    async def start_tasks(svc: Service) -> None:
        svc.spawn(refresh_metrics(), "backlog-metrics")
        svc.spawn(one_time_import(), "backlog-import")

    return service
