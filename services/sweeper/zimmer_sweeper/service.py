"""The sweeper process: its lifecycle (start, serve, stop) around what `bootstrap` builds.

Session logs, clones, transcripts and trash (seed 003), one subpackage per concept. Owns the
PostgreSQL schema `sweeper`; talks to other services only over NATS.
"""

from __future__ import annotations

from zimmer_common.clock import Clock
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings
from zimmer_sweeper.bootstrap import bootstrap
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.watch import VolumeReader
from zimmer_sweeper.logs.config import LogIngestSettings
from zimmer_sweeper.schema import SCHEMA
from zimmer_sweeper.trash.config import TrashSettings

NAME = "sweeper"


def build(settings: Settings, clock: Clock | None = None, ingest_settings: LogIngestSettings | None = None,
          disk_settings: DiskSettings | None = None, read_volume: VolumeReader | None = None,
          trash_settings: TrashSettings | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_sweeper.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    bootstrap(service, ingest_settings=ingest_settings or LogIngestSettings(),
              disk_settings=disk_settings or DiskSettings(), trash_settings=trash_settings or TrashSettings(),
              read_volume=read_volume)
    return service
