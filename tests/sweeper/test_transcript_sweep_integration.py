"""The orphan transcript sweep (seed 003, "The transcript directory outlives the clone" and
"Classification is forward-only, and uncertainty keeps"), over real directories, against a real
spot-gate on real PostgreSQL and NATS, with a frozen clock."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

from transcripting import Volume, touch, transcript_dir, transcript_stack  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.budget import SweepBudget
from zimmer_common.schedule import resolved_schedule
from zimmer_common.settings import Environment
from zimmer_sweeper.disk.config import DiskSettings
from zimmer_sweeper.disk.volumes import Roots
from zimmer_sweeper.transcripts import sweep as transcripts_module
from zimmer_sweeper.transcripts.sweep import DEVELOPMENT_REFUSAL, JOB, TranscriptSweep

OLD = timedelta(hours=30)
YOUNG = timedelta(hours=2)
BUDGET = 300.0


def budget(stack, seconds: float = BUDGET) -> SweepBudget:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return SweepBudget(seconds, stack.clock)


def left(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()}


async def runs(sql) -> list:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    rows = await sql("SELECT outcome, counts, bytes_freed, note FROM sweeper.disk_runs WHERE job = $1 ORDER BY id",
                     JOB)
    return [{**r, "counts": json.loads(r["counts"])} for r in rows]


async def test_live_orphaned_and_unknown_and_only_the_orphans_past_the_bar_go(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        root = stack.transcripts
        live = stack.clones / "zimmer-main-1785661439-005ceef3"
        await stack.clone_session(live, subdir="app")
        # Running, its clone not on disk (a resume about to re-clone it): claimed by spot-gate alone.
        claimed = stack.clones / "zimmer-main-1785661500-cafecafe"
        await stack.clone_session(claimed, make=False)
        gone = stack.clones / "zimmer-main-1785000000-deadbeef"
        keep = {
            stack.name(live): OLD,  # a live clone's own transcript, idle for a day
            stack.name(live, "app"): OLD,  # its agent root subdirectory's: the naive equality sweeper deletes it
            stack.name(claimed): OLD,
            "-rails": OLD,  # unknown: the app root inside the container, which is live
            "-tmp-headless-inference-fresh": timedelta(hours=23),  # inside the 24 h bar
        }
        remove = {stack.name(gone): OLD, stack.name(gone, "web"): OLD, "-tmp-headless-inference-4f1c2a": OLD}
        for name, age in (keep | remove).items():
            transcript_dir(root, name, age=age)
        # Their own mtime froze at session start; a file inside is fresh (Claude Code appends to
        # one .jsonl; a subagent writes its own file under <session>/subagents/): kept.
        appended = stack.name(stack.clones / "zimmer-main-1785000001-0badf00d")
        transcript_dir(root, appended, age=OLD, files={"s.jsonl": 10, "s/subagents/agent-1.jsonl": 10})
        touch(root / appended / "s" / "subagents" / "agent-1.jsonl", YOUNG)
        transcript_dir(root, appended + "-x", age=OLD)
        touch(root / (appended + "-x") / "0b6e0c1e-session.jsonl", YOUNG)
        keep |= {appended: YOUNG, appended + "-x": YOUNG}
        (root / "stray-file").write_text("not a directory")

        assert "--zimmer-clones-" in stack.name(live)  # .zimmer renders as --zimmer
        before = Volume(root).read(root).free_bytes
        report = await stack.app.sweep.run(budget(stack))

        assert left(root) == set(keep) | {"stray-file"}
        assert sorted(report.removed) == sorted(remove)
        c = report.counts
        assert (c["examined"], c["live"], c["unknown"], c["removed"], c["too_young"]) == (10, 3, 1, 3, 3)
        assert (c["orphaned_gone_clone"], c["orphaned_ephemeral"], c["not_directory"]) == (4, 2, 1)
        assert report.outcome == "ok"
        [row] = await runs(sql)
        assert row["outcome"] == "ok" and row["counts"]["removed"] == 3
        # Bytes are what the volume got back, reported apart from the count.
        assert row["bytes_freed"] == Volume(root).read(root).free_bytes - before > 0
        assert "removed 3" in row["note"] and f"{row['bytes_freed']:,} bytes" in row["note"]


async def test_a_missing_or_unreadable_clones_base_aborts_and_deletes_nothing(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        name = stack.name(stack.clones / "zimmer-main-1785000000-deadbeef")
        transcript_dir(stack.transcripts, name, age=OLD)
        stack.clones.rmdir()
        first = await stack.app.sweep.run(budget(stack))
        stack.clones.write_text("a file where the clones base should be")
        second = await stack.app.sweep.run(budget(stack))
        stack.clones.unlink()
        stack.clones.mkdir()
        third = await stack.app.sweep.run(budget(stack))  # empty: reads like an unmounted volume
        assert [r.outcome for r in (first, second, third)] == ["aborted"] * 3
        assert "cannot be listed" in first.note and "cannot be listed" in second.note and "empty" in third.note
        assert left(stack.transcripts) == {name}
        assert [r["outcome"] for r in await runs(sql)] == ["aborted"] * 3


async def test_spot_gate_down_keeps_everything(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        await stack.clone_session(stack.clones / "zimmer-main-1785661439-005ceef3")
        name = stack.name(stack.clones / "zimmer-main-1785000000-deadbeef")
        transcript_dir(stack.transcripts, name, age=OLD)
        await stack.spot.stop()
        report = await stack.app.sweep.run(budget(stack))
        assert report.outcome == "aborted" and "failed closed" in report.note
        assert left(stack.transcripts) == {name}


def _sweep(stack, disk: DiskSettings, env: Environment) -> TranscriptSweep:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    app = stack.app.sweep
    return TranscriptSweep(bus=app._bus, roots=Roots(disk, env), records=app.records, now=stack.clock.now,  # noqa: SLF001 - the app's own bus
                           metrics=app.metrics, free_space=app.free_space)


async def test_two_fences_one_per_volume(settings_factory, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        await stack.clone_session(stack.clones / "zimmer-main-1785661439-005ceef3")
        name = stack.name(stack.clones / "zimmer-main-1785000000-deadbeef")
        transcript_dir(stack.transcripts, name, age=OLD)
        clones_on_volume = DiskSettings(clones_dir=str(stack.clones), transcripts_dir=str(stack.transcripts),
                                        durable_volume=str(tmp_path / ".zimmer"))
        report = await _sweep(stack, clones_on_volume, Environment.TEST).run(budget(stack))
        assert report.outcome == "aborted" and report.note.startswith("clones base:")
        # AGENT_CLONES_DIR relocates the clones base; nothing relocates ~/.claude/projects: a
        # fence on the clones base alone would permit the sweep where a developer runs it.
        monkeypatch.setenv("HOME", str(tmp_path / "person"))
        (tmp_path / "person").mkdir()
        (tmp_path / "person" / ".claude").symlink_to(stack.transcripts.parent)
        own_history = DiskSettings(clones_dir=str(stack.clones), transcripts_dir=str(tmp_path / "person/.claude/projects"),
                                   durable_volume=str(tmp_path / "durable-elsewhere"))
        report = await _sweep(stack, own_history, Environment.TEST).run(budget(stack))
        assert report.outcome == "aborted" and report.note.startswith("transcripts root:")
        assert left(stack.transcripts) == {name}
        # The deployment that owns both volumes sweeps them.
        report = await _sweep(stack, own_history, Environment.STAGING).run(budget(stack))
        assert report.outcome == "ok" and left(stack.transcripts) == set()


async def test_development_refuses_even_by_hand_and_never_schedules_it(
        settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path, env="development") as stack:
        await stack.clone_session(stack.clones / "zimmer-main-1785661439-005ceef3")
        name = stack.name(stack.clones / "zimmer-main-1785000000-deadbeef")
        transcript_dir(stack.transcripts, name, age=OLD)
        report = await stack.app.sweep.run(budget(stack))
        assert report.outcome == "aborted" and report.note == DEVELOPMENT_REFUSAL
        assert left(stack.transcripts) == {name}
    resolved = resolved_schedule()
    key = f"sweeper.{JOB}"
    assert key in resolved["production"] and key in resolved["staging"] and key not in resolved["development"]


async def test_a_run_takes_at_most_1000_oldest_first_and_the_next_run_the_rest(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        await stack.clone_session(stack.clones / "zimmer-main-1785661439-005ceef3")
        names = [stack.name(stack.clones / f"zimmer-main-{1785000000 + i}-deadbeef") for i in range(1_003)]
        for i, name in enumerate(names):
            transcript_dir(stack.transcripts, name, age=OLD + timedelta(minutes=i), files={"s.jsonl": 3})
        first = await stack.app.sweep.run(budget(stack))
        assert (first.counts["removed"], first.counts["deferred"], first.outcome) == (1_000, 3, "partial")
        assert left(stack.transcripts) == set(names[:3])  # the three youngest wait
        second = await stack.app.sweep.run(budget(stack))
        assert (second.counts["removed"], second.outcome) == (3, "ok") and left(stack.transcripts) == set()


async def test_a_spent_budget_leaves_the_rest_for_the_next_run(settings_factory, tmp_path: Path,
                                                               caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        await stack.clone_session(stack.clones / "zimmer-main-1785661439-005ceef3")
        name = stack.name(stack.clones / "zimmer-main-1785000000-deadbeef")
        transcript_dir(stack.transcripts, name, age=OLD)
        with caplog.at_level(logging.WARNING, logger="zimmer.sweeper.transcripts"):
            report = await stack.app.sweep.run(SweepBudget(0, stack.clock))
        assert (report.counts["unreached"], report.outcome) == (1, "partial") and left(stack.transcripts) == {name}
        assert any("left work for the next run" in r.getMessage() for r in caplog.records)


async def test_a_clone_back_at_its_path_before_the_delete_keeps_its_transcript(
        settings_factory, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The second look: a session resumed into a re-clone at the same path while the run read the
    root is live by the time its transcript's turn comes."""
    async with transcript_stack(settings_factory, tmp_path) as stack:
        await stack.clone_session(stack.clones / "zimmer-main-1785661439-005ceef3")
        back = stack.clones / "zimmer-main-1785000000-deadbeef"
        gone = stack.clones / "zimmer-main-1785000001-deadbeef"
        for clone in (back, gone):
            transcript_dir(stack.transcripts, stack.name(clone), age=OLD)
        chosen = transcripts_module.select

        def select_then_reclone(*args, **kwargs):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            out = chosen(*args, **kwargs)
            back.mkdir()
            return out

        monkeypatch.setattr(transcripts_module, "select", select_then_reclone)
        report = await stack.app.sweep.run(budget(stack))
        assert report.counts["turned_live"] == 1 and report.removed == [stack.name(gone)]
        assert left(stack.transcripts) == {stack.name(back)}
