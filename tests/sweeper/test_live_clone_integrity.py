"""LiveCloneIntegrityJob (seed 003, "Noticing when a live session has lost its working tree"), over
real git clones, against a real spot-gate on real PostgreSQL and NATS, with a frozen clock."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from transcripting import transcript_stack  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trash_repos import add_scaffolding, make_clone  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts.fields import LONG_TEXT_MAX
from zimmer_sweeper.transcripts.integrity import JOB, TITLE, Inspection, judge, page_message


async def pages(sql) -> list[dict]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    rows = await sql("SELECT payload FROM sweeper.outbox WHERE event_type = 'page' ORDER BY id")
    return [json.loads(r["payload"])["data"] for r in rows]


def strip_to_scaffolding(clone: Path) -> None:
    """The #808 state: everything gone but what Zimmer itself writes into a clone."""
    add_scaffolding(clone)
    for entry in clone.iterdir():
        if entry.name not in (".mcp.json", ".claude", "claude-stderr.log"):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


async def test_one_error_line_names_each_loss_and_what_is_left_then_a_healthy_hour_resolves_it(
        settings_factory, tmp_path: Path, sql, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with transcript_stack(settings_factory, tmp_path) as stack:
        clones = stack.clones
        healthy = make_clone(tmp_path, clones, "zimmer-main-1-healthy")
        (healthy / "app").mkdir()
        await stack.clone_session(healthy, subdir="app")
        stripped = make_clone(tmp_path, clones, "zimmer-main-2-stripped")
        strip_to_scaffolding(stripped)
        s_stripped = await stack.clone_session(stripped)
        no_subdir = make_clone(tmp_path, clones, "zimmer-main-3-nosubdir")
        s_no_subdir = await stack.clone_session(no_subdir, subdir="web")
        await stack.clone_session(clones / "zimmer-main-4-missing", make=False)  # between archive and re-clone
        fork = clones / "zimmer-main-5-fork"
        (fork / "app").mkdir(parents=True)
        add_scaffolding(fork)
        await stack.clone_session(fork, subdir="app", scaffolded=True)  # no git tree, on purpose
        fork_lost = clones / "zimmer-main-6-forklost"
        fork_lost.mkdir()
        add_scaffolding(fork_lost)
        s_fork_lost = await stack.clone_session(fork_lost, subdir="app", scaffolded=True)
        elsewhere = make_clone(tmp_path, clones, "zimmer-main-7-otherhost")
        strip_to_scaffolding(elsewhere)
        await stack.clone_session(elsewhere, host="host-b")  # its own host's sweeper checks it
        # Not live: its missing subdirectory is nobody's concern (a clean clone, which the trash
        # pipeline this sweeper runs may clean up meanwhile, quietly).
        archived = make_clone(tmp_path, clones, "zimmer-main-8-archived")
        await stack.clone_session(archived, subdir="web", archived=True)

        with caplog.at_level(logging.INFO):
            report = await stack.app.integrity.run()
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and errors[0].getMessage() == TITLE
        assert (report.examined, report.missing_root) == (6, 1)
        assert [i.session_id for i in report.lost] == [s_stripped, s_no_subdir, s_fork_lost]
        [page] = await pages(sql)
        assert page["title"] == TITLE and page["condition_key"] == f"sweeper:{JOB}:host-a" and page["still_true"]
        message = page["message"]
        assert f"session {s_stripped} at {stripped}: git tree gone; holding .claude, .mcp.json, claude-stderr.log" \
            in message
        assert f"session {s_no_subdir} at {no_subdir}: agent subdirectory web/ gone; holding .git, README.md" in message
        # A scaffolded fork is exempt from the git check only.
        assert f"session {s_fork_lost} at {fork_lost}: agent subdirectory app/ gone; holding .claude" in message
        assert "missing" not in message and "otherhost" not in message and "archived" not in message
        [row] = await sql("SELECT outcome, counts FROM sweeper.disk_runs WHERE job = $1", JOB)
        assert json.loads(row["counts"]) == {"examined": 6, "lost": 3, "missing_root": 1, "lost_git_tree": 1,
                                             "lost_subdirectory": 2}

        await stack.app.integrity.run()  # still lost: the same condition, still true
        assert [p["still_true"] for p in await pages(sql)] == [True, True]

        shutil.rmtree(stripped)
        (tmp_path / "again").mkdir()
        make_clone(tmp_path / "again", clones, stripped.name)
        (no_subdir / "web").mkdir()
        (fork_lost / "app").mkdir()
        caplog.clear()
        with caplog.at_level(logging.INFO):
            healthy_report = await stack.app.integrity.run()
        assert healthy_report.lost == [] and not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert any(r.getMessage() == "live clone integrity" and r.levelno == logging.INFO for r in caplog.records)
        resolved = (await pages(sql))[-1]
        assert (resolved["condition_key"], resolved["still_true"]) == (f"sweeper:{JOB}:host-a", False)
        await stack.app.integrity.run()  # a second healthy hour says nothing more
        assert len(await pages(sql)) == 3


def test_the_rules() -> None:
    assert judge(exists=False, has_git=False, scaffolded=False, subdirectory="app", has_subdirectory=False) == (
        "missing_root", ())
    assert judge(exists=True, has_git=False, scaffolded=True, subdirectory=None, has_subdirectory=False) == (
        "intact", ())
    assert judge(exists=True, has_git=False, scaffolded=False, subdirectory="a/b/", has_subdirectory=False) == (
        "lost", ("git tree", "agent subdirectory a/b/"))


def test_a_page_names_every_session_even_when_their_sentences_do_not_fit() -> None:
    lost = [Inspection(i, f"/c/{'x' * 80}-{i}", "lost", ("git tree",), (".mcp.json",)) for i in range(1, 60)]
    message = page_message("host-a", lost)
    assert len(message) <= LONG_TEXT_MAX and message.startswith("59 live session(s) on host-a")
    assert "session 1 at" in message and message.endswith(", 59") and "more: sessions" in message
