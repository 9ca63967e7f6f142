"""Wiring of the sweeper's transcript duties and the live clone check on this host (issue 16): the
orphan transcript sweep (six-hourly), the transcript reaper the guard calls once a clone is gone,
live clone integrity (hourly at :40) and the transcript archive (every 10 minutes). Each job runs on
every host's sweeper against its own disk; a deleted session's archived zip goes once, on whichever
sweeper takes the event."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.budget import SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.pager import Pager
from zimmer_common.service import Service
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.disk.app import HostDisk
from zimmer_sweeper.disk.domain import SWEEP_BUDGET_SECONDS
from zimmer_sweeper.transcripts.archive import BUDGET_SECONDS as ARCHIVE_BUDGET_SECONDS
from zimmer_sweeper.transcripts.archive import JOB as ARCHIVE_JOB
from zimmer_sweeper.transcripts.archive import TranscriptArchive
from zimmer_sweeper.transcripts.integrity import JOB as INTEGRITY_JOB
from zimmer_sweeper.transcripts.integrity import LiveCloneIntegrity
from zimmer_sweeper.transcripts.sweep import JOB as SWEEP_JOB
from zimmer_sweeper.transcripts.sweep import TranscriptSweep

log = logging.getLogger("zimmer.sweeper.transcripts")


@dataclass(frozen=True)
class TranscriptApp:
    sweep: TranscriptSweep  # the orphan sweep, and `reap`, which the guard calls (handed to it by bootstrap)
    integrity: LiveCloneIntegrity
    archive: TranscriptArchive


def build_transcripts(disk: HostDisk, *, units: UnitsOfWork, bus: BusLink, clock: Clock, pager: Pager,
                      replicas: int) -> TranscriptApp:
    sweep = TranscriptSweep(bus=bus, roots=disk.roots, records=disk.records, now=clock.now, metrics=disk.metrics,
                            free_space=disk.free_space)
    integrity = LiveCloneIntegrity(bus=bus, units=units, records=disk.records, now=clock.now, pager=pager,
                                   metrics=disk.metrics)
    archive = TranscriptArchive(bus=bus, units=units, roots=disk.roots, records=disk.records, now=clock.now,
                                metrics=disk.metrics, replicas=replicas)
    return TranscriptApp(sweep, integrity, archive)


def serve_transcripts(service: Service, transcripts: TranscriptApp) -> None:
    """The three per-host jobs, and a deleted session's archived zip."""
    clock, sweep, integrity, archive = service.clock, transcripts.sweep, transcripts.integrity, transcripts.archive

    async def orphan_transcript_sweep(ctx: JobContext) -> None:
        await sweep.run(SweepBudget(SWEEP_BUDGET_SECONDS, clock))

    async def live_clone_integrity(ctx: JobContext) -> None:
        await integrity.run()

    async def transcript_archive(ctx: JobContext) -> None:
        await archive.run(SweepBudget(ARCHIVE_BUDGET_SECONDS, clock))

    service.job_specs.append(JobSpec(SWEEP_JOB, "maintenance", orphan_transcript_sweep, per_host=True))
    service.job_specs.append(JobSpec(INTEGRITY_JOB, "maintenance", live_clone_integrity, per_host=True))
    service.job_specs.append(JobSpec(ARCHIVE_JOB, "maintenance", transcript_archive, per_host=True))

    @service.consume(ConsumerSpec("sweeper_transcript_archive_deleted", Stream.EVENTS, (SESSION_DELETED,)))
    async def on_session_deleted(conn: AsyncConnection, event: EventEnvelope) -> None:
        await archive.forget(conn, SessionDeleted.model_validate(event.data).session_id)
