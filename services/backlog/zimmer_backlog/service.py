"""The backlog process: its lifecycle (start, serve, stop) around what `bootstrap` builds, and the
tasks it runs beside it while up (the metrics refresh, the one-time import).

The ranked work backlog (seed 000). Owns the PostgreSQL schema `backlog`; talks to other
services only over NATS: it spawns sessions through spot-gate and learns their status from
spot-gate's session events.
"""

from __future__ import annotations

import logging

from zimmer_backlog.bootstrap import BacklogApp, bootstrap
from zimmer_backlog.config import GithubSettings
from zimmer_backlog.importer import ImportSourceUnavailable, import_once_at_start
from zimmer_backlog.store import queue
from zimmer_backlog.store.tables import SCHEMA
from zimmer_common.clock import Clock
from zimmer_common.logs import kv
from zimmer_common.paging import page_or_log
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "backlog"
METRICS_REFRESH_SECONDS = 15.0
log = logging.getLogger("zimmer.backlog")


def build(settings: Settings, clock: Clock | None = None, github: GithubSettings | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_backlog.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    app = bootstrap(service, github or GithubSettings())

    @service.on_start
    async def start_tasks(svc: Service) -> None:
        svc.spawn(refresh_metrics(svc, app), "backlog-metrics")
        svc.spawn(one_time_import(svc, app), "backlog-import")

    return service


async def refresh_metrics(service: Service, app: BacklogApp) -> None:
    """The queue's counts and the Issues view's numbers as metrics, every METRICS_REFRESH_SECONDS
    until the service stops."""
    while not service.stopping:
        try:
            async with app.units.read() as conn:
                app.metrics.observe(await queue.status_counts(conn), await queue.counts(conn, service.clock.now()))
            app.metrics.observe_view(await app.snapshot.view(limit=1))
        except Exception as exc:  # noqa: BLE001 - a missed refresh keeps the last values
            log.warning("backlog metrics refresh failed", extra=kv(error=repr(exc)))
        await service.pause(METRICS_REFRESH_SECONDS)


async def one_time_import(service: Service, app: BacklogApp) -> None:
    """The one-time import, as a start-up task beside the service rather than in front of it. In
    production an unreadable source fails the task loudly (an ERROR line, the ledger row) and the
    next start tries again; it does not take the queue down with it."""
    try:
        report = await import_once_at_start(app.units.engine, service.settings)
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
