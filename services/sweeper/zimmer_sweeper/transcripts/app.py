"""Wiring of the sweeper's transcript duties and the live clone check on this host (issue 16): the
orphan transcript sweep (six-hourly), the transcript reaper the guard calls once a clone is gone,
live clone integrity (hourly at :40) and the transcript archive (every 10 minutes). Each job runs on
every host's sweeper against its own disk; a deleted session's archived zip goes once, on whichever
sweeper takes the event."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common.budget import SweepBudget
from zimmer_common.bus import Bus
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted
from zimmer_common.contracts.subjects import Stream
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.service import Service
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
    sweep: TranscriptSweep  # the orphan sweep, and `reap`, which the guard calls (plugged in by service.py)
    integrity: LiveCloneIntegrity
    archive: TranscriptArchive


def wire_transcripts(service: Service, pager: Any, disk: HostDisk, *, engine: Callable[[], AsyncEngine],
                     bus: Callable[[], Bus]) -> TranscriptApp:
    clock = service.clock
    sweep = TranscriptSweep(bus=bus, roots=disk.roots, records=disk.records, now=clock.now, metrics=disk.metrics,
                            free_space=disk.free_space)
    integrity = LiveCloneIntegrity(bus=bus, engine=engine, records=disk.records, now=clock.now,
                                   pager=lambda: pager, metrics=disk.metrics)
    archive = TranscriptArchive(bus=bus, engine=engine, roots=disk.roots, records=disk.records, now=clock.now,
                                metrics=disk.metrics, replicas=service.settings.stream_replicas)

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

    return TranscriptApp(sweep, integrity, archive)
