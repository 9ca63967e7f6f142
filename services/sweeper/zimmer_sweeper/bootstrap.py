"""The sweeper's composition root: every dependency is built here, once, and handed to the handlers
that need it as an explicit constructor argument; then what the service serves (RPC), consumes and
schedules (jobs, start hooks) is registered on it, concept by concept, in the order it always was.
`service.py` owns only the lifecycle.

The handlers hold no engine: each gets the one `UnitsOfWork` factory and opens a unit of work per
transaction (`units.begin()`), or reads on `units.read()`; the bus, connected at start, is reached
through the one `BusLink`. Each concept's `app.py` builds its own operations from what it is given
(`build_*`) and registers them (`serve_*`); the joins between concepts are made here and nowhere
else: the guard takes a clone's transcript with it through the transcript sweep's reaper, the trash
pipeline deletes through the guard and is the stale cleanup's archived-session pass, and the
free-space monitor reclaims through the orphan clone sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from zimmer_common.bus_link import BusLink
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.clones.app import build_guard, build_sweeps, serve_clones
from zimmer_sweeper.clones.guard import CloneReaper
from zimmer_sweeper.clones.orphans import OrphanCloneSweep
from zimmer_sweeper.clones.stale import StaleCloneCleanup
from zimmer_sweeper.disk.app import build_watch, host_disk, serve_disk_health, watch_disk
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
from zimmer_sweeper.transcripts.app import TranscriptApp, build_transcripts, serve_transcripts
from zimmer_sweeper.trash.app import TrashApp, build_trash, cleanup_soon, serve_trash
from zimmer_sweeper.trash.config import TrashSettings


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
    """The sweeper's operations, as bootstrap wires them (`service.app`, for hooks and tests)."""

    ingest: LogIngest
    retention: LogRetention
    lag: IngestLag
    metrics: SweeperMetrics
    disk: DiskApp  # this host's clones, scratch and attachments: the guard, sweeps, reclaim, monitor
    trash: TrashApp  # archived sessions' clones: cleanup, EmptyTrash, restore on unarchive, mangled report
    transcripts: TranscriptApp  # transcript directories (orphan sweep, the guard's reaper), integrity, archive


def bootstrap(service: Service, *, ingest_settings: LogIngestSettings, disk_settings: DiskSettings,
              trash_settings: TrashSettings, read_volume: VolumeReader | None = None) -> SweeperApp:
    """Build the sweeper's handlers over `service` (not started yet) and register them on it.
    Returns the application, also set as `service.app`."""
    settings, clock, registry = service.settings, service.clock, service.metrics.registry
    pager = attach_pager(service)  # a crashed sweep pages
    units = UnitsOfWork(service, SCHEMA)
    bus = BusLink(service)

    # Built first to last in the order their metrics always registered: logs, disk, trash.
    logs = build_logs(ingest_settings, units=units, bus=bus, clock=clock, pager=pager, page=service.page_error,
                      outages=service.outages, registry=registry)
    host = host_disk(disk_settings, units=units, env=settings.env, host=settings.host, now=clock.now,
                     registry=registry, read=read_volume)
    transcripts = build_transcripts(host, units=units, bus=bus, clock=clock, pager=pager,
                                    replicas=settings.stream_replicas)
    # The guard takes a clone's transcript with it, after its second answer (seed 003 "The guard").
    guard = build_guard(host, bus=bus, pager=pager, reap_transcripts=transcripts.sweep.reap)
    soon = cleanup_soon(service)
    trash = build_trash(host, guard, trash_settings, units=units, bus=bus, host=settings.host, clock=clock,
                        pager=pager, registry=registry, cleanup_soon=soon)
    # The hourly stale cleanup's archived-session pass is the trash pipeline's.
    clones = build_sweeps(host, guard, bus=bus, clock=clock, page=service.page_error,
                          reap_due_archived=trash.archived.sweep)
    watch = build_watch(host, clones.orphans, units=units, host=settings.host, pager=pager, now=clock.now)
    disk = DiskApp(host.roots, host.records, host.metrics, clones.reaper, clones.orphans, clones.stale, watch)
    app = SweeperApp(logs.ingest, logs.retention, logs.lag, logs.metrics, disk, trash, transcripts)
    service.app = app

    # Registered in the order the service always had: jobs, RPCs, consumers and start hooks.
    serve_clones(service, clones)
    watch_disk(service, watch)
    serve_trash(service, trash, soon)
    serve_transcripts(service, transcripts)
    serve_logs(service, logs, units=units, bus=bus)
    serve_disk_health(service, units=units)
    return app
