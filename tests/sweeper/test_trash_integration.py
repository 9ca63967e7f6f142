"""The trash pipeline on archive (seed 003, "The clone cleanup's own git commands are bounded too"
through "Counting mangled clones without paging for each one"): spot-gate archives a session whose
clone is a real git repository, the sweeper's consumer records it, and the per-host job cleans it:
preserved when dirty, defused when mangled, held when git wedges, retried quietly, loud only at
exhaustion. Real PostgreSQL, NATS and spot-gate; a frozen clock."""

from __future__ import annotations

import json
import logging
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from trash_repos import add_scaffolding, alive, delete_tracked, git, make_dirty, wedge  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trashing import trash_stack  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_sweeper.trash.git_artifacts import BUNDLE, MANIFEST, PATCH, Git, preserve

pytestmark = pytest.mark.timeout(120)


def records_at(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == level and r.name.startswith("zimmer")]


async def test_a_clean_clone_is_deleted_without_preservation_and_nothing_is_kept(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-c1ea0001")
        add_scaffolding(clone)  # Zimmer's own files do not make a clone dirty
        await stack.archive(sid)
        rec = await stack.settled(sid, "done")
        assert not clone.exists()
        assert (rec["finding"], rec["clone_removed"], rec["trash_after"], rec["attempts"]) == ("clean", True, None, 1)
        assert not (stack.roots.artifacts / str(sid)).exists()
        await stack.attempted(sid, 1)  # the run is written down at its end
        [run] = await sql("SELECT outcome, counts FROM sweeper.disk_runs WHERE job = 'deferred_clone_cleanup'")
        assert run["outcome"] == "ok" and json.loads(run["counts"])["removed"] == 1


async def test_a_dirty_clone_is_preserved_then_deleted_and_its_deadline_is_the_archive_plus_four_days(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-d1a70001")
        make_dirty(clone)
        add_scaffolding(clone)
        head = git(clone, "rev-parse", "HEAD").strip()
        await stack.archive(sid)
        rec = await stack.settled(sid, "trashed")
        assert not clone.exists()
        assert rec["finding"] == "dirty" and rec["bundle_preserved"] and rec["patch_preserved"]
        assert rec["trash_after"] == rec["archived_at"] + timedelta(days=4)
        dest = stack.roots.artifacts / str(sid)
        assert rec["artifacts_path"] == str(dest) and rec["preserved_bytes"] > 0
        # The bundle verifies, and the patch applies on a fresh clone of the remote given the bundle.
        fresh = tmp_path / "fresh"
        git(tmp_path, "clone", "-q", str(tmp_path / "zimmer-main-1785661439-d1a70001.remote.git"), "fresh")
        git(fresh, "bundle", "verify", "-q", str(dest / BUNDLE))
        git(fresh, "fetch", "-q", str(dest / BUNDLE), "main:archived")
        git(fresh, "checkout", "-q", "archived")
        assert git(fresh, "rev-parse", "HEAD").strip() == head
        git(fresh, "apply", str(dest / PATCH))
        assert (fresh / "scratch.txt").read_text() == "untracked notes\n"
        assert not (fresh / ".mcp.json").exists()


async def test_a_tree_of_only_deletions_is_defused_at_warn_with_a_marker_and_its_bundle_travels(
        settings_factory, tmp_path: Path, sql, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#412 / 2026-09-02: an interrupted in-place rm -rf left nothing but deletions of tracked files
    (and Zimmer's scaffolding). Preserving that would replay the corruption; it is dropped at WARN
    (nine pages in one afternoon were nine sessions that archived fine), and counted."""
    caplog.set_level(logging.INFO)
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-412a0001")
        (clone / "README.md").write_text("real work, committed\n")
        git(clone, "commit", "-q", "-am", "unpushed")
        dropped = delete_tracked(clone)
        add_scaffolding(clone)
        await stack.archive(sid)
        rec = await stack.settled(sid, "trashed")
        assert rec["finding"] == "mangled" and rec["bundle_preserved"] and not rec["patch_preserved"]
        assert not (stack.roots.artifacts / str(sid) / PATCH).exists()
        [marker] = await sql("SELECT session_id, host, dropped_deletions, defused_at, archived_at "
                             "FROM sweeper.mangled_clone_markers")
        assert (marker["session_id"], marker["host"], marker["dropped_deletions"]) == (sid, "host-a", dropped)
        assert marker["defused_at"] == stack.clock.now() and marker["archived_at"] == rec["archived_at"]
        assert any("mangled clone defused" in r.getMessage() for r in records_at(caplog, logging.WARNING))
        assert records_at(caplog, logging.ERROR) == [] and await stack.page_titles() == []


async def test_a_wedged_git_is_killed_at_its_bound_counted_dirty_and_the_clone_is_held(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with trash_stack(settings_factory, tmp_path, sql, git_timeout=1.0) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-3ed9e001")
        (clone / "README.md").write_text("the only copy of this work\n")
        notes = wedge(clone, tmp_path)
        await stack.archive(sid)
        rec = await stack.settled(sid, "held")
        assert rec["finding"] == "unknown" and "git timed out" in rec["outcome"]
        assert (clone / "README.md").read_text() == "the only copy of this work\n"  # held, not deleted
        assert rec["trash_after"] == rec["archived_at"] + timedelta(days=4) and not rec["clone_removed"]
        assert (notes / "calls").read_text().count("called") == 1  # the bound was spent once, not per command
        assert not alive(int((notes / "child.pid").read_text())), "git's helper outlived the process-group kill"
        assert not (stack.roots.artifacts / str(sid) / MANIFEST).exists()
        assert await stack.page_titles() == []


async def test_a_retry_that_finds_no_clone_but_preserved_artifacts_keeps_the_deadline(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The artifact question: a first attempt preserved and deleted, then failed on the way out. The
    retry finds no clone; clearing trash_after would hand the only copy to the first reaper."""
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-a47f0001")
        make_dirty(clone)
        dest = stack.roots.artifacts / str(sid)
        await preserve(Git(clone, timeout=30), dest, now=stack.clock.now())  # what the first attempt did
        shutil.rmtree(clone)  # ... and its delete, before the attempt failed on the way out
        await stack.archive(sid)
        rec = await stack.settled(sid, "trashed")
        assert rec["finding"] == "absent" and rec["trash_after"] == rec["archived_at"] + timedelta(days=4)
        assert (dest / BUNDLE).exists() and (dest / MANIFEST).exists()
        assert "preserved work kept" in rec["outcome"]


async def test_five_failures_are_quiet_until_the_last_which_pages_once(
        settings_factory, tmp_path: Path, sql, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    caplog.set_level(logging.INFO)
    async with trash_stack(settings_factory, tmp_path, sql) as stack:
        sid, clone = await stack.clone_session("zimmer-main-1785661439-fa110001")
        (clone / ".git" / "HEAD").write_text("garbage\n")  # every git command now fails
        await stack.archive(sid)
        for attempt in range(1, 5):
            rec = await stack.attempted(sid, attempt)
            assert rec["state"] == "pending" and rec["attempts"] == attempt and rec["last_error"]
            assert await stack.page_titles() == [] and records_at(caplog, logging.ERROR) == []
            stack.clock.advance(timedelta(seconds=30))  # RETRY_WAIT
            await stack.run_cleanup()
        rec = await stack.settled(sid, "exhausted")
        assert rec["attempts"] == 5 and clone.exists()
        assert rec["trash_after"] == rec["archived_at"] + timedelta(days=4)  # a periodic reaper's, later
        assert await stack.page_titles() == ["Clone cleanup failed"]
        # Issue 26 #7: git's stderr is raw text: it goes through the snippet builder into its own
        # field, never the prose (where it skipped redaction, and past 2,000 characters lost the page).
        [page] = await stack.pages()
        assert rec["last_error"] and rec["last_error"][:40] not in page["message"], page["message"]
        assert "The last error is in the snippet." in page["message"] and page["snippet"]
        failed = [r for r in caplog.records if r.getMessage().startswith("clone cleanup attempt failed")]
        assert [r.levelno for r in failed] == [logging.INFO] + [logging.WARNING] * 3
        stack.clock.advance(timedelta(seconds=30))
        await stack.run_cleanup()  # nothing more: exhausted is final, and paged once
        await stack.trash.cleanup.run()
        assert (await stack.record(sid))["attempts"] == 5 and await stack.page_titles() == ["Clone cleanup failed"]
