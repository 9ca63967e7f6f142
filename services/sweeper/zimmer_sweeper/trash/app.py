"""Wiring of the trash pipeline on this host (issue 16): the archive/unarchive consumer, the
deferred clone cleanup (restores first, then due cleanups), EmptyTrash, the daily mangled clone
report, and the archived-session pass (`bootstrap.py` hands it to the hourly stale clone cleanup).

Every host's sweeper must see every archive (only the host holding the clone acts on it), so the
durable consumer's name carries the host. Archive and unarchive share the one consumer, in stream
order, and each record keeps the highest session version it saw: an unarchive overtaking its
archive (a retried delivery) still wins. The consumer only records; the job does the work, asked for
right after the record commits, and its 30-second cadence catches a request that was lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_ARCHIVED, SESSION_UNARCHIVED, SessionEvent
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.service import Service
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.clones.guard import CloneReaper
from zimmer_sweeper.disk.app import HostDisk
from zimmer_sweeper.trash import store
from zimmer_sweeper.trash.archived_reap import ArchivedCloneReap
from zimmer_sweeper.trash.cleanup import JOB as CLEANUP_JOB
from zimmer_sweeper.trash.cleanup import DeferredCloneCleanup, TrashDeps
from zimmer_sweeper.trash.config import TrashSettings
from zimmer_sweeper.trash.domain import acts_here
from zimmer_sweeper.trash.empty import JOB as EMPTY_JOB
from zimmer_sweeper.trash.empty import EmptyTrash
from zimmer_sweeper.trash.mangled_report import JOB as REPORT_JOB
from zimmer_sweeper.trash.mangled_report import MangledCloneReport
from zimmer_sweeper.trash.metrics import TrashMetrics
from zimmer_sweeper.trash.restore import UnarchiveRestore

log = logging.getLogger("zimmer.sweeper.trash")


@dataclass(frozen=True)
class TrashApp:
    deps: TrashDeps
    cleanup: DeferredCloneCleanup
    restore: UnarchiveRestore
    empty: EmptyTrash
    report: MangledCloneReport
    archived: ArchivedCloneReap


def build_trash(disk: HostDisk, guard: CloneReaper, trash: TrashSettings, *, units: UnitsOfWork, bus: BusLink,
                host: str, clock: Clock, pager: Pager, registry: CollectorRegistry,
                cleanup_soon: Callable[[], None]) -> TrashApp:
    """The trash jobs over `deps`; `cleanup_soon` asks for a deferred_clone_cleanup run now."""
    deps = TrashDeps(units=units, bus=bus, host=host, roots=disk.roots, guard=guard, records=disk.records,
                     disk_metrics=disk.metrics, metrics=TrashMetrics(registry), pager=pager, clock=clock,
                     free_space=disk.free_space, git_timeout=trash.git_timeout_seconds, git_binary=trash.git_binary)
    return TrashApp(deps, DeferredCloneCleanup(deps), UnarchiveRestore(deps), EmptyTrash(deps),
                    MangledCloneReport(deps), ArchivedCloneReap(deps, on_adopted=cleanup_soon))


def cleanup_soon(service: Service) -> Callable[[], None]:
    """Ask for a deferred_clone_cleanup run now (its 30-second cadence catches a request lost)."""

    def soon() -> None:
        if service.host_runner is not None:
            asyncio.ensure_future(_enqueue(service, CLEANUP_JOB))

    return soon


def serve_trash(service: Service, app: TrashApp, soon: Callable[[], None]) -> None:
    """The archive/unarchive consumer (it only records, then asks for a run: `soon`) and the jobs."""
    deps = app.deps

    @service.consume(ConsumerSpec(f"sweeper_{deps.host}_trash", Stream.EVENTS, (SESSION_ARCHIVED, SESSION_UNARCHIVED),
                                  after_commit=soon))
    async def on_trash_event(conn: AsyncConnection, event: EventEnvelope) -> None:
        await record_event(conn, deps, event)

    async def deferred_clone_cleanup(ctx: JobContext) -> None:
        # Restores first: an unarchived session is waiting on its clone, and doing both in one
        # singleton job means a restore and a cleanup never work on one clone at once.
        await app.restore.run()
        await app.cleanup.run()

    async def empty_trash(ctx: JobContext) -> None:
        await app.empty.run()

    async def mangled_clone_report(ctx: JobContext) -> None:
        await app.report.run()

    for name, fn in ((CLEANUP_JOB, deferred_clone_cleanup), (EMPTY_JOB, empty_trash),
                     (REPORT_JOB, mangled_clone_report)):
        service.job_specs.append(JobSpec(name, "maintenance", fn, per_host=True))


async def record_event(conn: AsyncConnection, deps: TrashDeps, event: EventEnvelope) -> None:
    """Write down an archive or an unarchive of a session this host holds; nothing else."""
    view = SessionEvent.model_validate(event.data).session
    clone = Path(view.clone_path) if view.clone_path else None

    def exists_here() -> bool:
        return any(p.exists() for p in ([clone] if clone else []) + deps.session_dirs(view.id))

    if not acts_here(view.clone_host, deps.host, exists_here=exists_here):
        return
    now = deps.clock.now()
    if event.type == "session_archived":
        if view.archived_at is None:
            log.warning("session_archived without an archive time; not recorded", extra=kv(session_id=view.id))
            return
        news = await store.record_archive(conn, session_id=view.id, host=deps.host, clone_path=view.clone_path,
                                          archived_at=view.archived_at, version=view.version, now=now)
    else:
        news = await store.record_unarchive(conn, session_id=view.id, host=deps.host, clone_path=view.clone_path,
                                            version=view.version, now=now)
    if news:
        deps.metrics.recorded.labels(event.type).inc()
        log.info("trash pipeline: session recorded", extra=kv(session_id=view.id, event=event.type,
                                                              clone_path=view.clone_path, version=view.version))


async def _enqueue(service: Service, job: str) -> None:
    try:
        await service.enqueue(job)
    except Exception as exc:  # noqa: BLE001 - its 30-second cadence runs it anyway
        log.warning("could not ask for a job run now; its schedule will run it", extra=kv(job=job, error=repr(exc)))
