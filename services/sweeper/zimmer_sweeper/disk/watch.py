"""The free-space monitor, kubelet-style (issue 16, after seed 003's CloneDiskGuard): every
`free_check_seconds` it writes down each root's reading (disk_roots, for the Disk and clones panel
and `zimmer_disk_free_bytes`), and when the clones volume has less than `free_low_bytes` free it
reclaims until `free_high_bytes` are (two thresholds, so it does not flap around one); after a reclaim
that fell short it goes on reclaiming at each check while the volume is under the high mark. When the
target cannot be reached it pages "Disk space could not be reclaimed" under one condition key per
host, resolved once the volume recovers. It reclaims only where the fence lets this deployment
delete; readings are written for every configured root either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from zimmer_common.contracts.disk import ROOT_NAMES, ReclaimReport, RootName
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.tables import DiskRootRow, DiskRunRow
from zimmer_sweeper.disk.volumes import Roots, VolumeReading, read_volume

log = logging.getLogger("zimmer.sweeper.diskwatch")

TITLE = "Disk space could not be reclaimed"
VolumeReader = Callable[[Path], VolumeReading]
# The job a reclaim's runs are recorded under (`DiskRecords.run`); the monitor reads the newest back.
RECLAIM_JOB = "reclaim_space"


class Reclaimer(Protocol):
    """What the monitor asks to free space on the clones volume: the orphan clone sweep's urgent
    gear (`zimmer_sweeper.clones.orphans.OrphanCloneSweep`), plugged in at wiring."""

    async def reclaim_space(self, target_free_bytes: int) -> ReclaimReport: ...


def condition_key(host: str) -> str:
    return f"sweeper:disk_reclaim:{host}"


@dataclass(frozen=True)
class RootState:
    name: RootName
    path: Path | None
    reading: VolumeReading | None  # None: not configured, missing, or unreadable


@dataclass(frozen=True)
class WatchCheck:
    roots: list[RootState]
    reclaim: ReclaimReport | None  # None: the clones volume was not below its low threshold


class DiskWatch:
    def __init__(self, *, roots: Roots, disk: DiskSettings, sweep: Reclaimer, units: UnitsOfWork,
                 host: str, pager: Pager | None, metrics: DiskMetrics, now: Callable[[], datetime],
                 read: VolumeReader = read_volume):
        self.roots = roots
        self.disk = disk
        self.sweep = sweep
        self.units = units
        self.host = host
        self.pager = pager
        self.metrics = metrics
        self.now = now
        self.read = read
        # None: not known yet whether a previous process left the condition open (the newest
        # reclaim recorded for this host says).
        self._unreachable: bool | None = None

    async def check(self) -> WatchCheck:
        states = [await self._read(name) for name in ROOT_NAMES]
        await self._write(states)
        clones = next(s for s in states if s.name == "clones")
        report = None
        if clones.reading is not None and self.roots.sweepable("clones") is not None:
            free = clones.reading.free_bytes
            # A reclaim that fell short goes on at the next check until the high mark, not only
            # below the low one: stopping in between would resolve the page and leave Health
            # reading "unreachable" for a volume still short of its target.
            if free < self.disk.free_low_bytes or (free < self.disk.free_high_bytes and await self._fell_short(unknown=False)):
                log.warning("clones volume short of free space; reclaiming", extra=kv(
                    free_bytes=free, low=self.disk.free_low_bytes, target=self.disk.free_high_bytes))
                report = await self.sweep.reclaim_space(self.disk.free_high_bytes)
                await self._verdict(report.reached, report.sentence)
            else:
                await self._verdict(True, "")
        return WatchCheck(states, report)

    async def _read(self, name: RootName) -> RootState:
        path = self.roots.path(name)
        reading = None
        if path is not None:
            try:
                reading = await asyncio.to_thread(self.read, path)
            except OSError as exc:
                log.warning("root not readable", extra=kv(root=name, path=str(path), error=repr(exc)[:200]))
        fence = self.roots.fence(name)
        self.metrics.sweepable.labels(self.host, name).set(int(fence.sweepable))
        if reading is not None:
            self.metrics.free_bytes.labels(self.host, name).set(reading.free_bytes)
            self.metrics.total_bytes.labels(self.host, name).set(reading.total_bytes)
        return RootState(name, path, reading)

    async def _write(self, states: list[RootState]) -> None:
        at = self.now()
        rows = [dict(host=self.host, name=s.name, path=str(s.path) if s.path else None,
                     exists_now=s.reading is not None, free_bytes=s.reading.free_bytes if s.reading else None,
                     total_bytes=s.reading.total_bytes if s.reading else None,
                     sweepable=self.roots.fence(s.name).sweepable, fence=self.roots.fence(s.name).sentence, read_at=at)
                for s in states]
        stmt = pg_insert(DiskRootRow).values(rows)
        async with self.units.begin() as uow:
            await uow.conn.execute(stmt.on_conflict_do_update(
                index_elements=["host", "name"],
                set_={c: stmt.excluded[c] for c in ("path", "exists_now", "free_bytes", "total_bytes", "sweepable",
                                                    "fence", "read_at")}))

    async def _verdict(self, reached: bool, sentence: str) -> None:
        self.metrics.reclaim_unreachable.labels(self.host).set(0 if reached else 1)
        pager = self.pager
        if not reached:
            self._unreachable = True
            if pager is not None:
                await pager.report(title=TITLE, fingerprint=["sweeper", "disk_reclaim", self.host],
                                   condition_key=condition_key(self.host), still_true=True,
                                   message=f"The clones volume on {self.host} could not be brought back to "
                                           f"{self.disk.free_high_bytes:,} bytes free. {sentence}",
                                   context={"host": self.host, "target_free_bytes": self.disk.free_high_bytes})
            return
        if await self._fell_short(unknown=True):  # resolving a condition never opened is harmless
            self._unreachable = False
            if pager is not None:
                await pager.report(title=TITLE, fingerprint=["sweeper", "disk_reclaim", self.host],
                                   condition_key=condition_key(self.host), still_true=False, log_level="warning",
                                   message=f"The clones volume on {self.host} has room again. {sentence}".rstrip(),
                                   context={"host": self.host})

    async def _fell_short(self, *, unknown: bool) -> bool:
        """Whether the newest reclaim on this host did not reach its target (read once per process);
        `unknown` when it cannot be read now."""
        if self._unreachable is None:
            self._unreachable = await self._newest_reclaim_fell_short()
        return unknown if self._unreachable is None else self._unreachable

    async def _newest_reclaim_fell_short(self) -> bool | None:
        runs: Any = DiskRunRow.__table__.c  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
        query = (select(runs.counts["reached"].as_integer()).where(runs.host == self.host, runs.job == RECLAIM_JOB)
                 .order_by(runs.started_at.desc(), runs.id.desc()).limit(1))
        try:
            async with self.units.read() as conn:
                reached = (await conn.execute(query)).scalar_one_or_none()
        except Exception as exc:  # noqa: BLE001 - not known: asked again at the next check
            log.warning("could not read the newest reclaim", extra=kv(error=repr(exc)[:200]))
            return None
        return reached == 0
