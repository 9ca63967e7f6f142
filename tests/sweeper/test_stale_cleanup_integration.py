"""StaleCloneCleanup's tombstones and its scratch/attachment orphan sweep, every fence of the seed's
table (seed 003 "A deleted session takes its directories with it"), and a deleted session's
directories going at once on every host; spot-gate answering on real PostgreSQL and NATS."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from disking import make_dir, running  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sweeping import T0, eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.budget import SweepBudget
from zimmer_common.clock import FrozenClock
from zimmer_sweeper.clones.domain import ORPHAN_SWEEP_LIMIT
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.service import build

H = timedelta(hours=1)


async def test_every_fence_of_the_scratch_and_attachment_sweep(settings_factory, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        alive = await stack.spot.session()
        gone = alive + 1_000  # a row deleted by a path that skipped session_deleted: no row, no event
        scratch, attachments = stack.layout.scratch, stack.layout.attachments
        kept = [make_dir(scratch / str(alive), age=5 * H),  # its session exists
                make_dir(scratch / "temp_0f8fad5b-d9cb-469f-a165-70867728950e", age=9 * H),  # not a session id
                make_dir(scratch / "0123", age=9 * H),
                make_dir(scratch / "1234567890123456789", age=9 * H),  # too long for a bigint
                make_dir(scratch / "987654", age=59 * timedelta(minutes=1)),  # younger than an hour
                make_dir(attachments / str(alive), age=5 * H)]
        orphans = [make_dir(scratch / str(gone), age=2 * H), make_dir(attachments / str(gone), age=2 * H),
                   make_dir(scratch / "987653", age=61 * timedelta(minutes=1))]  # never existed
        with caplog.at_level(logging.INFO, logger="zimmer.sweeper.removal"):
            run = await stack.disk.stale.run()
        assert all(p.exists() for p in kept) and not any(p.exists() for p in orphans)
        assert (run.outcome, run.counts["removed"], run.counts["scratch_removed"]) == ("ok", 3, 2)
        logged = {r.fields["path"]: r.fields["mtime"] for r in caplog.records  # type: ignore[attr-defined]  # log records carry the `fields` extra
                  if r.getMessage() == "removing directory"}
        assert logged.keys() == {str(p) for p in orphans} and all(logged.values())


async def test_an_empty_sessions_table_aborts_the_whole_sweep(settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A restore from nothing, or the wrong database: every directory would read as an orphan."""
    async with running(settings_factory, tmp_path) as stack:
        dirs = [make_dir(stack.layout.scratch / str(i), age=9 * H) for i in (1, 2, 3)]
        run = await stack.disk.stale.run()
        assert all(p.exists() for p in dirs) and run.outcome == "aborted" and "empty" in run.note
        [row] = await sql("SELECT outcome FROM sweeper.disk_runs WHERE job = 'stale_clone_cleanup'")
        assert row["outcome"] == "aborted"


async def test_at_most_200_a_root_a_run_and_the_overflow_logged(settings_factory, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        await stack.spot.session()  # the table is not empty
        for i in range(ORPHAN_SWEEP_LIMIT + 5):
            make_dir(stack.layout.scratch / str(10_000 + i), age=(300 - i) * H, size=1, files=1)
        with caplog.at_level(logging.WARNING, logger="zimmer.sweeper.stale"):
            run = await stack.disk.stale.run()
        left = sorted(int(p.name) for p in stack.layout.scratch.iterdir())
        assert left == list(range(10_000 + ORPHAN_SWEEP_LIMIT, 10_000 + ORPHAN_SWEEP_LIMIT + 5))  # the youngest
        assert (run.counts["scratch_removed"], run.counts["scratch_overflow"]) == (ORPHAN_SWEEP_LIMIT, 5)
        [record] = [r for r in caplog.records if "next hour" in r.getMessage()]
        assert record.fields["overflow"] == 5  # type: ignore[attr-defined]  # log records carry the `fields` extra
        again = await stack.disk.stale.run()
        assert again.counts["scratch_removed"] == 5 and list(stack.layout.scratch.iterdir()) == []


async def test_a_session_created_after_the_listing_is_asked_again_before_its_directory_goes(
        settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        await stack.spot.session()
        stale = stack.disk.stale
        ask = stale._ask
        made: list[int] = []

        async def a_session_appears(ids: list[int]):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            if len(ids) > 1 and not made:  # the batch question: then a session is made under the next id
                answer = await ask(ids)
                made.append(await stack.spot.session())
                return answer
            return await ask(ids)

        # The directory named for the id the next session will get exists before the session does.
        next_id = (await stack.spot.session()) + 1
        make_dir(stack.layout.scratch / str(next_id), age=2 * H)
        make_dir(stack.layout.scratch / str(next_id + 1000), age=2 * H)
        stale._ask = a_session_appears  # type: ignore[method-assign]  # the test's stand-in
        run = await stale.run()
        assert made == [next_id]
        assert (stack.layout.scratch / str(next_id)).exists()
        assert not (stack.layout.scratch / str(next_id + 1000)).exists()
        assert run.counts["scratch_kept_on_recheck"] == 1


async def test_out_of_budget_it_logs_what_it_left(settings_factory, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        await stack.spot.session()
        dirs = [make_dir(stack.layout.scratch / str(50_000 + i), age=(10 - i) * H) for i in range(3)]
        stale = stack.disk.stale
        ask = stale._ask

        async def slow(ids: list[int]):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            stack.clock.advance(200)
            return await ask(ids)

        stale._ask = slow  # type: ignore[method-assign]  # the test's stand-in
        with caplog.at_level(logging.WARNING, logger="zimmer.sweeper.stale"):
            run = await stale.run(SweepBudget(300, stack.clock))
        assert [d.exists() for d in dirs] == [False, True, True]
        assert run.outcome == "partial"
        [record] = [r for r in caplog.records if "out of budget" in r.getMessage()]
        assert record.fields["unreached"] == [str(dirs[1]), str(dirs[2])]  # type: ignore[attr-defined]  # log records carry the `fields` extra


async def test_tombstones_are_reaped_and_orphan_clones_left_to_their_one_job(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#709: the hourly job does not ask which clones are orphaned; it reaps tombstones, which have no
    owner to reason about."""
    async with running(settings_factory, tmp_path) as stack:
        await stack.spot.session()
        orphan_clone = make_dir(stack.layout.clones / "zimmer-main-1-orphan", age=100 * H)
        make_dir(stack.layout.clones / "zimmer-main-2.deleting-0123abcd", age=timedelta(0))
        make_dir(stack.layout.scratch / "7.deleting-0123abcd", age=timedelta(0))
        run = await stack.disk.stale.run()
        assert run.counts["tombstones_reaped"] == 2
        assert list(stack.layout.clones.iterdir()) == [orphan_clone] and list(stack.layout.scratch.iterdir()) == []


@pytest.mark.parametrize(("env", "swept"), [("test", False), ("development", False), ("production", True),
                                            ("staging", True)])
async def test_only_the_deployment_that_owns_the_volume_sweeps_a_root_on_it(
        settings_factory, tmp_path: Path, env: str, swept: bool) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    volume = tmp_path / "zimmer"
    async with running(settings_factory, volume, durable_volume=volume, env=env) as stack:
        await stack.spot.session()
        orphan = make_dir(stack.layout.scratch / "424242", age=9 * H)
        run = await stack.disk.stale.run()
        assert orphan.exists() is not swept
        if not swept:
            assert "only production and staging" in run.note


async def test_a_deleted_sessions_directories_go_at_once_on_every_host(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """session_deleted reaches each host's sweeper (a consumer per host): its scratch and attachment
    directories go as soon as the delete commits, however young. The clone is left to its reapers."""
    async with running(settings_factory, tmp_path / "a") as stack:
        other = tmp_path / "b"
        for root in ("scratch", "attachments"):
            (other / root).mkdir(parents=True)
        second = build(settings_factory(host="host-b", env="test"), clock=FrozenClock(T0), disk_settings=DiskSettings(
            scratch_dir=str(other / "scratch"), attachments_dir=str(other / "attachments"),
            durable_volume=str(tmp_path / "durable-elsewhere")))
        await second.start()
        try:
            sid = await stack.spot.session()
            clone = make_dir(stack.layout.clones / "zimmer-main-1-deleted", age=timedelta(0))
            dirs = [make_dir(root / str(sid), age=timedelta(0))
                    for root in (stack.layout.scratch, stack.layout.attachments, other / "scratch",
                                 other / "attachments")]
            bystander = make_dir(stack.layout.scratch / str(sid + 1), age=timedelta(0))
            await stack.spot.delete(sid)

            async def gone() -> bool:
                return not any(d.exists() for d in dirs)

            await eventually(gone, "both hosts removing the deleted session's directories")
            assert bystander.exists() and clone.exists()
        finally:
            await second.stop()


async def test_the_archived_sessions_pass_runs_first_and_a_failure_there_stops_nothing_else(
        settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        await stack.spot.session()
        orphan = make_dir(stack.layout.scratch / "31337", age=9 * H)

        async def archived_pass(budget: SweepBudget) -> dict[str, int]:
            assert orphan.exists(), "the archived sessions' pass comes before the orphan sweep"
            return {"removed": 2, "bytes_freed": 5_000}

        stack.disk.stale.reap_due_archived = archived_pass
        run = await stack.disk.stale.run()
        assert (run.counts["archived_removed"], run.bytes_freed >= 5_000, orphan.exists()) == (2, True, False)

        async def broken_pass(budget: SweepBudget) -> dict[str, int]:
            raise RuntimeError("spot-gate's listing broke")

        again = make_dir(stack.layout.scratch / "31338", age=9 * H)
        stack.disk.stale.reap_due_archived = broken_pass
        run = await stack.disk.stale.run()
        assert run.outcome == "failed" and "listing broke" in run.note and not again.exists()
