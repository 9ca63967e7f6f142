"""The Disk and clones readings (issue 16): every host's roots, the newest run of each sweep, the
guard's refusals in the last day, and the status they add up to, read from the tables every
sweeper shares (real PostgreSQL, the sweeper's migrations)."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from sqlalchemy import insert
from sweeping import T0  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.db import create_engine, migrate
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.disk import health as disk_health
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.tables import DiskRootRow


async def _engine(database_url: str):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    await migrate(database_url, "sweeper", "zimmer_sweeper.migrations")
    return create_engine(database_url)


def _units(engine) -> UnitsOfWork:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return UnitsOfWork(SimpleNamespace(engine=engine, relay=None), "sweeper")  # type: ignore[arg-type]  # a stand-in for the Service UnitsOfWork reads


async def read_health(engine, now):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """The readings as the sweeper answers DISK_HEALTH: one snapshot."""
    async with _units(engine).snapshot() as conn:
        return await disk_health.read(conn, now)


def _root(host: str, name: str, *, path: str | None = "/data/x", exists: bool = True, free: int | None = 10 << 30,
          sweepable: bool = True) -> dict[str, object]:
    return dict(host=host, name=name, path=path, exists_now=exists, free_bytes=free, total_bytes=100 << 30,
                sweepable=sweepable, fence="relocated clear of the durable volume" if sweepable else
                "inside the durable volume ~/.zimmer, swept only in production and staging", read_at=T0)


async def test_every_hosts_roots_newest_runs_and_refusals(database_url: str) -> None:
    engine = await _engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(insert(DiskRootRow), [_root("host-a", "clones"), _root("host-a", "scratch", path=None),
                                                     _root("host-b", "clones", sweepable=False)])
        a = DiskRecords(_units(engine), "host-a", lambda: T0)
        await a.run("orphan_clone_sweep", started_at=T0 - timedelta(hours=7), outcome="ok", counts={"removed": 1})
        await a.run("orphan_clone_sweep", started_at=T0 - timedelta(hours=1), outcome="partial",
                    counts={"removed": 3, "deferred": 2}, bytes_freed=3 << 30, note="budget exhausted; 2 left")
        await a.refusal("orphan_clone_sweep", "/data/clones/zimmer-1", [7], "session 7 is running")
        await a.refusal("orphan_clone_sweep", "/data/clones/zimmer-2", [8], "old")  # at T0, still inside 24 h
        health = await read_health(engine, T0 + timedelta(hours=1))
    finally:
        await engine.dispose()
    assert [h.host for h in health.hosts] == ["host-a", "host-b"]
    host_a = health.hosts[0]
    [run] = host_a.runs  # the newest of the job only
    assert (run.outcome, run.counts, run.bytes_freed) == ("partial", {"removed": 3, "deferred": 2}, 3 << 30)
    assert host_a.refusals_24h == 2 and health.hosts[1].refusals_24h == 0
    assert health.status == "warning"  # refusals are never routine
    text = "\n".join(health.lines)
    assert "Disk on host-a: pressure ok; 2 guard refusals in the last 24 h." in text
    assert "scratch: not configured." in text
    assert "orphan_clone_sweep: partial" in text and "3.0 GiB freed" in text and "budget exhausted; 2 left" in text
    assert "not swept here: inside the durable volume" in text


async def test_a_reclaim_that_missed_its_target_is_critical_until_one_reaches_it(database_url: str) -> None:
    engine = await _engine(database_url)
    try:
        records = DiskRecords(_units(engine), "host-a", lambda: T0)
        await records.run("reclaim_space", started_at=T0, outcome="partial", counts={"reached": 0, "removed": 20})
        missed = await read_health(engine, T0 + timedelta(minutes=5))
        later = await read_health(engine, T0 + timedelta(hours=2))  # no reclaim since: the monitor saw no pressure
        await records.run("reclaim_space", started_at=T0 + timedelta(minutes=10), outcome="ok",
                          counts={"reached": 1, "removed": 2})
        reached = await read_health(engine, T0 + timedelta(minutes=15))
    finally:
        await engine.dispose()
    assert (missed.status, missed.hosts[0].pressure) == ("critical", "unreachable")
    assert later.hosts[0].pressure == "ok"
    assert (reached.status, reached.hosts[0].pressure) == ("ok", "ok")


async def test_no_host_yet_says_so(database_url: str) -> None:
    engine = await _engine(database_url)
    try:
        health = await read_health(engine, T0)
    finally:
        await engine.dispose()
    assert health.status == "ok" and health.hosts == []
    assert health.lines == ["Disk and clones: no sweeper has read a disk yet (no roots configured, or none started)."]
