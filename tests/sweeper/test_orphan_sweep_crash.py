"""kill -9 of the sweeper mid-removal (issue 16's tests; seed 003 "Both clone sweeps reap deletion
tombstones", #412): the sweeper as its own process (`zimmer serve sweeper`) on a host of its own,
its orphan clone sweep asked for, SIGKILLed the moment the clone's name is free. The clone's path
then holds nothing (never a half-tree), a tombstone holds the rest, and the next run (the restarted
process) reaps it. spot-gate answers in this process, on the same PostgreSQL and NATS."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

from disking import make_dir, running  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sqlalchemy import text
from sweeping import eventually, sweeper_process  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts.subjects import Stream, host_ctx, job_subject
from zimmer_sweeper.disk.domain import is_tombstone

HOST = "host-k"


def orphan_sweeper(database_url: str, nats_url: str, clones: Path, durable: Path,
                   log_path: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    return sweeper_process(database_url, nats_url, log_path, ZIMMER_INSTANCE_ID="kill-test", ZIMMER_HOST=HOST,
                           ZIMMER_SWEEPER_CLONES_DIR=str(clones), ZIMMER_SWEEPER_DURABLE_VOLUME=str(durable),
                           ZIMMER_SWEEPER_FREE_LOW_BYTES="0", ZIMMER_SWEEPER_FREE_HIGH_BYTES="0")


async def test_kill_9_of_the_sweeper_mid_removal_leaves_only_a_tombstone_the_next_run_reaps(
        settings_factory, database_url, nats_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async with running(settings_factory, tmp_path / "host-a") as stack:
        bus = stack.spot.bus
        clones = tmp_path / "host-k" / "clones"
        clones.mkdir(parents=True)
        clone = make_dir(clones / "zimmer-main-1785661439-0e0e0e0e", age=timedelta(days=3), size=1, files=1)
        for d in range(100):  # a tree whose delete takes long enough to land a kill inside it
            sub = clone / f"d{d}"
            sub.mkdir()
            for f in range(100):
                (sub / f"f{f}").write_bytes(b"x")
        os.utime(clone, (time.time() - 3 * 86400, time.time() - 3 * 86400))
        subject = job_subject(host_ctx("sweeper", HOST), "maintenance", "orphan_clone_sweep")
        tick = json.dumps({"job": "orphan_clone_sweep"}).encode()

        async def lane_ready() -> bool:
            try:
                await bus.js.consumer_info(Stream.JOBS.value, f"jobs_{host_ctx('sweeper', HOST)}_maintenance")
                return True
            except Exception:  # noqa: BLE001 - not yet
                return False

        log_path = tmp_path / "sweeper.log"
        with orphan_sweeper(database_url, nats_url, clones, tmp_path / "durable", log_path) as proc:
            await eventually(lane_ready, "the sweeper process's per-host lane", within=60)
            await bus.publish(subject, tick)
            # Watched from a thread, so this loop stays free to serve spot-gate's answers.
            renamed = await asyncio.to_thread(_kill_once_renamed, proc, clone)
            assert renamed, "the sweep never renamed the clone: " + log_path.read_text()[-3000:]
        [tomb] = list(clones.iterdir())
        assert is_tombstone(tomb.name) and tomb.name.startswith(clone.name) and not clone.exists()
        assert any(tomb.rglob("f*")), "the kill came after the delete finished: nothing left to prove"

        with orphan_sweeper(database_url, nats_url, clones, tmp_path / "durable", log_path):
            await eventually(lane_ready, "the restarted sweeper's lane", within=60)
            await bus.publish(subject, tick)

            async def reaped() -> bool:
                return not any(clones.iterdir())

            await eventually(reaped, "the next run reaping the tombstone", within=60)

            async def recorded() -> bool:  # the run's record is written once its removals are done
                return bool(await _runs(stack))

            await eventually(recorded, "the restarted sweeper's run recorded", within=30)
        rows = await _runs(stack)
        assert [r["counts"].get("tombstones_reaped", 0) for r in rows][-1] == 1


def _kill_once_renamed(proc: subprocess.Popen[bytes], clone: Path) -> bool:
    deadline = time.monotonic() + 60
    while clone.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return True


async def _runs(stack) -> list[dict]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with stack.sweeper.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT counts FROM sweeper.disk_runs WHERE host = :h "
                                        "AND job = 'orphan_clone_sweep' ORDER BY id"), {"h": HOST})).all()
    return [{"counts": r.counts} for r in rows]
