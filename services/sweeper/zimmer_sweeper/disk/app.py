"""Wiring of the host's disk (issue 16): its roots with their fences, what the sweeps record and
count, the volume reading every sweep measures bytes against, the free-space monitor, and the Disk
and clones readings. One sweeper runs beside each runtime host's disk, so all of this is this
host's; the clone, trash and transcript sweeps are handed a `HostDisk` to work on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from zimmer_common.contracts.disk import DISK_HEALTH, ROOT_NAMES, DiskHealth, DiskHealthQuery
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.service import Service
from zimmer_common.settings import Environment
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.disk import health as disk_health
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.volumes import FreeSpace, Roots, read_volume
from zimmer_sweeper.disk.watch import DiskWatch, Reclaimer, VolumeReader

log = logging.getLogger("zimmer.sweeper.disk")


@dataclass(frozen=True)
class HostDisk:
    """This host's disk as every sweep sees it."""

    settings: DiskSettings
    roots: Roots
    records: DiskRecords
    metrics: DiskMetrics
    read: VolumeReader  # a root's volume: free and total bytes (injectable: tests simulate pressure)
    free_space: FreeSpace  # the free bytes of `read`, which every sweep measures what it freed against


def host_disk(disk: DiskSettings, *, units: UnitsOfWork, env: Environment, host: str, now: Callable[[], datetime],
              registry: CollectorRegistry, read: VolumeReader | None = None) -> HostDisk:
    read = read or read_volume

    def free_space(path: Path) -> int:
        return read(path).free_bytes

    return HostDisk(disk, Roots(disk, env), DiskRecords(units, host, now), DiskMetrics(registry), read, free_space)


def build_watch(host_disk: HostDisk, reclaimer: Reclaimer, *, units: UnitsOfWork, host: str, pager: Pager,
                now: Callable[[], datetime]) -> DiskWatch:
    """The free-space monitor; it asks `reclaimer` for room (the orphan clone sweep, by bootstrap)."""
    return DiskWatch(roots=host_disk.roots, disk=host_disk.settings, sweep=reclaimer, units=units, host=host,
                     pager=pager, metrics=host_disk.metrics, now=now, read=host_disk.read)


def watch_disk(service: Service, watch: DiskWatch) -> None:
    """Start the free-space monitor with the service when this host has a root to watch."""
    disk, roots = watch.disk, watch.roots

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


def serve_disk_health(service: Service, *, units: UnitsOfWork) -> None:
    """The Disk and clones readings, every host's (any sweeper answers)."""

    async def disk_readings(req: DiskHealthQuery) -> DiskHealth:
        async with units.snapshot() as conn:
            return await disk_health.read(conn, service.clock.now())

    service.rpc(DISK_HEALTH)(disk_readings)
