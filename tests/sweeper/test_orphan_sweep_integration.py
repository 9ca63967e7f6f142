"""The orphan clone sweep and its urgent gear (seed 003 "One job owns the clones directory",
"Clone pruning has a second, urgent gear", "Both clone sweeps reap deletion tombstones"), on real
directories with spot-gate answering, PostgreSQL and NATS real, the clock frozen."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from disking import HOST, make_dir, running  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sweeping import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.budget import SweepBudget
from zimmer_common.bus import Bus
from zimmer_common.contracts.disk import ReclaimSpace, reclaim_space_spec
from zimmer_common.errors import ZimmerError
from zimmer_sweeper.disk.watch import TITLE, condition_key

H = timedelta(hours=1)
MB = 1_000_000


async def runs(sql, job: str) -> list:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await sql("SELECT outcome, counts, bytes_freed, refusals, note FROM sweeper.disk_runs "
                     "WHERE job = $1 ORDER BY id", job)


@asynccontextmanager
async def monitored(settings_factory, tmp_path: Path, sql) -> AsyncIterator[Any]:  # type: ignore[no-untyped-def]  # fixture values are untyped
    """A 20 MB volume whose monitor reclaims below 12 MB free to 15 MB, checked only when a test
    asks (`watch.check()`), once its reading at start is written."""
    async with running(settings_factory, tmp_path, capacity=20 * MB, free_low_bytes=12 * MB,
                       free_high_bytes=15 * MB, free_check_seconds=3600) as stack:
        async def first_reading() -> bool:
            return bool(await sql("SELECT 1 FROM sweeper.disk_roots WHERE host = $1", HOST))

        await eventually(first_reading, "the monitor's reading at start")
        yield stack


async def test_a_tracked_basename_is_never_a_candidate_and_tombstones_go_first(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#709's lesson: one owner of the clones directory, and only a directory no session row names
    at all is an orphan, whatever that session's status. Tombstones are reaped, never weighed."""
    async with running(settings_factory, tmp_path) as stack:
        clones = stack.layout.clones
        archived = make_dir(clones / "zimmer-main-1-archived", age=90 * H)
        live = make_dir(clones / "zimmer-main-2-live", age=90 * H)
        orphan = make_dir(clones / "zimmer-main-3-orphan", age=49 * H)
        young = make_dir(clones / "zimmer-main-4-young", age=47 * H)
        tomb = make_dir(clones / "zimmer-main-5-gone.deleting-0123abcd", age=timedelta(minutes=1))
        await stack.spot.session(archived, archived=True)
        await stack.spot.session(live)

        run = await stack.disk.orphans.sweep()
        assert sorted(p.name for p in clones.iterdir()) == [archived.name, live.name, young.name]
        assert not orphan.exists() and not tomb.exists()
        assert run.outcome == "ok"
        assert {k: run.counts[k] for k in ("tombstones_reaped", "examined", "kept_young", "kept_tracked",
                                           "kept_live", "removed")} == {
            "tombstones_reaped": 1, "examined": 4, "kept_young": 1, "kept_tracked": 1, "kept_live": 1, "removed": 1}
        [row] = await runs(sql, "orphan_clone_sweep")
        assert row["outcome"] == "ok" and '"removed": 1' in row["counts"]
        sample = stack.sweeper.metrics.registry.get_sample_value
        job = {"job": "orphan_clone_sweep"}
        assert sample("zimmer_disk_sweep_removed_total", job) == 1
        assert sample("zimmer_disk_tombstones_reaped_total", job) == 1
        assert sample("zimmer_disk_sweep_counted_total", {**job, "count": "kept_tracked"}) == 1
        assert sample("zimmer_disk_sweep_runs_total", {**job, "outcome": "ok"}) == 1
        assert sample("zimmer_disk_sweep_last_run_timestamp_seconds", job) == stack.clock.now().timestamp()


async def test_spot_gate_stopped_means_the_sweep_deletes_nothing(settings_factory, tmp_path: Path,
                                                                 sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        orphan = make_dir(stack.layout.clones / "zimmer-main-3-orphan", age=90 * H)
        await stack.spot.stop()
        run = await stack.disk.orphans.sweep()
        assert orphan.exists() and run.outcome == "aborted" and run.counts["removed"] == 0
        assert "Nothing deleted" in run.note
        [row] = await runs(sql, "orphan_clone_sweep")
        assert row["outcome"] == "aborted"


async def test_a_directory_claimed_between_the_snapshot_and_the_delete_is_refused(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The snapshot is a claim about the past (2026-09-02): a session that claims the path before its
    turn comes keeps it, because the guard asks again at the instant of deletion."""
    async with running(settings_factory, tmp_path) as stack:
        first = make_dir(stack.layout.clones / "zimmer-main-1-first", age=95 * H)
        claimed = make_dir(stack.layout.clones / "zimmer-main-2-claimed", age=90 * H)
        reaper = stack.disk.reaper
        remove = reaper.remove_clone

        async def claim_after_the_first(path: Path, *, job: str):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            result = await remove(path, job=job)
            if path == first:
                await stack.spot.session(claimed)  # a session starts and reports this clone
            return result

        reaper.remove_clone = claim_after_the_first  # type: ignore[method-assign]  # the test's stand-in
        run = await stack.disk.orphans.sweep()
        assert not first.exists() and (claimed / "f0").exists()
        assert (run.counts["removed"], run.counts["refused"]) == (1, 1)
        [row] = await runs(sql, "orphan_clone_sweep")
        assert row["refusals"] == 1


async def test_out_of_budget_the_sweep_logs_at_warn_what_it_left(settings_factory, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        dirs = [make_dir(stack.layout.clones / f"zimmer-main-{i}-orphan", age=(100 - i) * H) for i in range(4)]
        reaper = stack.disk.reaper
        remove = reaper.remove_clone

        async def slow(path: Path, *, job: str):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            stack.clock.advance(200)  # each removal takes 200 s of a 300 s budget
            return await remove(path, job=job)

        reaper.remove_clone = slow  # type: ignore[method-assign]  # the test's stand-in
        with caplog.at_level(logging.WARNING, logger="zimmer.sweeper.orphans"):
            run = await stack.disk.orphans.sweep(SweepBudget(300, stack.clock))
        assert [d.exists() for d in dirs] == [False, False, True, True]
        assert run.outcome == "partial" and run.counts["unreached"] == 2
        [record] = [r for r in caplog.records if "out of budget" in r.getMessage()]
        assert record.levelno == logging.WARNING
        assert record.fields["unreached"] == [str(dirs[2]), str(dirs[3])]  # type: ignore[attr-defined]  # log records carry the `fields` extra


async def test_a_removal_that_raises_is_logged_and_skipped(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        unrenamable = make_dir(stack.layout.clones / ("z" * 250), age=99 * H)  # no room for a tombstone suffix
        fine = make_dir(stack.layout.clones / "zimmer-main-2-orphan", age=90 * H)
        run = await stack.disk.orphans.sweep()
        assert unrenamable.exists() and not fine.exists()
        assert (run.counts["failed"], run.counts["removed"]) == (1, 1)


async def test_under_pressure_tombstones_first_then_the_fewest_oldest_orphans_until_the_target(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path, capacity=20 * MB) as stack:
        clones = stack.layout.clones
        tomb = make_dir(clones / "zimmer-main-0.deleting-0123abcd", age=timedelta(0), size=MB)
        oldest = make_dir(clones / "zimmer-main-1-orphan", age=10 * H, size=MB)
        older = make_dir(clones / "zimmer-main-2-orphan", age=8 * H, size=MB)
        old = make_dir(clones / "zimmer-main-3-orphan", age=6 * H, size=MB)
        young = make_dir(clones / "zimmer-main-4-orphan", age=1 * H, size=MB)  # inside the 2 h bar
        owned = make_dir(clones / "zimmer-main-5-owned", age=50 * H, size=MB)
        await stack.spot.session(owned, archived=True)
        free = stack.volume.read(clones).free_bytes  # 6 trees of 2 MB: 8 MB free of 20
        report = await stack.disk.orphans.reclaim_space(free + 5 * MB)  # the tombstone and two orphans
        assert report.reached and report.tombstones_reaped == 1
        assert [Path(r.path).name for r in report.removed] == [oldest.name, older.name]
        assert all(r.bytes == 2 * MB for r in report.removed)
        assert not tomb.exists() and old.exists() and young.exists() and owned.exists()
        assert report.free_after == free + 6 * MB and "Reached" in report.sentence
        [row] = await runs(sql, "reclaim_space")
        assert '"reached": 1' in row["counts"] and row["bytes_freed"] == 6 * MB  # the tombstone's bytes too


async def test_tombstones_alone_clearing_the_requirement_return_early(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path, capacity=20 * MB) as stack:
        make_dir(stack.layout.clones / "zimmer-main-0.deleting-0123abcd", age=timedelta(0), size=MB)
        orphan = make_dir(stack.layout.clones / "zimmer-main-1-orphan", age=10 * H, size=MB)
        free = stack.volume.read(stack.layout.clones).free_bytes
        report = await stack.disk.orphans.reclaim_space(free + MB)
        assert report.reached and report.tombstones_reaped == 1 and report.removed == [] and orphan.exists()


async def test_reclaim_over_nats_from_this_hosts_sweeper(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """reclaim_space takes a requirement, never a directory, and is asked of one host's sweeper."""
    async with running(settings_factory, tmp_path, capacity=20 * MB) as stack:
        orphan = make_dir(stack.layout.clones / "zimmer-main-1-orphan", age=10 * H, size=MB)
        free = stack.volume.read(stack.layout.clones).free_bytes
        report = await stack.spot.bus.request(reclaim_space_spec(HOST), ReclaimSpace(target_free_bytes=free + MB),
                                              timeout=30)
        assert report.reached and [r.path for r in report.removed] == [str(orphan)]
        assert await _no_answer_from_another_host(stack.spot.bus)


async def _no_answer_from_another_host(bus: Bus) -> bool:
    try:
        await bus.request(reclaim_space_spec("host-b"), ReclaimSpace(target_free_bytes=1), timeout=1)
    except ZimmerError as exc:
        return exc.code == "unavailable"
    return False


async def test_the_monitor_reclaims_below_low_to_high_and_pages_when_it_cannot(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with monitored(settings_factory, tmp_path, sql) as stack:
        clones = stack.layout.clones
        for i in range(4):
            make_dir(clones / f"zimmer-main-{i}-orphan", age=(10 - i) * H, size=MB)
        owned = [make_dir(clones / f"zimmer-main-{i}-owned", age=50 * H, size=MB) for i in (8, 9)]
        for path in owned:
            await stack.spot.session(path)
        # 12 MB used, 8 MB free: below the 12 MB low mark, so it reclaims toward 15 MB, 2 MB an
        # orphan, oldest first: 10, 12, 14, then 16 MB free after the fourth. The live clones stay.
        check = await stack.disk.watch.check()
        assert check.reclaim is not None and check.reclaim.reached and len(check.reclaim.removed) == 4
        [clones_row] = await sql("SELECT free_bytes, total_bytes, sweepable FROM sweeper.disk_roots "
                                 "WHERE host = $1 AND name = 'clones'", HOST)
        assert (clones_row["free_bytes"], clones_row["total_bytes"]) == (8 * MB, 20 * MB)
        # Now only live clones fill it: nothing can be reclaimed, and it pages.
        for i in range(4):
            path = make_dir(clones / f"zimmer-main-{i}-busy", age=50 * H, size=MB)
            await stack.spot.session(path)
        check = await stack.disk.watch.check()
        assert check.reclaim is not None and not check.reclaim.reached
        pages = await sql("SELECT payload::jsonb->'data' AS page FROM sweeper.outbox WHERE event_type = 'page' "
                          "ORDER BY id")
        page = json.loads(pages[-1]["page"])
        assert (page["title"], page["condition_key"], page["still_true"]) == (TITLE, condition_key(HOST), True)
        sample = stack.sweeper.metrics.registry.get_sample_value
        assert sample("zimmer_disk_reclaim_unreachable", {"host": HOST}) == 1
        assert sample("zimmer_disk_free_bytes", {"host": HOST, "root": "clones"}) == 8 * MB
        # Room again (the busy clones went with their sessions): the condition resolves.
        stack.volume.capacity = 100 * MB
        check = await stack.disk.watch.check()
        assert check.reclaim is None
        pages = await sql("SELECT payload::jsonb->'data' AS page FROM sweeper.outbox WHERE event_type = 'page' "
                          "ORDER BY id")
        last = json.loads(pages[-1]["page"])
        assert (last["title"], last["still_true"]) == (TITLE, False)


@pytest.mark.parametrize(("env", "swept"), [("test", False), ("development", False), ("production", True),
                                            ("staging", True)])
async def test_a_clones_base_on_the_durable_volume_is_swept_only_by_production_and_staging(
        settings_factory, tmp_path: Path, env: str, swept: bool) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """bin/dev and the test suite resolve the clones base onto ~/.zimmer; beside a real deployment
    their databases would call every live clone there an orphan. A relocated base is swept anywhere
    (every other test here runs in `test` with one)."""
    volume = tmp_path / "zimmer"
    async with running(settings_factory, volume, durable_volume=volume, env=env, capacity=20 * MB) as stack:
        orphan = make_dir(stack.layout.clones / "zimmer-main-1-orphan", age=90 * H)
        run = await stack.disk.orphans.sweep()
        report = await stack.disk.orphans.reclaim_space(20 * MB)
        assert orphan.exists() is not swept
        assert (run.outcome == "aborted") is not swept and report.reached is swept
        if not swept:
            assert "only production and staging" in run.note and "only production and staging" in report.sentence


async def test_a_missing_clones_base_aborts_rather_than_reading_as_empty(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        stack.layout.clones.rmdir()
        run = await stack.disk.orphans.sweep()
        report = await stack.disk.orphans.reclaim_space(1)
        assert run.outcome == "aborted" and not report.reached and "not a directory" in report.sentence


async def test_a_reclaim_that_fell_short_goes_on_between_the_marks_until_the_high_one(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The CI case behind it: a reclaim ran out of orphans (or budget) with the volume above the low
    mark but under the high one. Reclaiming only below the low mark then resolved the page while
    Health read "unreachable" for the hour: the volume was still short of its target."""
    async with monitored(settings_factory, tmp_path, sql) as stack:
        clones = stack.layout.clones
        for i in range(2):
            make_dir(clones / f"zimmer-main-{i}-orphan", age=(10 - i) * H, size=MB)
        busy = [await stack.spot.session(make_dir(clones / f"zimmer-main-{i}-busy", age=50 * H, size=MB))
                for i in range(3)]
        # 10 MB used: the two orphans bring it to 14 MB free, over the low mark, short of the high.
        check = await stack.disk.watch.check()
        assert check.reclaim is not None and not check.reclaim.reached and len(check.reclaim.removed) == 2

        async def pages() -> list[tuple[str, bool]]:
            rows = await sql("SELECT payload::jsonb->'data' AS page FROM sweeper.outbox WHERE event_type = 'page' "
                             "ORDER BY id")
            return [(p["title"], p["still_true"]) for p in (json.loads(r["page"]) for r in rows)]

        assert (await pages())[-1] == (TITLE, True)
        # Between the marks with nothing to take: it tries again, and the page stays open.
        check = await stack.disk.watch.check()
        assert check.reclaim is not None and not check.reclaim.reached and check.reclaim.removed == []
        assert (await pages())[-1] == (TITLE, True)
        # A session is deleted and leaves its clone an orphan: still between the marks, it is taken,
        # the volume reaches 16 MB free, and only then does the page resolve.
        await stack.spot.delete(busy[0])
        check = await stack.disk.watch.check()
        assert check.reclaim is not None and check.reclaim.reached and len(check.reclaim.removed) == 1
        assert (await pages())[-1] == (TITLE, False)
        # At the target: the next check reclaims nothing.
        assert (await stack.disk.watch.check()).reclaim is None
