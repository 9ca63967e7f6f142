"""The one-time WORK_BACKLOG.json import (seed 000, "The import"), against real PostgreSQL and a
real local HTTP server standing in for GitHub's contents API."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from zimmer_backlog.importer import (
    FileSource,
    GithubSource,
    ImportSourceUnavailable,
    NoSource,
    import_backlog,
    import_once_at_start,
    resolve_source,
)
from zimmer_cli.embedded import free_port
from zimmer_common.db import create_engine
from zimmer_common.settings import Environment, Settings
from zimmer_sim.fake_github import FakeGithub

TOKEN = "ghp-test-token"
ITEMS: list[dict[str, Any]] = [
    {"id": "a1", "key": "zimmer#10", "issue_url": "https://github.com/acme/zimmer/issues/10", "repo": "acme/zimmer",
     "surface": "backend", "title": "Ten", "kind": "bug", "scope_direction": "narrow", "estimated_cost": "small",
     "gate_verdict": "cleared", "decided_at": "2026-08-20T10:00:00Z", "added_at": "2026-08-20T10:01:00Z",
     "added_by": "gate", "precedence": 7777, "pinned": True, "prompt": "ignored for issue items",
     "ratings": {"value": 3}},
    {"id": "a2", "key": "zimmer#11", "issue_url": "https://github.com/acme/zimmer/issues/11", "title": "Eleven",
     "estimated_cost": "large", "precedence": 4321},  # outside its band on purpose: no re-rank
    {"id": "a3", "key": "zimmer#12", "issue_url": "https://github.com/acme/zimmer/issues/12", "title": "Twelve",
     "estimated_cost": "medium", "precedence": 2990, "status": "started"},
    {"id": "a4", "key": "manual-tidy-docs", "issue_url": None, "title": "Tidy the docs", "estimated_cost": "small",
     "precedence": 5990, "prompt": "Tidy the docs folder", "notes": "from a human"},
    {"id": "a5", "key": "zimmer#13", "issue_url": "https://github.com/acme/zimmer/issues/13", "title": "Thirteen",
     "estimated_cost": "small", "precedence": 5980, "status": "removed", "removal_reason": "issue_closed"},
]


def write(path: Path, items: Any) -> FileSource:
    path.write_text(json.dumps(items))
    return FileSource(path)


async def rows(engine) -> dict[str, Any]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with engine.connect() as conn:
        return {r.import_id: r for r in await conn.execute(text(
            "SELECT * FROM backlog.work_backlog_items WHERE import_id IS NOT NULL ORDER BY id"))}


async def runs(engine) -> list[Any]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with engine.connect() as conn:
        return list(await conn.execute(text("SELECT * FROM backlog.import_runs ORDER BY id")))


async def test_imports_from_a_file_verbatim(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    source = write(tmp_path / "WORK_BACKLOG.json", {"items": ITEMS, "version": 3})
    before = source.path.read_bytes(), source.path.stat().st_mtime_ns
    seen: list[tuple[int, int]] = []
    report = await import_backlog(engine, source=source, env=Environment.TEST,
                                  progress=lambda d, t: seen.append((d, t)))
    assert (report.inserted, report.skipped, report.error, report.total) == (5, [], None, 5)
    assert seen[0] == (0, 5) and seen[-1] == (5, 5)
    got = await rows(engine)
    assert {k: (r.precedence, r.pinned, r.status) for k, r in got.items()} == {
        "a1": (7777, True, "queued"), "a2": (4321, False, "queued"), "a3": (2990, False, "started"),
        "a4": (5990, False, "queued"), "a5": (5980, False, "removed")}
    assert all(r.added_via == "import" for r in got.values())
    a1 = got["a1"]
    assert (a1.key, a1.repo, a1.surface, a1.kind, a1.scope_direction, a1.gate_verdict, a1.added_by) == (
        "zimmer#10", "acme/zimmer", "backend", "bug", "narrow", "cleared", "gate")
    assert a1.added_at.isoformat() == "2026-08-20T10:01:00+00:00"
    assert a1.payload == {"prompt": "ignored for issue items", "ratings": {"value": 3}}
    assert got["a4"].issue_url is None and got["a4"].payload == {"prompt": "Tidy the docs folder",
                                                                  "notes": "from a human"}
    assert got["a5"].removal_reason == "issue_closed"
    assert (source.path.read_bytes(), source.path.stat().st_mtime_ns) == before  # the source is never touched
    [run] = await runs(engine)
    assert (run.source, run.inserted, run.skipped, run.error) == (f"file:{source.path}", 5, 0, None)
    assert run.finished_at is not None and run.finished_at >= run.started_at


async def test_a_second_pass_writes_nothing(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    source = write(tmp_path / "backlog.json", ITEMS)  # the bare-list shape
    await import_backlog(engine, source=source, env=Environment.TEST)
    async with engine.begin() as conn:  # a row moves on after the import: the import must not undo it
        await conn.execute(text("UPDATE backlog.work_backlog_items SET status = 'started' WHERE import_id = 'a2'"))
    first = await rows(engine)
    again = await import_backlog(engine, source=source, env=Environment.TEST)
    assert again.inserted == 0 and [s.reason for s in again.skipped] == ["already_imported"] * 5
    assert await rows(engine) == first
    assert [(r.inserted, r.skipped, r.error) for r in await runs(engine)] == [(5, 0, None), (0, 5, None)]


async def test_invalid_items_are_reported_and_skipped(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    bad = [
        {"id": "b1", "key": "zimmer#20", "issue_url": None, "estimated_cost": "huge", "precedence": 10},
        {"id": "b2", "key": "zimmer#21", "estimated_cost": "small", "precedence": "high"},
        {"key": "zimmer#22", "estimated_cost": "small", "precedence": 1},
        "not an object",
        {"id": "b5", "key": "zimmer#23", "estimated_cost": "small", "precedence": 1, "status": "archived"},
        {"id": "a1", "key": "manual-again", "estimated_cost": "small", "precedence": 1, "prompt": "x"},  # same id again
        {"id": "b7", "key": "manual-nul", "estimated_cost": "small", "precedence": 1, "title": "nul\u0000",
         "prompt": "x"},
    ]
    report = await import_backlog(engine, source=write(tmp_path / "b.json", ITEMS[:1] + bad), env=Environment.TEST)
    assert report.inserted == 1 and report.error is None
    assert [(s.id, s.reason) for s in report.skipped] == [
        ("b1", "invalid"), ("b2", "invalid"), ("#4", "invalid"), ("#5", "invalid"), ("b5", "invalid"),
        ("a1", "duplicate_in_source"), ("b7", "rejected")]
    assert "0x00" in report.skipped[-1].detail
    assert "estimated_cost" in report.skipped[0].detail and "precedence" in report.skipped[1].detail
    assert "id" in report.skipped[2].detail
    assert list(await rows(engine)) == ["a1"]
    [run] = await runs(engine)
    assert (run.inserted, run.skipped, run.error) == (1, 7, None)


async def test_a_key_already_queued_is_skipped_not_an_error(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, "
                                "precedence) VALUES ('zimmer#10', 'https://github.com/acme/zimmer/issues/10', "
                                "'small', 'rest', 6000)"))
    items = [ITEMS[0], {**ITEMS[0], "id": "a1-history", "status": "started"},
             {**ITEMS[1], "id": "dup", "key": "zimmer#11"}, ITEMS[1]]
    report = await import_backlog(engine, source=write(tmp_path / "k.json", items), env=Environment.TEST)
    assert report.inserted == 2  # the started history row, and the first zimmer#11
    assert [(s.id, s.reason) for s in report.skipped] == [("a1", "open_row_for_key"), ("a2", "open_row_for_key")]
    assert sorted(await rows(engine)) == ["a1-history", "dup"]


async def test_github_contents_api_with_the_token(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    raw = json.dumps({"items": ITEMS[:2]}).encode()
    with FakeGithub(TOKEN, {("acme/zimmer-private", "ops/WORK_BACKLOG.json", "frozen"): raw}) as gh:
        for var, value in {"ZIMMER_GITHUB_TOKEN": TOKEN, "ZIMMER_GITHUB_API_URL": gh.url,
                           "WORK_BACKLOG_GITHUB_REPO": "acme/zimmer-private",
                           "WORK_BACKLOG_GITHUB_PATH": "ops/WORK_BACKLOG.json",
                           "WORK_BACKLOG_GITHUB_REF": "frozen"}.items():
            monkeypatch.setenv(var, value)
        monkeypatch.delenv("WORK_BACKLOG_SOURCE_PATH", raising=False)
        source = resolve_source(None)
        assert isinstance(source, GithubSource) and TOKEN not in repr(source)
        report = await import_backlog(engine, source=source, env=Environment.PRODUCTION)
        assert report.inserted == 2 and report.source == "github:acme/zimmer-private/ops/WORK_BACKLOG.json@frozen"
        [req] = gh.requests
        assert (req.path, req.ref, req.authorization, req.accept) == (
            "/repos/acme/zimmer-private/contents/ops/WORK_BACKLOG.json", "frozen", f"Bearer {TOKEN}",
            "application/vnd.github.raw+json")

        wrong = GithubSource(repo="acme/zimmer-private", token="wrong", api_url=gh.url,
                             path="ops/WORK_BACKLOG.json", ref="frozen")
        failed = await import_backlog(engine, source=wrong, env=Environment.STAGING)
        assert failed.source_unavailable and "401" in (failed.error or "")
        with pytest.raises(ImportSourceUnavailable, match="401"):
            await import_backlog(engine, source=wrong, env=Environment.PRODUCTION)
    assert [(r.inserted, r.error is None) for r in await runs(engine)] == [(2, True), (0, False), (0, False)]
    assert all(TOKEN not in (r.error or "") and "wrong" not in (r.error or "") for r in await runs(engine))


def test_source_resolution_order(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    gh = GithubSource(repo="acme/zimmer-private")
    monkeypatch.chdir(tmp_path)
    assert resolve_source("a.json", env_var="b.json", github=gh) == FileSource(tmp_path / "a.json")
    assert resolve_source(None, env_var="b.json", github=gh) == FileSource(tmp_path / "b.json")
    assert resolve_source(None, env_var="", github=gh) is gh
    assert resolve_source(None, env_var=None, github=None) == NoSource()
    for var in ("WORK_BACKLOG_GITHUB_PATH", "WORK_BACKLOG_GITHUB_REF", "ZIMMER_GITHUB_API_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WORK_BACKLOG_GITHUB_REPO", "acme/zimmer-private")
    monkeypatch.setenv("ZIMMER_GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("WORK_BACKLOG_SOURCE_PATH", str(tmp_path / "env.json"))
    assert resolve_source(tmp_path / "arg.json") == FileSource(tmp_path / "arg.json")
    assert resolve_source(None) == FileSource(tmp_path / "env.json")
    monkeypatch.delenv("WORK_BACKLOG_SOURCE_PATH")
    assert resolve_source(None) == GithubSource(repo="acme/zimmer-private", token=TOKEN,
                                                api_url="https://api.github.com", path="WORK_BACKLOG.json",
                                                ref="main")
    monkeypatch.delenv("WORK_BACKLOG_GITHUB_REPO")
    assert resolve_source(None) == NoSource()


@pytest.mark.parametrize("source", [
    GithubSource(repo="acme/zimmer-private", token=TOKEN, api_url=f"http://127.0.0.1:{free_port()}"),
    FileSource(Path("/nonexistent/WORK_BACKLOG.json")),
    NoSource(),
], ids=["unreachable-github", "missing-file", "nothing-configured"])
async def test_an_unavailable_source_outside_production_is_recorded(engine, source) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    report = await import_backlog(engine, source=source, env=Environment.DEVELOPMENT)
    assert report.source_unavailable and report.inserted == 0 and report.error
    [run] = await runs(engine)
    assert run.error == report.error and run.finished_at is not None and run.source == source.describe()
    assert await rows(engine) == {}


async def test_an_unavailable_source_in_production_raises(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    (tmp_path / "garbled.json").write_text("{not json")
    for source in (FileSource(tmp_path / "missing.json"), FileSource(tmp_path / "garbled.json")):
        with pytest.raises(ImportSourceUnavailable):
            await import_backlog(engine, source=source, env=Environment.PRODUCTION)
    recorded = await runs(engine)
    assert len(recorded) == 2 and all(r.error and r.finished_at for r in recorded)
    assert "unreadable: not JSON" in recorded[1].error


async def test_the_start_up_task_runs_until_one_run_succeeds(engine, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.delenv("WORK_BACKLOG_GITHUB_REPO", raising=False)
    monkeypatch.setenv("WORK_BACKLOG_SOURCE_PATH", str(tmp_path / "later.json"))
    settings = Settings(env=Environment.TEST)
    failed = await import_once_at_start(engine, settings)
    assert failed is not None and failed.source_unavailable  # not there yet: recorded, and tried again next start
    write(tmp_path / "later.json", ITEMS)
    both = await asyncio.gather(import_once_at_start(engine, settings), import_once_at_start(engine, settings))
    assert sorted(r.inserted if r else -1 for r in both) == [-1, 5]  # replicas together: one imports
    assert await import_once_at_start(engine, settings) is None  # restarts read nothing
    assert [(r.inserted, r.error is None) for r in await runs(engine)] == [(0, False), (5, True)]
    with pytest.raises(ImportSourceUnavailable):  # production start-up with no source fails loudly
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE backlog.import_runs SET error = 'x'"))
        monkeypatch.setenv("WORK_BACKLOG_SOURCE_PATH", str(tmp_path / "gone.json"))
        await import_once_at_start(engine, Settings(env=Environment.PRODUCTION, api_key="k-real-1",
                                                    operator_token="t-real-1"))


def _cli(args: list[str], database_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ZIMMER_", "WORK_BACKLOG_"))}
    return subprocess.run([sys.executable, "-m", "zimmer_cli", *args], capture_output=True, text=True, timeout=120,
                          env={**clean, "ZIMMER_DATABASE_URL": database_url, "ZIMMER_ENV": "test", **env})


async def test_cli_imports_end_to_end(database_url: str, tmp_path: Path) -> None:
    path = tmp_path / "WORK_BACKLOG.json"
    path.write_text(json.dumps({"items": ITEMS + [{"id": "bad", "key": "k", "precedence": 1}]}))
    first = await asyncio.to_thread(_cli, ["backlog", "import", str(path)], database_url)
    assert first.returncode == 0, first.stderr
    assert "inserted  5" in first.stdout and "skipped   1" in first.stdout and "bad: invalid" in first.stdout
    assert f"file:{path}" in first.stdout
    again = await asyncio.to_thread(_cli, ["backlog", "import"], database_url, WORK_BACKLOG_SOURCE_PATH=str(path))
    assert again.returncode == 0 and "inserted  0" in again.stdout and "(5 already_imported, 1 invalid)" in again.stdout

    missing = str(tmp_path / "missing.json")
    soft = await asyncio.to_thread(_cli, ["backlog", "import", missing], database_url)
    assert soft.returncode == 0 and "nothing imported" in soft.stdout
    loud = await asyncio.to_thread(_cli, ["backlog", "import", missing], database_url, ZIMMER_ENV="production",
                                   ZIMMER_API_KEY="k-real-1", ZIMMER_OPERATOR_TOKEN="t-real-1")
    assert loud.returncode == 1 and "unavailable" in loud.stderr
    engine = create_engine(database_url)
    try:
        assert [(r.inserted, r.skipped, r.error is None) for r in await runs(engine)] == [
            (5, 1, True), (0, 6, True), (0, 0, False), (0, 0, False)]
    finally:
        await engine.dispose()


async def test_appends_do_not_wait_for_the_whole_import(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #11: the import held the ranking lock across every item, so an append waited for
    all of it. It now releases the lock between batches: an append made while a large import
    runs is decided before the import ends (ordering, not timing: the import is still going)."""
    from types import SimpleNamespace

    from zimmer_backlog.handlers.backlog import Backlog
    from zimmer_backlog.importer import IMPORT_BATCH
    from zimmer_common.contracts.backlog import AppendItem
    from zimmer_common.unit_of_work import UnitsOfWork

    total = IMPORT_BATCH * 15
    source = write(tmp_path / "big.json", [{"id": f"i{n}", "key": f"zimmer#{n}", "estimated_cost": "large",
                                            "issue_url": f"https://github.com/acme/zimmer/issues/{n}",
                                            "precedence": 1000 - n % 400, "status": "removed"}
                                           for n in range(1, total + 1)])
    running = asyncio.create_task(import_backlog(engine, source=source, env=Environment.TEST))

    async def imported() -> int:
        async with engine.connect() as conn:
            return int((await conn.execute(text("SELECT count(*) FROM backlog.work_backlog_items"))).scalar_one())

    while await imported() < IMPORT_BATCH:  # the first batch has committed
        await asyncio.sleep(0.01)
    appended = await Backlog(UnitsOfWork(SimpleNamespace(engine=engine, relay=None), "backlog")).append(AppendItem(
        key="zimmer#99999", issue_url="https://github.com/acme/zimmer/issues/99999", estimated_cost="small"))
    assert appended.item.key == "zimmer#99999"
    assert not running.done() and await imported() < total + 1
    report = await running
    assert report.inserted == total


async def test_the_import_holds_queued_items_to_todays_key_rules(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 27 #1, #5, #6: a queued item may start a session, so the import holds it to the rules
    an append meets (one spelling per issue, manual-<slug> and a prompt without an issue); history
    rows keep the spelling of their day."""
    entries = [
        {"id": "k1", "key": "ACME/Zimmer#30", "issue_url": "https://github.com/acme/zimmer/issues/30",
         "estimated_cost": "small", "precedence": 5000},
        {"id": "k2", "key": "zimmer#30", "issue_url": "https://github.com/acme/zimmer/issues/30",
         "estimated_cost": "small", "precedence": 5001},  # the same issue again: one open row
        {"id": "k3", "key": "zimmer#31", "estimated_cost": "small", "precedence": 1, "prompt": "x"},
        {"id": "k4", "key": "manual-no-prompt", "estimated_cost": "small", "precedence": 1},
        {"id": "k5", "key": "zimmer#32", "estimated_cost": "small", "precedence": 1, "status": "started"},
    ]
    report = await import_backlog(engine, source=write(tmp_path / "k.json", entries), env=Environment.TEST)
    assert [(s.id, s.reason) for s in report.skipped] == [
        ("k2", "open_row_for_key"), ("k3", "invalid"), ("k4", "invalid")]
    assert "key" in report.skipped[1].detail and "payload.prompt" in report.skipped[2].detail
    imported = await rows(engine)
    assert (imported["k1"].key, imported["k5"].key) == ("zimmer#30", "zimmer#32")


async def test_no_source_configured_is_nothing_to_import_not_an_error(engine, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # The production compose file sets neither variable: each start logged two ERROR lines and
    # paged "Work backlog import failed" for a deployment that simply keeps its backlog in Zimmer.
    monkeypatch.delenv("WORK_BACKLOG_SOURCE_PATH", raising=False)
    monkeypatch.delenv("WORK_BACKLOG_GITHUB_REPO", raising=False)
    with caplog.at_level(logging.INFO, logger="zimmer.backlog.import"):
        assert await import_once_at_start(engine, Settings(env=Environment.PRODUCTION, api_key="k-real-1",
                                                           operator_token="t-real-1")) is None
    assert await runs(engine) == []
    assert [r.levelname for r in caplog.records] == ["INFO"] and "nothing to import" in caplog.records[0].message
