"""What the transcript tests share: a host's clones base and transcripts root under a temporary
`.zimmer` (so names carry `--zimmer`), spot-gate and the sweeper in-process on real PostgreSQL and
NATS with a frozen clock, sessions made through spot-gate's RPCs and the runtime's clone reports,
and transcript directories of a chosen age."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from disking import HOST, Spot, tree_bytes  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sweeping import T0, eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.bus import Bus
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts.clones import INGEST_CLONE, SESSION_CLONES, CloneReport, SessionClonesQuery
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.service import Service
from zimmer_common.settings import Settings
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.volumes import VolumeReading
from zimmer_sweeper.service import build as build_sweeper
from zimmer_sweeper.transcripts.app import TranscriptApp
from zimmer_sweeper.transcripts.domain import transcript_name


def transcript_dir(root: Path, name: str, *, age: timedelta, files: dict[str, int] | None = None,
                   own_age: timedelta | None = None) -> Path:
    """A transcript directory whose files (relative path → bytes) were last written `age` before
    T0, and whose own mtime is `own_age` before it (default: the same)."""
    path = root / name
    path.mkdir(parents=True)
    when = (T0 - age).timestamp()
    for rel, size in (files or {"0b6e0c1e-session.jsonl": 2_000}).items():
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"{}\n" * (size // 3))
        os.utime(f, (when, when))
        for parent in f.relative_to(path).parents:
            os.utime(path / parent, (when, when))
    own = (T0 - (own_age if own_age is not None else age)).timestamp()
    os.utime(path, (own, own))
    return path


def touch(path: Path, age: timedelta) -> None:
    when = (T0 - age).timestamp()
    os.utime(path, (when, when))


@dataclass
class Volume:
    """The transcripts volume: free space is what its trees leave of a fixed capacity, so the
    bytes a run frees are measured against the volume, as in production."""

    root: Path
    capacity: int = 10**12

    def read(self, path: Path) -> VolumeReading:
        return VolumeReading(self.capacity - tree_bytes(self.root), self.capacity)


@dataclass
class TStack:
    spot: Spot
    sweeper: Service
    clones: Path
    transcripts: Path
    clock: FrozenClock
    bus: Bus

    @property
    def app(self) -> TranscriptApp:
        return self.sweeper.app.transcripts  # type: ignore[no-any-return]  # the service's app is untyped

    def name(self, clone: Path, *subdir: str) -> str:
        return transcript_name(str(clone.joinpath(*subdir)))

    async def clone_session(self, clone: Path | None, *, subdir: str | None = None, scaffolded: bool = False,
                            host: str = HOST, archived: bool = False, make: bool = True) -> int:
        """A session whose clone the runtime reported at `clone` (made on disk unless `make` is off)."""
        sid = await self.spot.session()
        if clone is not None:
            if make:
                clone.mkdir(parents=True, exist_ok=True)
            await report_clone(self.bus, self.clock, sid, clone, subdir=subdir, scaffolded=scaffolded, host=host)
        if archived:
            from zimmer_common.contracts import spot as c

            await self.bus.request(c.ARCHIVE, c.SessionRef(session_id=sid))
        return sid


async def report_clone(bus: Bus, clock: FrozenClock, session_id: int, clone: Path, *, subdir: str | None = None,
                       scaffolded: bool = False, host: str = HOST) -> None:
    """The runtime reports a clone; waits until spot-gate lists it."""
    report = CloneReport(session_id=session_id, clone_path=str(clone), agent_subdirectory=subdir,
                         scaffolded=scaffolded, host=host, at=clock.now())
    envelope = EventEnvelope(id=uuid.uuid4().hex, type="clone", version=1, source="runtime",
                             occurred_at=clock.now(), data=report.model_dump(mode="json"))
    await bus.publish(INGEST_CLONE, envelope.model_dump_json().encode(), msg_id=envelope.id)

    async def listed() -> bool:
        page = await bus.request(SESSION_CLONES, SessionClonesQuery(scope="all", after_id=session_id - 1, limit=1))
        return bool(page.clones) and page.clones[0].session_id == session_id and \
            page.clones[0].clone_path == str(clone)

    await eventually(listed, f"spot-gate storing session {session_id}'s clone")


@asynccontextmanager
async def transcript_stack(settings_factory: Callable[..., Settings], base: Path, *, env: str = "test",
                           durable_volume: Path | None = None, volume: Volume | None = None) -> AsyncIterator[TStack]:
    """spot-gate and one sweeper on HOST, its clones base and transcripts root under `base/.zimmer`."""
    clock = FrozenClock(T0)
    clones, transcripts = base / ".zimmer" / "clones", base / ".claude_home" / "projects"
    clones.mkdir(parents=True)
    transcripts.mkdir(parents=True)
    disk = DiskSettings(clones_dir=str(clones), transcripts_dir=str(transcripts),
                        durable_volume=str(durable_volume or base / "durable-elsewhere"))
    spot = build_spot(settings_factory(), clock=clock)
    await spot.start()
    sweeper = build_sweeper(settings_factory(host=HOST, env=env), clock=clock, disk_settings=disk,
                            read_volume=(volume or Volume(transcripts)).read)
    bus = await Bus.connect([spot.settings.nats_url], service="probe", instance_id="p", rpc_timeout=5)
    peer = Spot(spot, bus, clock)
    try:
        await sweeper.start()
        yield TStack(peer, sweeper, clones, transcripts, clock, bus)
    finally:
        await bus.close()
        await sweeper.stop()
        if not peer.stopped:
            await spot.stop()
