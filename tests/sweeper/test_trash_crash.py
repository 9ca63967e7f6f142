"""An interrupted clone cleanup comes back (seed 003): the sweeper, as its own process, is killed with
SIGKILL while its git is mid-preservation of a dirty clone. The attempt was counted before the work,
so the record is still pending and due again after RETRY_WAIT; the next sweeper finishes it: the
clone preserved (a bundle that verifies) and then deleted, on the second attempt."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from disking import HOST, Spot  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sweeping import eventually, sweeper_process  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trash_repos import alive, git, make_clone, make_dirty, unwedge, wedge  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from trashing import CLEANUP, Roots  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.bus import Bus
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.subjects import Stream
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.service import build as build_sweeper
from zimmer_sweeper.trash.config import TrashSettings
from zimmer_sweeper.trash.git_artifacts import BUNDLE

pytestmark = pytest.mark.timeout(180)


def trash_sweeper(database_url: str, nats_url: str, roots: Roots,
                  log_path: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    return sweeper_process(database_url, nats_url, log_path, ZIMMER_INSTANCE_ID="trash-crash", ZIMMER_HOST=HOST,
                           ZIMMER_SWEEPER_CLONES_DIR=str(roots.clones), ZIMMER_SWEEPER_SCRATCH_DIR=str(roots.scratch),
                           ZIMMER_SWEEPER_ATTACHMENTS_DIR=str(roots.attachments),
                           ZIMMER_SWEEPER_ARTIFACTS_DIR=str(roots.artifacts),
                           ZIMMER_SWEEPER_DURABLE_VOLUME=str(roots.base.parent / "durable-elsewhere"),
                           ZIMMER_TRASH_GIT_TIMEOUT_SECONDS="60")


async def test_a_cleanup_killed_mid_preservation_resumes_and_finishes_on_its_next_attempt(
        settings_factory, database_url, nats_url, tmp_path: Path, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    roots = Roots(tmp_path)
    disk = roots.settings()
    spot_clock = FrozenClock(datetime.now(UTC))
    spot = build_spot(settings_factory(), clock=spot_clock)
    await spot.start()
    bus = await Bus.connect([nats_url], service="probe", instance_id="p", rpc_timeout=5)
    peer = Spot(spot, bus, spot_clock)
    try:
        clone = make_clone(tmp_path, roots.clones, "zimmer-main-1785661439-c4a50001")
        make_dirty(clone)
        sid = await peer.session(clone)
        notes = wedge(clone, tmp_path)  # git will sit in the dirty check until killed
        with trash_sweeper(database_url, nats_url, roots, tmp_path / "sweeper.log") as proc:
            async def consuming() -> bool:
                try:
                    await bus.js.consumer_info(Stream.EVENTS.value, f"sweeper_{HOST}_trash")
                    return True
                except Exception:  # noqa: BLE001 - not yet
                    return False

            await eventually(consuming, "the sweeper process to consume archives", within=60)
            await bus.request(c.ARCHIVE, c.SessionRef(session_id=sid))

            async def mid_pipeline() -> bool:
                return (notes / "calls").exists()

            await eventually(mid_pipeline, "the cleanup to reach git", within=60)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        # The dead sweeper's git lives on in its own process group; it is this test's to end.
        helper = int((notes / "child.pid").read_text())  # the wedged hook's child, in git's group
        os.killpg(os.getpgid(helper), signal.SIGKILL)
        [rec] = await sql("SELECT state, attempts, next_attempt_at FROM sweeper.trash_records WHERE session_id = $1",
                          sid)
        assert (rec["state"], rec["attempts"]) == ("pending", 1)  # the cut-short attempt was counted
        assert clone.exists() and not (roots.artifacts / str(sid) / BUNDLE).exists()
        unwedge(clone)

        clock = FrozenClock(rec["next_attempt_at"] + timedelta(seconds=1))  # RETRY_WAIT later
        sweeper = build_sweeper(settings_factory(host=HOST), clock=clock, disk_settings=disk,
                                trash_settings=TrashSettings(git_timeout_seconds=30))
        await sweeper.start()
        try:
            await sweeper.enqueue(CLEANUP)

            async def finished() -> bool:
                rows = await sql("SELECT state FROM sweeper.trash_records WHERE session_id = $1", sid)
                return rows[0]["state"] == "trashed"

            await eventually(finished, "the resumed cleanup to finish", within=60)
        finally:
            await sweeper.stop()
        [rec] = await sql("SELECT attempts, finding, bundle_preserved, patch_preserved FROM sweeper.trash_records "
                          "WHERE session_id = $1", sid)
        assert (rec["attempts"], rec["finding"], rec["bundle_preserved"], rec["patch_preserved"]) == (
            2, "dirty", True, True)
        assert not clone.exists() and not alive(helper)
        git(roots.base, "init", "-q", "verifier")
        git(roots.base / "verifier", "bundle", "verify", "-q", str(roots.artifacts / str(sid) / BUNDLE))
    finally:
        await bus.close()
        await spot.stop()
