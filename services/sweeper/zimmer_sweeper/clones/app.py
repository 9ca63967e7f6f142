"""Wiring of the clone sweeps on this host (issue 16): the guard, the orphan clone sweep and its
reclaim_space RPC, the hourly stale clone cleanup, and a deleted session's directories. One sweeper
runs beside each runtime host's disk, so the jobs are per host, the RPC subject carries the host,
and the session_deleted consumer's name carries it too (every host must see every deletion)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts.disk import ReclaimReport, ReclaimSpace, reclaim_space_spec
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.paging import PageFn
from zimmer_common.service import Service
from zimmer_sweeper.clones.guard import CloneReaper, TranscriptReaper
from zimmer_sweeper.clones.orphans import SWEEP_JOB, OrphanCloneSweep
from zimmer_sweeper.clones.stale import JOB as STALE_JOB
from zimmer_sweeper.clones.stale import ArchivedReaper, StaleCloneCleanup
from zimmer_sweeper.disk.app import HostDisk

log = logging.getLogger("zimmer.sweeper.disk")


@dataclass(frozen=True)
class CloneApp:
    reaper: CloneReaper  # the guard: every deletion of a clone a session could own goes through it
    orphans: OrphanCloneSweep
    stale: StaleCloneCleanup


def build_guard(host: HostDisk, *, bus: BusLink, pager: Pager, reap_transcripts: TranscriptReaper) -> CloneReaper:
    """The ownership guard; once a clone is gone it takes the clone's transcript with it through
    `reap_transcripts` (the transcript sweep's reaper, handed over by bootstrap)."""
    return CloneReaper(bus=bus, roots=host.roots, records=host.records, pager=pager, metrics=host.metrics,
                       reap_transcripts=reap_transcripts)


def build_sweeps(host: HostDisk, reaper: CloneReaper, *, bus: BusLink, clock: Clock, page: PageFn,
                 reap_due_archived: ArchivedReaper) -> CloneApp:
    """The orphan clone sweep and the stale cleanup, whose archived-session pass is
    `reap_due_archived` (the trash pipeline's, handed over by bootstrap)."""
    orphans = OrphanCloneSweep(bus=bus, reaper=reaper, roots=host.roots, records=host.records, metrics=host.metrics,
                               clock=clock, free_space=host.free_space)
    stale = StaleCloneCleanup(bus=bus, roots=host.roots, records=host.records, metrics=host.metrics, clock=clock,
                              free_space=host.free_space, reap_due_archived=reap_due_archived, page=page)
    return CloneApp(reaper, orphans, stale)


def serve_clones(service: Service, clones: CloneApp) -> None:
    """The sweeps' per-host jobs, the reclaim_space RPC and a deleted session's directories."""
    orphans, stale, host = clones.orphans, clones.stale, service.settings.host

    async def orphan_clone_sweep(ctx: JobContext) -> None:
        await orphans.sweep()

    async def stale_clone_cleanup(ctx: JobContext) -> None:
        await stale.run()

    service.job_specs.append(JobSpec(SWEEP_JOB, "maintenance", orphan_clone_sweep, per_host=True))
    service.job_specs.append(JobSpec(STALE_JOB, "maintenance", stale_clone_cleanup, per_host=True))

    async def reclaim_space(req: ReclaimSpace) -> ReclaimReport:
        return await orphans.reclaim_space(req.target_free_bytes)

    service.rpc(reclaim_space_spec(host))(reclaim_space)

    @service.consume(ConsumerSpec(f"sweeper_{host}_session_dirs", Stream.EVENTS, (SESSION_DELETED,)))
    async def on_session_deleted(conn: AsyncConnection, event: EventEnvelope) -> None:
        deleted = SessionDeleted.model_validate(event.data)
        removed = await stale.remove_session_directories(deleted.session_id)
        if removed:
            log.info("deleted session's directories removed", extra=kv(
                session_id=deleted.session_id, paths=[r.path for r in removed]))
