"""The trash after the cleanup: unarchive restores from what was preserved and clears spot-gate's
stamp; EmptyTrash acts only after the deadline and never on a reap-protected session; the daily
mangled clone report's 25-hour window from the run's start; redelivered events do nothing twice;
the hourly stale cleanup adopts an archive the pipeline never saw and reaps what is past keeping.
Real git, PostgreSQL, NATS and spot-gate; a frozen clock."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sweeping import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trash_repos import add_scaffolding, delete_tracked, git, make_clone, make_dirty, tree_files  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trashing import trash_stack  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.clones import INGEST_CLONE, CloneReport
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.subjects import Stream
from zimmer_sweeper.trash.git_artifacts import BUNDLE

pytestmark = pytest.mark.timeout(120)
SCAFFOLDING = (".mcp.json", ".claude/settings.json", "claude-stderr.log")


async def test_unarchive_restores_the_work_from_the_bundle_and_patch_and_clears_the_stamp(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-4e540001")
        make_dirty(clone)
        add_scaffolding(clone)
        work = {k: v for k, v in tree_files(clone).items() if k not in SCAFFOLDING}
        head = git(clone, "rev-parse", "HEAD").strip()
        await stack.archive(sid)
        await stack.settled(sid, "trashed")
        assert not clone.exists()
        await stack.spot.unarchive(sid)
        assert await stack.spot_stamp(sid) is not None  # the unarchive window is open
        rec = await stack.settled(sid, "restored")
        assert rec["restore_outcome"] == "restored" and "bundle" in rec["restore_detail"]
        assert tree_files(clone) == work
        assert git(clone, "rev-parse", "HEAD").strip() == head
        assert git(clone, "status", "--porcelain", "--untracked-files=all").strip()  # the dirt came back too
        assert await stack.spot_stamp(sid) is None  # unarchive_restored dropped it
        assert not (stack.roots.artifacts / str(sid)).exists()  # it is in the clone now

        async def written_down() -> bool:
            rows = await sql("SELECT counts FROM sweeper.disk_runs WHERE job = 'unarchive_restore'")
            return bool(rows) and json.loads(rows[0]["counts"]).get("restored") == 1

        await eventually(written_down, "the restore run's record")


async def test_unarchive_of_a_clean_clone_says_nothing_was_preserved(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-c1ea0002")
        await stack.archive(sid)
        await stack.settled(sid, "done")
        await stack.spot.unarchive(sid)
        rec = await stack.settled(sid, "restored")
        assert rec["restore_outcome"] == "nothing_preserved" and not clone.exists()
        assert await stack.spot_stamp(sid) is None


async def test_empty_trash_acts_only_after_the_deadline_and_refuses_a_reap_protected_session(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        roots = stack.roots
        trashed, clone = await stack.clone_session("zimmer-main-1785661439-e3e30001")
        make_dirty(clone)
        protected, _ = await stack.clone_session("zimmer-main-1785661439-e3e30002")
        for sid in (trashed, protected):
            (roots.scratch / str(sid)).mkdir()
            (roots.scratch / str(sid) / "notes").write_text("scratch")
            (roots.attachments / str(sid)).mkdir()
            await stack.archive(sid)
            await stack.settled(sid, "trashed")
        # The protected one is live again (unarchived), yet a stale record still calls it trash:
        # exactly the snapshot EmptyTrash must not trust.
        await stack.spot.unarchive(protected)
        await stack.settled(protected, "restored")
        await sql("UPDATE sweeper.trash_records SET state = 'trashed', trash_after = archived_at + interval '4 days' "
                  "WHERE session_id = $1", protected)
        rec = await stack.record(trashed)
        await stack.trash.empty.run()  # before the deadline: nothing
        assert (roots.artifacts / str(trashed) / BUNDLE).exists() and (roots.scratch / str(trashed)).exists()
        assert (await stack.record(trashed))["state"] == "trashed"
        later = max(rec["trash_after"], (await stack.record(protected))["trash_after"])
        stack.clock.set(later + timedelta(seconds=1))
        await stack.trash.empty.run()
        emptied = await stack.record(trashed)
        assert emptied["state"] == "emptied"
        for root in (roots.artifacts, roots.scratch, roots.attachments):
            assert not (root / str(trashed)).exists()
        kept = await stack.record(protected)
        assert kept["state"] == "kept" and "reap-protected" in kept["outcome"]
        assert (roots.scratch / str(protected) / "notes").read_text() == "scratch"
        [run] = await sql("SELECT counts FROM sweeper.disk_runs WHERE job = 'empty_trash' "
                          "AND (counts->>'examined')::int > 0")
        counts = json.loads(run["counts"])
        assert counts["emptied"] == 1 and counts["kept"] == 1


async def test_the_mangled_report_window_is_25_hours_back_from_when_the_run_starts(
        settings_factory, tmp_path: Path, sql, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Defused at 07:30. The 08:00 report that starts late at 08:20 reaches back to 07:20 of the day
    before and names it (a 24 h window from the cron's 08:00 would have dropped it); one starting at
    08:31 reaches only 07:31 and writes INFO."""
    caplog.set_level(logging.INFO)
    clock = FrozenClock(datetime(2026, 12, 1, 7, 30, tzinfo=UTC))
    async with trash_stack(settings_factory, tmp_path, sql, clock=clock) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-412b0001")
        dropped = delete_tracked(clone)
        await stack.archive(sid)
        await stack.settled(sid, "done", "trashed")
        clock.set(datetime(2026, 12, 2, 8, 20, tzinfo=UTC))
        await stack.trash.report.run()
        clock.set(datetime(2026, 12, 2, 8, 31, tzinfo=UTC))
        await stack.trash.report.run()
    lines = [r for r in caplog.records if r.getMessage().startswith("mangled clone report")]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO]
    assert f"sessions {sid}" in lines[0].getMessage() and f"{dropped} tracked-file deletion(s)" in lines[0].getMessage()
    assert lines[0].fields["window_start"] == "2026-12-01T07:20:00+00:00"  # type: ignore[attr-defined]  # log records carry the `fields` extra


async def _republish(stack, subject: str) -> str:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """The last event on `subject` again, as a duplicate that outlived JetStream's dedupe window:
    the very payload spot-gate sent (its version included), under a new message id."""
    resp = await stack.spot.bus.js_api(f"STREAM.MSG.GET.{Stream.EVENTS.value}", {"last_by_subj": subject})
    original = EventEnvelope.model_validate_json(base64.b64decode(resp["message"]["data"]))
    envelope = original.model_copy(update={"id": uuid.uuid4().hex})
    await stack.spot.bus.publish(subject, envelope.model_dump_json().encode(), msg_id=envelope.id)

    async def processed() -> bool:
        return bool(await stack.sql("SELECT 1 FROM sweeper.processed_messages WHERE message_id = $1", envelope.id))

    await eventually(processed, "the sweeper to take the duplicate")
    return envelope.id


async def test_redelivered_events_do_nothing_twice(settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-de110001")
        make_dirty(clone)
        await stack.archive(sid)
        before = await stack.settled(sid, "trashed")
        await _republish(stack, c.SESSION_ARCHIVED)
        await stack.trash.cleanup.run()
        assert dict(await stack.record(sid)) == dict(before)  # no second cycle, no second attempt
        await stack.spot.unarchive(sid)
        restored = await stack.settled(sid, "restored")
        files = tree_files(clone)
        (clone / "after-restore.txt").write_text("new work on the restored clone\n")
        await _republish(stack, c.SESSION_UNARCHIVED)
        await stack.trash.restore.run()
        assert dict(await stack.record(sid)) == dict(restored)  # no second restore over the new work
        assert tree_files(clone) == {**files, "after-restore.txt": b"new work on the restored clone\n"}
        registry = stack.sweeper.metrics.registry
        assert registry.get_sample_value("zimmer_trash_restores_total", {"outcome": "restored"}) == 1
        assert registry.get_sample_value("zimmer_trash_events_recorded_total", {"event": "session_archived"}) == 1


async def test_the_stale_cleanup_adopts_an_archive_the_pipeline_never_saw_and_reaps_a_clone_past_keeping(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        name = "zimmer-main-1785661439-57a1e001"
        sid = (await stack.spot.bus.request(c.SPAWN, c.SpawnSession(title="t", start=False))).session.id
        clone = stack.roots.clones / name
        # The runtime reported no host, and at the archive the clone was not on this disk yet: the
        # consumer rightly skipped it (an event this host never acted on).
        report = CloneReport(session_id=sid, clone_path=str(clone), at=stack.clock.now())
        envelope = EventEnvelope(id=uuid.uuid4().hex, type="clone", version=1, source="runtime",
                                 occurred_at=stack.clock.now(), data=report.model_dump(mode="json"))
        await stack.spot.bus.publish(INGEST_CLONE, envelope.model_dump_json().encode(), msg_id=envelope.id)
        await stack.archive(sid)

        async def recorded_nothing() -> bool:
            return bool(await sql("SELECT 1 FROM sweeper.processed_messages WHERE consumer = 'sweeper_host-a_trash'"))

        await eventually(recorded_nothing, "the archive to reach the sweeper")
        assert await stack.record(sid) is None
        make_clone(tmp_path, stack.roots.clones, name)
        make_dirty(clone)
        await stack.sweeper.app.disk.stale.run()  # the hourly pass adopts it: four days and a bundle
        rec = await stack.settled(sid, "trashed")
        assert (stack.roots.artifacts / str(sid) / BUNDLE).exists() and not clone.exists()
        # A clone back on disk for a session whose trash is past its deadline goes through the guard.
        (tmp_path / "again").mkdir()
        make_clone(tmp_path / "again", stack.roots.clones, name)
        await stack.sweeper.app.disk.stale.run()
        assert clone.exists()  # inside its window: the pipeline's alone
        stack.clock.set(rec["trash_after"] + timedelta(seconds=1))
        await stack.sweeper.app.disk.stale.run()
        assert not clone.exists()
        [run] = await sql("SELECT counts FROM sweeper.disk_runs WHERE job = 'stale_clone_cleanup' "
                          "ORDER BY id DESC LIMIT 1")
        assert json.loads(run["counts"])["archived_removed"] == 1
