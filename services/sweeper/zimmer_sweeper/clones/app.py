"""Wiring of the clone sweeps on this host (issue 16): the guard, the orphan clone sweep and its
reclaim_space RPC, the hourly stale clone cleanup, and a deleted session's directories. One sweeper
runs beside each runtime host's disk, so the jobs are per host, the RPC subject carries the host,
and the session_deleted consumer's name carries it too (every host must see every deletion)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.bus import Bus
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts.disk import ReclaimReport, ReclaimSpace, reclaim_space_spec
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
from zimmer_sweeper.disk.app import HostDisk

log = logging.getLogger("zimmer.sweeper.disk")


@dataclass(frozen=True)
class CloneApp:
    reaper: CloneReaper  # the guard: every deletion of a clone a session could own goes through it
    orphans: OrphanCloneSweep
    stale: StaleCloneCleanup


def wire_clones(service: Service, pager: Any, host: HostDisk, *, bus: Callable[[], Bus]) -> CloneApp:
    settings = service.settings
    roots, records, metrics = host.roots, host.records, host.metrics
    reaper = CloneReaper(bus=bus, roots=roots, records=records, pager=lambda: pager, metrics=metrics)
    orphans = OrphanCloneSweep(bus=bus, reaper=reaper, roots=roots, records=records, metrics=metrics,
                               clock=service.clock, free_space=host.free_space)
    stale = StaleCloneCleanup(bus=bus, roots=roots, records=records, metrics=metrics, clock=service.clock,
                              free_space=host.free_space, page=service.page_error)

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

    return CloneApp(reaper, orphans, stale)
