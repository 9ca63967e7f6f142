"""Docker Compose teardown before a clone goes (issue 26 #11; seed 003 DockerComposeCleanupService:
`docker compose down -v --remove-orphans`, COMPOSE_DOWN_TIMEOUT 120 s). Run only where a compose
file exists and `docker` is present, after the guard's first answer and before the bytes go; a
failure or a timeout pages and the clone is removed all the same; a session that took the clone
back while the teardown ran keeps it. Against a real spot-gate and sweeper on real PostgreSQL and
NATS, over real directories; `docker` is a script on PATH that records how it was called (this
machine has no Docker engine)."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import pytest
from disking import make_dir, running  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

OLD = timedelta(days=5)
FAKE_DOCKER = """#!/bin/sh
here="$(dirname "$0")"
{ printf '%s|%s|' "$PWD" "$*"; [ -e "$PWD/f0" ] && echo present || echo gone; } >> "$here/calls"
touch "$here/started"
case "$(cat "$here/mode" 2>/dev/null)" in
  fail) echo "Error response from daemon: login failed, password=hunter2" >&2; exit 1 ;;
  slow) sleep 2 ;;
  hang) sleep 60 ;;
esac
exit 0
"""


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `docker` first on PATH; write `mode` (fail, slow, hang) beside it to change what it does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(FAKE_DOCKER)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def calls(docker: Path) -> list[list[str]]:
    log = docker / "calls"
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


async def page_titles(sql) -> list[str]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    rows = await sql("SELECT payload::jsonb->'data'->>'title' AS title FROM sweeper.outbox "
                     "WHERE event_type = 'page' ORDER BY id")
    return [r["title"] for r in rows]


def teardowns(stack, job: str, outcome: str) -> float:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return stack.disk.metrics.compose_teardowns.labels(job, outcome)._value.get()  # type: ignore[no-any-return]  # prometheus-client's sample value is untyped


@pytest.mark.parametrize("name", ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"])
async def test_a_clone_with_a_compose_file_is_torn_down_before_its_bytes_go(
        settings_factory, tmp_path: Path, sql, docker: Path, name: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-c0c0c0c0", age=OLD)
        (clone / name).write_text("services: {}\n")
        await stack.spot.session(clone, archived=True)
        result = await stack.disk.reaper.remove_clone(clone, job="stale_clone_cleanup")
        assert result.removed and not clone.exists()
        assert calls(docker) == [[str(clone), f"compose -f {name} down -v --remove-orphans", "present"]]
        assert teardowns(stack, "stale_clone_cleanup", "down") == 1
        assert await page_titles(sql) == []


async def test_no_compose_file_no_docker_call(settings_factory, tmp_path: Path, sql, docker: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-d0d0d0d0", age=OLD)
        (clone / "compose.yaml").mkdir()  # a directory by that name is not a compose file
        await stack.spot.session(clone, archived=True)
        assert (await stack.disk.reaper.remove_clone(clone, job="stale_clone_cleanup")).removed
        assert calls(docker) == []


async def test_no_docker_binary_means_no_teardown_and_the_clone_still_goes(
        settings_factory, tmp_path: Path, sql, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-e0e0e0e0", age=OLD)
        (clone / "compose.yaml").write_text("services: {}\n")
        await stack.spot.session(clone, archived=True)
        assert (await stack.disk.reaper.remove_clone(clone, job="stale_clone_cleanup")).removed
        assert await page_titles(sql) == []


async def test_a_failed_teardown_pages_with_what_docker_said_and_the_clone_goes_anyway(
        settings_factory, tmp_path: Path, sql, docker: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    (docker / "mode").write_text("fail")
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-f0f0f0f0", age=OLD)
        (clone / "compose.yaml").write_text("services: {}\n")
        await stack.spot.session(clone, archived=True)
        result = await stack.disk.reaper.remove_clone(clone, job="empty_trash")
        assert result.removed and not clone.exists()
        assert await page_titles(sql) == ["Compose teardown failed"]
        [page] = await sql("SELECT payload::jsonb->'data' AS page FROM sweeper.outbox WHERE event_type = 'page'")
        assert "exited 1" in page["page"] and "login failed" in page["page"]
        assert "hunter2" not in page["page"]  # docker's words go through the snippet builder
        assert teardowns(stack, "empty_trash", "failed") == 1


async def test_a_teardown_that_hangs_is_killed_at_its_bound_and_the_clone_goes(
        settings_factory, tmp_path: Path, sql, docker: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    (docker / "mode").write_text("hang")
    async with running(settings_factory, tmp_path) as stack:
        stack.disk.reaper.compose_timeout = 0.5  # 120 s in the service
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-a1a1a1a1", age=OLD)
        (clone / "docker-compose.yml").write_text("services: {}\n")
        await stack.spot.session(clone, archived=True)
        result = await asyncio.wait_for(stack.disk.reaper.remove_clone(clone, job="orphan_sweep"), timeout=30)
        assert result.removed and not clone.exists()
        assert teardowns(stack, "orphan_sweep", "timed_out") == 1
        assert await page_titles(sql) == ["Compose teardown failed"]


async def test_a_live_sessions_clone_is_never_torn_down(settings_factory, tmp_path: Path, sql, docker: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-b1b1b1b1", age=OLD)
        (clone / "compose.yaml").write_text("services: {}\n")
        await stack.spot.session(clone)  # waiting: live
        result = await stack.disk.reaper.remove_clone(clone, job="stale_clone_cleanup")
        assert result.outcome == "refused" and clone.exists()
        assert calls(docker) == []


async def test_a_session_that_takes_the_clone_back_during_the_teardown_keeps_it(
        settings_factory, tmp_path: Path, sql, docker: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The teardown can take minutes: the guard asks again before the rename, so the gap between
    its answer and the bytes going stays as small as it was without one."""
    (docker / "mode").write_text("slow")
    async with running(settings_factory, tmp_path) as stack:
        clone = make_dir(stack.layout.clones / "zimmer-main-1785661439-c1c1c1c1", age=OLD)
        (clone / "compose.yaml").write_text("services: {}\n")
        sid = await stack.spot.session(clone, archived=True)
        removing = asyncio.create_task(stack.disk.reaper.remove_clone(clone, job="stale_clone_cleanup"))
        for _ in range(200):
            if (docker / "started").exists():
                break
            await asyncio.sleep(0.02)
        await stack.spot.unarchive(sid)  # inside the teardown
        result = await removing
        assert result.outcome == "refused" and result.session_ids == (sid,)
        assert (clone / "f0").exists()
        assert await page_titles(sql) == ["Clone reap refused"]
