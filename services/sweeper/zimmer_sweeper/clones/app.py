"""Wiring of the sweeper's disk duties on this host (issue 16): the guard, the orphan clone sweep
and its reclaim_space RPC, the hourly stale clone cleanup, a deleted session's directories, and the
free-space monitor. One sweeper runs beside each runtime host's disk, so the jobs are per host, the
RPC subject carries the host, and the session_deleted consumer's name carries it too (every host
must see every deletion)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common.bus import Bus
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts.disk import ROOT_NAMES, ReclaimReport, ReclaimSpace, reclaim_space_spec
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.service import Service
from zimmer_sweeper.clones.guard import CloneReaper
from zimmer_sweeper.clones.orphans import SWEEP_JOB, OrphanCloneSweep
from zimmer_sweeper.clones.stale import JOB as STALE_JOB
from zimmer_sweeper.clones.stale import StaleCloneCleanup
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.volumes import Roots, read_volume
from zimmer_sweeper.disk.watch import DiskWatch, VolumeReader

log = logging.getLogger("zimmer.sweeper.disk")


@dataclass(frozen=True)
class DiskApp:
    roots: Roots
    records: DiskRecords
    metrics: DiskMetrics
    reaper: CloneReaper  # the guard: every deletion of a clone a session could own goes through it
    orphans: OrphanCloneSweep
    stale: StaleCloneCleanup
    watch: DiskWatch


def wire_disk(service: Service, pager: Any, disk: DiskSettings, *, engine: Callable[[], AsyncEngine],
              bus: Callable[[], Bus], read: VolumeReader | None = None) -> DiskApp:
    settings = service.settings
    read = read or read_volume

    def free_space(path: Path) -> int:
        return read(path).free_bytes

    roots = Roots(disk, settings.env)
    records = DiskRecords(engine, settings.host, service.clock.now)
    metrics = DiskMetrics(service.metrics.registry)
    reaper = CloneReaper(bus=bus, roots=roots, records=records, pager=lambda: pager, metrics=metrics)
    orphans = OrphanCloneSweep(bus=bus, reaper=reaper, roots=roots, records=records, metrics=metrics,
                               clock=service.clock, free_space=free_space)
    stale = StaleCloneCleanup(bus=bus, roots=roots, records=records, metrics=metrics, clock=service.clock,
                              free_space=free_space, page=service.page_error)
    watch = DiskWatch(roots=roots, disk=disk, sweep=orphans, engine=engine, host=settings.host,
                      pager=lambda: pager, metrics=metrics, now=service.clock.now, read=read)

    async def orphan_clone_sweep(ctx: JobContext) -> None:
        await orphans.sweep()

    async def stale_clone_cleanup(ctx: JobContext) -> None:
        await stale.run()

    service.job_specs.append(JobSpec(SWEEP_JOB, "maintenance", orphan_clone_sweep, per_host=True))
    service.job_specs.append(JobSpec(STALE_JOB, "maintenance", stale_clone_cleanup, per_host=True))

    async def reclaim_space(req: ReclaimSpace) -> ReclaimReport:
        return await orphans.reclaim_space(req.target_free_bytes)

    service.rpc(reclaim_space_spec(settings.host))(reclaim_space)

    @service.consume(ConsumerSpec(f"sweeper_{settings.host}_session_dirs", Stream.EVENTS, (SESSION_DELETED,)))
    async def on_session_deleted(conn: AsyncConnection, event: EventEnvelope) -> None:
        deleted = SessionDeleted.model_validate(event.data)
        removed = await stale.remove_session_directories(deleted.session_id)
        if removed:
            log.info("deleted session's directories removed", extra=kv(
                session_id=deleted.session_id, paths=[r.path for r in removed]))

    async def monitor() -> None:
        while not service.stopping:
            try:
                await watch.check()
            except Exception as exc:  # noqa: BLE001 - the next check tries again
                if service.outages.report(exc, where="sweeper free-space monitor") is None:
                    log.warning("free-space check failed", extra=kv(error=repr(exc)[:300]))
            await service.pause(disk.free_check_seconds)

    @service.on_start
    async def start_monitor(svc: Service) -> None:
        # A sweeper with no root configured has no disk here to watch (and writes no readings).
        if any(roots.path(name) is not None for name in ROOT_NAMES):
            svc.spawn(monitor(), "sweeper-free-space")

    return DiskApp(roots, records, metrics, reaper, orphans, stale, watch)
