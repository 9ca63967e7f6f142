"""What the disk sweep tests share: a host's roots under a temporary directory, a volume whose free
space is what its clones leave of a fixed capacity (pressure simulated on a real directory), and
spot-gate in-process beside the sweeper, both on real PostgreSQL and NATS, with a frozen clock.
Sessions are made and moved through spot-gate's own RPCs and the runtime's clone reports."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sweeping import T0, eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.bus import Bus
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.clones import (
    CLONE_OWNERSHIP,
    DELETE_SESSION,
    INGEST_CLONE,
    CloneOwnershipQuery,
    CloneReport,
)
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.service import Service
from zimmer_common.settings import Settings
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.bootstrap import DiskApp
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.volumes import VolumeReading
from zimmer_sweeper.service import build as build_sweeper

HOST = "host-a"


def tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                continue
    return total


@dataclass
class FakeVolume:
    """A volume of `capacity` bytes holding the clones base: free is what the trees under it leave."""

    clones: Path
    capacity: int = 10**15
    reads: list[Path] = field(default_factory=list)

    def read(self, path: Path) -> VolumeReading:
        self.reads.append(path)
        return VolumeReading(max(0, self.capacity - tree_bytes(self.clones)), self.capacity)


@dataclass
class Layout:
    base: Path

    @property
    def clones(self) -> Path:
        return self.base / "clones"

    @property
    def scratch(self) -> Path:
        return self.base / "scratch"

    @property
    def attachments(self) -> Path:
        return self.base / "attachments"

    def settings(self, durable_volume: Path | None = None, **thresholds: int) -> DiskSettings:
        for root in (self.clones, self.scratch, self.attachments):
            root.mkdir(parents=True, exist_ok=True)
        return DiskSettings(clones_dir=str(self.clones), scratch_dir=str(self.scratch),
                            attachments_dir=str(self.attachments),
                            durable_volume=str(durable_volume or self.base.parent / "durable-elsewhere"),
                            **thresholds)


def make_dir(path: Path, *, age: timedelta, size: int = 1_000, files: int = 2) -> Path:
    """A directory holding `files` files of `size` bytes, last modified `age` before T0."""
    path.mkdir(parents=True)
    (path / ".git").mkdir()
    for i in range(files):
        (path / f"f{i}").write_bytes(b"x" * size)
    when = (T0 - age).timestamp()
    os.utime(path, (when, when))
    return path


class Spot:
    """spot-gate, through its RPCs and the runtime's ingest, as the sweeper's peers see it."""

    def __init__(self, service: Service, bus: Bus, clock: FrozenClock):
        self.service = service
        self.bus = bus
        self.clock = clock
        self.stopped = False

    async def stop(self) -> None:
        """spot-gate goes down (the sweeper's questions then go unanswered)."""
        self.stopped = True
        await self.service.stop()

    async def session(self, clone: Path | None = None, *, archived: bool = False) -> int:
        sid = (await self.bus.request(c.SPAWN, c.SpawnSession(title="t", start=False))).session.id
        if clone is not None:
            await self.report_clone(sid, clone)
        if archived:
            await self.bus.request(c.ARCHIVE, c.SessionRef(session_id=sid))
        return int(sid)

    async def report_clone(self, session_id: int, clone: Path) -> None:
        report = CloneReport(session_id=session_id, clone_path=str(clone), host=HOST, at=self.clock.now())
        envelope = EventEnvelope(id=uuid.uuid4().hex, type="clone", version=1, source="runtime",
                                 occurred_at=self.clock.now(), data=report.model_dump(mode="json"))
        await self.bus.publish(INGEST_CLONE, envelope.model_dump_json().encode(), msg_id=envelope.id)

        async def stored() -> bool:
            answer = await self.bus.request(CLONE_OWNERSHIP, CloneOwnershipQuery(paths=[str(clone)]))
            return session_id in answer.answers[0].tracked_by

        await eventually(stored, f"spot-gate storing session {session_id}'s clone")

    async def unarchive(self, session_id: int) -> None:
        await self.bus.request(c.UNARCHIVE, c.SessionRef(session_id=session_id))

    async def delete(self, session_id: int) -> None:
        await self.bus.request(DELETE_SESSION, c.SessionRef(session_id=session_id))

    async def warnings(self, session_id: int) -> list[Any]:
        view = await self.bus.request(c.GET_SESSION, c.SessionRef(session_id=session_id))
        return list(view.warnings)


@dataclass
class Stack:
    spot: Spot
    sweeper: Service
    layout: Layout
    volume: FakeVolume
    clock: FrozenClock

    @property
    def disk(self) -> DiskApp:
        return self.sweeper.app.disk  # type: ignore[no-any-return]  # the service's app is untyped


@asynccontextmanager
async def running(settings_factory: Callable[..., Settings], base: Path, *, env: str = "test",
                  durable_volume: Path | None = None, capacity: int = 10**15,
                  **thresholds: int) -> AsyncIterator[Stack]:
    """spot-gate and one sweeper on HOST, its roots under `base`."""
    clock = FrozenClock(T0)
    layout = Layout(base)
    # The free-space monitor checks once at start: unless a test sets thresholds, it never reclaims.
    disk = layout.settings(durable_volume, **{"free_low_bytes": 0, "free_high_bytes": 0, **thresholds})
    volume = FakeVolume(layout.clones, capacity)
    spot = build_spot(settings_factory(), clock=clock)
    await spot.start()
    sweeper = build_sweeper(settings_factory(host=HOST, env=env), clock=clock, disk_settings=disk,
                            read_volume=volume.read)
    bus = await Bus.connect([spot.settings.nats_url], service="probe", instance_id="p", rpc_timeout=5)
    peer = Spot(spot, bus, clock)
    try:
        await sweeper.start()
        yield Stack(peer, sweeper, layout, volume, clock)
    finally:
        await bus.close()
        await sweeper.stop()
        if not peer.stopped:
            await spot.stop()
