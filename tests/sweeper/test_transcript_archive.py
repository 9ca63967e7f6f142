"""TranscriptArchiveJob (seed 003's cron row; DESIGN §4): per-session zips in JetStream's object
store, checkpointed, change detection that sees a subagent transcript, latest.zip, a backlog
deferred at WARN, and a deleted session's archive going with it. Real directories, a real spot-gate,
real PostgreSQL and NATS (its object store), a frozen clock."""

from __future__ import annotations

import io
import logging
import zipfile
from datetime import timedelta
from pathlib import Path

from sweeping import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from transcripting import touch, transcript_dir, transcript_stack  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common import objects
from zimmer_common.budget import SweepBudget
from zimmer_common.contracts.disk import LATEST_OBJECT, TRANSCRIPT_BUCKET, session_transcript_object
from zimmer_sweeper.transcripts.archive import MAX_SESSIONS_PER_RUN, TranscriptArchive

HOUR = timedelta(hours=1)


def budget(stack) -> SweepBudget:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return SweepBudget(300, stack.clock)


async def download(stack, name: str) -> zipfile.ZipFile | None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    found = await objects.find(stack.bus.js, TRANSCRIPT_BUCKET, name)
    if found is None:
        return None
    data = b"".join([chunk async for chunk in objects.chunks(stack.bus.js, TRANSCRIPT_BUCKET, found[1])])
    return zipfile.ZipFile(io.BytesIO(data))


async def test_zips_checkpoints_change_detection_by_a_subagent_transcript_and_latest(
        settings_factory, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        root = stack.transcripts
        a_clone, b_clone = stack.clones / "zimmer-main-1-aaaa", stack.clones / "zimmer-main-2-bbbb"
        a = await stack.clone_session(a_clone)
        b = await stack.clone_session(b_clone, subdir="app")  # the agent's cwd is <clone>/app
        await stack.clone_session(stack.clones / "zimmer-main-3-none")  # no transcript yet
        other = stack.clones / "zimmer-main-4-other"
        await stack.clone_session(other, host="host-b")  # that host archives it
        transcript_dir(root, stack.name(a_clone), age=HOUR,
                       files={"s1.jsonl": 300, "s1/subagents/agent-1.jsonl": 30, "tool-results/r.txt": 30})
        transcript_dir(root, stack.name(b_clone, "app"), age=HOUR, files={"s2.jsonl": 300})
        transcript_dir(root, stack.name(other), age=HOUR)

        first = await stack.app.archive.run(budget(stack))
        c = first.counts
        assert (c["sessions"], c["archived"], c["no_transcript"], c["deferred"]) == (3, 2, 1, 0)
        assert (c["latest_rebuilt"], c["latest_entries"], first.outcome) == (1, 2, "ok")
        zipped = await download(stack, session_transcript_object(a))
        assert zipped is not None and sorted(zipped.namelist()) == sorted([
            "session.json", f"{stack.name(a_clone)}/s1.jsonl", f"{stack.name(a_clone)}/s1/subagents/agent-1.jsonl",
            f"{stack.name(a_clone)}/tool-results/r.txt"])
        assert b'"session_id": %d' % a in zipped.read("session.json")
        zipped_b = await download(stack, session_transcript_object(b))
        assert zipped_b is not None and f"{stack.name(b_clone, 'app')}/s2.jsonl" in zipped_b.namelist()
        latest = await download(stack, LATEST_OBJECT)
        assert latest is not None and sorted(latest.namelist()) == sorted(
            [session_transcript_object(a), session_transcript_object(b)])
        nested = zipfile.ZipFile(io.BytesIO(latest.read(session_transcript_object(a))))
        assert nested.read(f"{stack.name(a_clone)}/s1.jsonl") == zipped.read(f"{stack.name(a_clone)}/s1.jsonl")
        rows = await sql("SELECT session_id, host, files, directories FROM sweeper.transcript_archives ORDER BY 1")
        assert [(r["session_id"], r["host"], r["files"]) for r in rows] == [(a, "host-a", 3), (b, "host-a", 1)]

        second = await stack.app.archive.run(budget(stack))
        assert (second.counts["archived"], second.counts["unchanged"]) == (0, 2)
        assert "latest_rebuilt" not in second.counts  # nothing changed: latest.zip is not copied again

        # A subagent writes its own file and touches nothing else, the session row included.
        agent = root / stack.name(a_clone) / "s1" / "subagents" / "agent-1.jsonl"
        agent.write_text('{"later": true}\n')
        touch(agent, timedelta(minutes=1))
        third = await stack.app.archive.run(budget(stack))
        assert (third.counts["archived"], third.counts["unchanged"], third.counts["latest_rebuilt"]) == (1, 1, 1)
        again = await download(stack, session_transcript_object(a))
        assert again is not None
        assert again.read(f"{stack.name(a_clone)}/s1/subagents/agent-1.jsonl") == b'{"later": true}\n'


async def test_a_backlog_is_deferred_to_the_next_tick_at_warn(settings_factory, tmp_path: Path,
                                                             caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    assert MAX_SESSIONS_PER_RUN == 50
    async with transcript_stack(settings_factory, tmp_path) as stack:
        made = stack.app.archive
        archive = TranscriptArchive(bus=made._bus, units=made.units, roots=made.roots,  # noqa: SLF001 - the app's own bus
                                    records=made.records, now=stack.clock.now, metrics=made.metrics, limit=2)
        for i in range(3):
            clone = stack.clones / f"zimmer-main-{i}-cccc"
            await stack.clone_session(clone)
            transcript_dir(stack.transcripts, stack.name(clone), age=HOUR * (3 - i))
        with caplog.at_level(logging.WARNING, logger="zimmer.sweeper.archive"):
            first = await archive.run(budget(stack))
        assert (first.counts["archived"], first.counts["deferred"], first.outcome) == (2, 1, "partial")
        [warned] = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert warned.getMessage() == "transcript archive: changed sessions deferred to the next tick"
        second = await archive.run(budget(stack))
        assert (second.counts["archived"], second.counts["unchanged"], second.counts["deferred"]) == (1, 2, 0)
        assert second.outcome == "ok"


async def test_a_deleted_sessions_archive_goes_with_it(settings_factory, tmp_path: Path,
                                                      sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        kept_clone, gone_clone = stack.clones / "zimmer-main-1-keep", stack.clones / "zimmer-main-2-gone"
        kept = await stack.clone_session(kept_clone)
        gone = await stack.clone_session(gone_clone)
        for clone in (kept_clone, gone_clone):
            transcript_dir(stack.transcripts, stack.name(clone), age=HOUR)
        await stack.app.archive.run(budget(stack))
        await stack.spot.delete(gone)

        async def checkpointed() -> list[int]:
            return [r["session_id"] for r in await sql("SELECT session_id FROM sweeper.transcript_archives")]

        async def forgotten() -> bool:
            # The zip goes first, then the checkpoint commits with the consumer's ack: wait for both.
            return await download(stack, session_transcript_object(gone)) is None and await checkpointed() == [kept]

        await eventually(forgotten, "the deleted session's zip and checkpoint going")
        after = await stack.app.archive.run(budget(stack))
        assert (after.counts["latest_rebuilt"], after.counts["latest_entries"]) == (1, 1)
        latest = await download(stack, LATEST_OBJECT)
        assert latest is not None and latest.namelist() == [session_transcript_object(kept)]
