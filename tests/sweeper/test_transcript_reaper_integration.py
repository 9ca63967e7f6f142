"""The transcript goes with its clone (seed 003, "The transcript directory outlives the clone" and
"The guard"): through the real guard, after its second answer, over real git clones and a real
spot-gate, never a name a different live clone claims, and never when the path came back."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from transcripting import transcript_dir, transcript_stack  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trash_repos import make_clone  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.budget import SweepBudget
from zimmer_sweeper.clones import guard as guard_module
from zimmer_sweeper.disk.removal import remove_atomically

YOUNG = timedelta(minutes=5)  # no age bar: the guard's answer is the authority here


def left(root: Path) -> set[str]:
    return {p.name for p in root.iterdir()}


async def test_the_clone_takes_its_transcript_and_subdirectory_extensions_but_not_a_live_clones(
        settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        # No session names it: the orphan clone sweep's case (an archived one would be the trash
        # pipeline's, which this sweeper runs on its own as soon as the archive is announced).
        orphan = make_clone(tmp_path, stack.clones, "zimmer-main-1785661439-005ceef3")
        # A live clone whose name extends the orphan one's by '-2': its transcript reads like the
        # orphan clone's subdirectory "2" and must survive.
        live = make_clone(tmp_path, stack.clones, "zimmer-main-1785661439-005ceef3-2")
        await stack.clone_session(live)
        mine = {stack.name(orphan), stack.name(orphan, "app"), stack.name(orphan, "services", "api")}
        theirs = {stack.name(live), stack.name(live, "web"), "-rails"}
        for name in mine | theirs:
            transcript_dir(stack.transcripts, name, age=YOUNG)

        result = await stack.sweeper.app.disk.reaper.remove_clone(orphan, job="stale_clone_cleanup")
        assert result.removed and result.transcript == "reaped" and not orphan.exists()
        assert left(stack.transcripts) == theirs


async def test_a_reclone_at_the_same_path_keeps_its_transcript(settings_factory, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A session resumed while the rm -rf ran re-clones where the old clone was: the guard's second
    answer says it is owned again, so the clone is gone but the transcript stays (the file --resume
    reads, which exists nowhere else on the box)."""
    async with transcript_stack(settings_factory, tmp_path) as stack:
        clone = make_clone(tmp_path, stack.clones, "zimmer-main-1785661439-0b0b0b0b")
        # Reported on another host, so this sweeper's trash pipeline leaves the archived clone alone
        # and the removal below is the only one (the guard asks by path, whatever the host).
        sid = await stack.clone_session(clone, archived=True, host="host-z")
        transcript_dir(stack.transcripts, stack.name(clone), age=timedelta(days=3))

        async def remove_then_reclone(path: Path, *, job: str):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
            removal = await remove_atomically(path, job=job)
            await stack.spot.unarchive(sid)
            (tmp_path / "again").mkdir()
            make_clone(tmp_path / "again", stack.clones, path.name)
            return removal

        monkeypatch.setattr(guard_module, "remove_atomically", remove_then_reclone)
        result = await stack.sweeper.app.disk.reaper.remove_clone(clone, job="stale_clone_cleanup")
        assert result.removed and result.transcript == "kept" and result.session_ids == (sid,)
        assert left(stack.transcripts) == {stack.name(clone)}
        # The orphan sweep judges it later: live now (the re-clone is on disk).
        assert stack.app.sweep.refusal() == ""
        report = await stack.app.sweep.run(SweepBudget(300, stack.clock))
        assert report.counts["live"] == 1 and left(stack.transcripts) == {stack.name(clone)}


async def test_the_reaper_keeps_everything_when_what_exists_cannot_be_read(settings_factory,
                                                                          tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        gone = stack.clones / "zimmer-main-1785661439-0d0d0d0d"
        transcript_dir(stack.transcripts, stack.name(gone), age=YOUNG)
        await stack.spot.stop()
        reap = await stack.app.sweep.reap(gone)
        assert reap.kept == (stack.name(gone),) and "failed closed" in reap.reason
        assert left(stack.transcripts) == {stack.name(gone)}
