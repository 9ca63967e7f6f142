"""Wiring of the sweeper service: its five concepts, each wired by its own `app.py`, joined here
in start-up order. Owns the PostgreSQL schema `sweeper`; talks to other services only over NATS.

- logs/: session log lines, ingested, served as a timeline and kept under two retention windows;
- disk/: this host's roots and fences, what every sweep records, the free-space monitor;
- clones/: the ownership guard, the orphan clone sweep (and its reclaim), the stale cleanup;
- trash/: archived sessions' clones: preserved, reaped, restored on unarchive, emptied;
- transcripts/: transcript directories (orphan sweep, the guard's reaper), live clone integrity,
  the transcript archive.

The joins between concepts are made here and nowhere else: the monitor reclaims through the orphan
clone sweep, the trash pipeline deletes through the guard and adds its archived-session pass to the
stale cleanup, and the guard takes a clone's transcript with it through the transcript sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_common.pager import attach_pager
from zimmer_common.bus import Bus
from zimmer_common.clock import Clock
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings
from zimmer_sweeper.clones.app import wire_clones
from zimmer_sweeper.clones.guard import CloneReaper
from zimmer_sweeper.clones.orphans import OrphanCloneSweep
from zimmer_sweeper.clones.stale import StaleCloneCleanup
from zimmer_sweeper.disk.app import host_disk, serve_disk_health, watch_disk
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.volumes import Roots
from zimmer_sweeper.disk.watch import DiskWatch, VolumeReader
from zimmer_sweeper.logs.app import build_logs, serve_logs
from zimmer_sweeper.logs.config import LogIngestSettings
from zimmer_sweeper.logs.ingest import LogIngest
from zimmer_sweeper.logs.ingest_lag import IngestLag
from zimmer_sweeper.logs.metrics import SweeperMetrics
from zimmer_sweeper.logs.retention import LogRetention
from zimmer_sweeper.schema import SCHEMA
from zimmer_sweeper.transcripts.app import TranscriptApp, wire_transcripts
from zimmer_sweeper.trash.app import TrashApp, wire_trash
from zimmer_sweeper.trash.config import TrashSettings

NAME = "sweeper"


@dataclass(frozen=True)
class DiskApp:
    """This host's disk duties, as wired: its roots and records (disk/), the guard and the clone
    sweeps (clones/), and the free-space monitor (disk/)."""

    roots: Roots
    records: DiskRecords
    metrics: DiskMetrics
    reaper: CloneReaper  # the guard: every deletion of a clone a session could own goes through it
    orphans: OrphanCloneSweep
    stale: StaleCloneCleanup
    watch: DiskWatch


@dataclass(frozen=True)
class SweeperApp:
    """The sweeper's operations, as the service wires them (for hooks and tests)."""

    ingest: LogIngest
    retention: LogRetention
    lag: IngestLag
    metrics: SweeperMetrics
    disk: DiskApp  # this host's clones, scratch and attachments: the guard, sweeps, reclaim, monitor
    trash: TrashApp  # archived sessions' clones: cleanup, EmptyTrash, restore on unarchive, mangled report
    transcripts: TranscriptApp  # transcript directories (orphan sweep, the guard's reaper), integrity, archive


def build(settings: Settings, clock: Clock | None = None, ingest_settings: LogIngestSettings | None = None,
          disk_settings: DiskSettings | None = None, read_volume: VolumeReader | None = None,
          trash_settings: TrashSettings | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_sweeper.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    pager = attach_pager(service)  # a crashed sweep pages

    def engine() -> AsyncEngine:
        assert service.engine is not None, "used before start"
        return service.engine

    def bus() -> Bus:
        assert service.bus is not None, "used before start"
        return service.bus

    logs = build_logs(service, pager, ingest_settings or LogIngestSettings(), engine=engine, bus=bus)
    host = host_disk(service, disk_settings or DiskSettings(), engine=engine, read=read_volume)
    clones = wire_clones(service, pager, host, bus=bus)
    watch = watch_disk(service, pager, host, clones.orphans, engine=engine)
    disk = DiskApp(host.roots, host.records, host.metrics, clones.reaper, clones.orphans, clones.stale, watch)
    trash = wire_trash(service, pager, host, clones.reaper, trash_settings)
    clones.stale.reap_due_archived = trash.archived.sweep  # the hourly stale cleanup's archived-session pass
    transcripts = wire_transcripts(service, pager, host, engine=engine, bus=bus)
    # The guard takes a clone's transcript with it, after its second answer (seed 003 "The guard").
    clones.reaper.reap_transcripts = transcripts.sweep.reap
    service.app = SweeperApp(logs.ingest, logs.retention, logs.lag, logs.metrics, disk, trash, transcripts)
    serve_logs(service, logs, engine=engine, bus=bus)
    serve_disk_health(service, engine=engine)
    return service
