"""What the trash pipeline's integration tests share: spot-gate and one sweeper on HOST, in-process on
real PostgreSQL and NATS with a frozen clock, the host's roots (artifacts included) under a temporary
directory, sessions whose clones are real git repositories, and readers of the sweeper's own records.
(A module of its own, not conftest.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from disking import HOST, FakeVolume, Spot  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sweeping import T0, eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trash_repos import make_clone  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.bus import Bus
from zimmer_common.clock import FrozenClock
from zimmer_common.service import Service
from zimmer_common.settings import Settings
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.service import build as build_sweeper
from zimmer_sweeper.trash.app import TrashApp
from zimmer_sweeper.trash.config import TrashSettings

CLEANUP = "deferred_clone_cleanup"


@dataclass
class Roots:
    base: Path

    def __getattr__(self, name: str) -> Path:
        if name in ("clones", "scratch", "attachments", "artifacts"):
            return self.base / name
        raise AttributeError(name)

    def settings(self) -> DiskSettings:
        for name in ("clones", "scratch", "attachments", "artifacts"):
            (self.base / name).mkdir(parents=True, exist_ok=True)
        return DiskSettings(clones_dir=str(self.clones), scratch_dir=str(self.scratch),
                            attachments_dir=str(self.attachments), artifacts_dir=str(self.artifacts),
                            durable_volume=str(self.base.parent / "durable-elsewhere"))


@dataclass
class TrashStack:
    spot: Spot
    sweeper: Service
    roots: Roots
    clock: FrozenClock
    sql: Callable[..., Any]

    @property
    def trash(self) -> TrashApp:
        return self.sweeper.app.trash  # type: ignore[no-any-return]  # the service's app is untyped

    async def clone_session(self, name: str) -> tuple[int, Path]:
        """A session whose clone (a real repository with a pushed commit) spot-gate knows is on HOST."""
        clone = make_clone(self.roots.base, self.roots.clones, name)
        return await self.spot.session(clone), clone

    async def archive(self, session_id: int) -> None:
        from zimmer_common.contracts import spot as c

        await self.spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=session_id))

    async def record(self, session_id: int) -> Any:
        rows = await self.sql("SELECT * FROM sweeper.trash_records WHERE session_id = $1", session_id)
        return rows[0] if rows else None

    async def settled(self, session_id: int, *states: str, within: float = 30.0) -> Any:
        """The record once its state is one of `states`."""
        async def there() -> bool:
            rec = await self.record(session_id)
            return rec is not None and rec["state"] in states

        await eventually(there, f"session {session_id}'s trash record to reach {states}", within=within)
        return await self.record(session_id)

    async def attempted(self, session_id: int, runs: int, within: float = 30.0) -> Any:
        """The record once the cleanup job has finished `runs` runs that found work (each writes its
        run down at the end, after the attempt's outcome)."""
        async def there() -> bool:
            done = await self.sql("SELECT count(*) AS n FROM sweeper.disk_runs WHERE job = $1", CLEANUP)
            return int(done[0]["n"]) >= runs

        await eventually(there, f"{runs} run(s) of the cleanup of session {session_id}", within=within)
        return await self.record(session_id)

    async def run_cleanup(self) -> None:
        """Ask for the job as the consumer does (the runner's singleton lock serializes runs)."""
        await self.sweeper.enqueue(CLEANUP)

    async def pages(self) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
        """The pages this sweeper sent (its outbox), each as the `Page` it published."""
        import json

        rows = await self.sql("SELECT payload::text AS p FROM sweeper.outbox WHERE event_type = 'page' ORDER BY id")
        return [json.loads(r["p"])["data"] for r in rows]

    async def page_titles(self) -> list[str]:
        rows = await self.sql("SELECT payload::jsonb->'data'->>'title' AS title FROM sweeper.outbox "
                              "WHERE event_type = 'page' ORDER BY id")
        return [r["title"] for r in rows]

    async def spot_stamp(self, session_id: int) -> datetime | None:
        from sqlalchemy import text

        assert self.spot.service.engine is not None
        async with self.spot.service.engine.connect() as conn:
            return (await conn.execute(text("SELECT unarchive_started_at FROM spot_gate.sessions WHERE id = :id"),
                                       {"id": session_id})).scalar_one()


@asynccontextmanager
async def trash_stack(settings_factory: Callable[..., Settings], base: Path, sql: Callable[..., Any], *,
                      git_timeout: float = 30.0, clock: FrozenClock | None = None) -> AsyncIterator[TrashStack]:
    clock = clock or FrozenClock(T0)
    roots = Roots(base)
    disk = roots.settings()
    spot = build_spot(settings_factory(), clock=clock)
    await spot.start()
    sweeper = build_sweeper(settings_factory(host=HOST), clock=clock, disk_settings=disk,
                            read_volume=FakeVolume(roots.clones).read,
                            trash_settings=TrashSettings(git_timeout_seconds=git_timeout))
    bus = await Bus.connect([spot.settings.nats_url], service="probe", instance_id="p", rpc_timeout=5)
    peer = Spot(spot, bus, clock)
    try:
        await sweeper.start()
        yield TrashStack(peer, sweeper, roots, clock, sql)
    finally:
        await bus.close()
        await sweeper.stop()
        if not peer.stopped:
            await spot.stop()
