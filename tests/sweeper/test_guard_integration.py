"""The guard (seed 003 "The guard"; #808, #811 on 2026-09-02), against a real spot-gate on real
PostgreSQL and NATS, over real directories: it asks at the instant of deletion, fails closed, pages
and warns on a refusal, and asks again before the transcript goes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from disking import HOST, make_dir, running  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_sweeper.clones import guard as guard_module
from zimmer_sweeper.disk.removal import remove_atomically

OLD = timedelta(days=5)


async def refusals(sql) -> list:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await sql("SELECT host, job, path, session_ids, reason FROM sweeper.disk_refusals ORDER BY id")


async def page_titles(sql) -> list[str]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    rows = await sql("SELECT payload::jsonb->'data'->>'title' AS title FROM sweeper.outbox "
                     "WHERE event_type = 'page' ORDER BY id")
    return [r["title"] for r in rows]


async def test_spot_gate_stopped_means_nothing_deleted_and_the_refusal_is_recorded_and_paged(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-005ceef3", age=OLD)
        await stack.spot.stop()
        result = await stack.disk.reaper.remove_clone(clone, job="test_job")
        assert result.outcome == "unanswered" and not result.removed
        assert (clone / "f0").exists()
        [row] = await refusals(sql)
        assert (row["host"], row["job"], row["path"], row["session_ids"]) == (HOST, "test_job", str(clone), [])
        assert "did not answer" in row["reason"]
        assert await page_titles(sql) == ["Clone reap refused"]


async def test_a_session_unarchived_between_the_snapshot_and_the_delete_keeps_its_clone(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#808/#811: the snapshot said archived; by the instant of deletion the session is live again
    (or carries a fresh unarchive stamp). The guard refuses, pages, and warns on the session."""
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-808808aa", age=OLD)
        sid = await stack.spot.session(clone, archived=True)
        snapshot = await stack.disk.reaper.ownership(clone, job="test_job")
        assert snapshot is not None and snapshot.tracked_by == [sid] and snapshot.protected_by == []
        await stack.spot.unarchive(sid)  # inside the gap
        result = await stack.disk.reaper.remove_clone(clone, job="stale_clone_cleanup")
        assert result.outcome == "refused" and result.session_ids == (sid,)
        assert (clone / "f0").exists() and (clone / ".git").is_dir()
        [row] = await refusals(sql)
        assert row["session_ids"] == [sid] and "stale" in row["reason"]
        assert await page_titles(sql) == ["Clone reap refused"]
        [warning] = await stack.spot.warnings(sid)
        assert warning.kind == "clone_reap_refused" and str(clone) in warning.message


async def test_an_archived_sessions_clone_goes_and_its_transcript_after_the_second_answer(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-0a0a0a0a", age=OLD)
        await stack.spot.session(clone, archived=True)
        reaped: list[Path] = []

        async def reap_transcripts(path: Path) -> None:
            assert not path.exists(), "the transcript goes only after the clone is gone"
            reaped.append(path)

        stack.disk.reaper.reap_transcripts = reap_transcripts
        result = await stack.disk.reaper.remove_clone(clone, job="test_job")
        assert result.removed and result.transcript == "reaped" and reaped == [clone]
        assert list(stack.layout.clones.iterdir()) == []
        assert await refusals(sql) == [] and await page_titles(sql) == []


async def test_a_path_taken_back_while_it_was_deleted_keeps_its_transcript(
        settings_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A session resumed while the rm -rf ran re-clones at the same path: the second answer changed,
    so the clone is gone but the transcript stays."""
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-0b0b0b0b", age=OLD)
        sid = await stack.spot.session(clone, archived=True)

        async def remove_then_resume(path: Path, *, job: str):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            removal = await remove_atomically(path, job=job)
            await stack.spot.unarchive(sid)
            return removal

        monkeypatch.setattr(guard_module, "remove_atomically", remove_then_resume)
        reaped: list[Path] = []

        async def reap_transcripts(path: Path) -> None:
            reaped.append(path)

        stack.disk.reaper.reap_transcripts = reap_transcripts
        result = await stack.disk.reaper.remove_clone(clone, job="test_job")
        assert result.removed and result.transcript == "kept" and result.session_ids == (sid,)
        assert reaped == []


async def test_discard_created_needs_no_answer(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The rollback path for a directory the caller itself just made: no session names it, and
    failing closed on a blip would leave a partial tree the retried clone trips over."""
    async with running(settings_factory, tmp_path) as stack:
        partial = make_dir(stack.layout.clones / "zimmer-main-1785661439-0c0c0c0c", age=timedelta(0))
        await stack.spot.stop()
        removal = await stack.disk.reaper.discard_created(partial, job="clone_rollback")
        assert removal is not None and not partial.exists() and list(stack.layout.clones.iterdir()) == []


async def test_the_guard_deletes_nothing_outside_the_clones_base_or_a_tombstone(
        settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        elsewhere = make_dir(tmp_path / "home" / "someone", age=OLD)
        nested = make_dir(stack.layout.clones / "a" / "b", age=OLD)
        tomb = make_dir(stack.layout.clones / "x.deleting-0123abcd", age=OLD)
        for path in (elsewhere, nested, tomb):
            result = await stack.disk.reaper.remove_clone(path, job="test_job")
            assert result.outcome == "fenced" and path.exists(), path


async def test_a_clones_base_on_the_durable_volume_is_not_reaped_outside_production_and_staging(
        settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A test or development deployment resolving its clones base onto the real volume: its
    database does not describe that volume, so nothing there is deleted, even an orphan."""
    async with running(settings_factory, tmp_path / "volume", durable_volume=tmp_path / "volume",
                       env="development") as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-0d0d0d0d", age=OLD)
        result = await stack.disk.reaper.remove_clone(clone, job="test_job")
        assert result.outcome == "fenced" and "only production and staging" in result.reason
        assert clone.exists()
