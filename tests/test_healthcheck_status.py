"""`zimmer status --service NAME`, the Zimmer containers' healthcheck (docker-compose.yml), against a
real service on real (embedded) NATS and PostgreSQL: exit 0 when the service answers its ping ready
with its database answering; 1 when no instance answers, when its database does not, or when NATS
cannot be reached (within its bound); 2 for a name that is no service."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.service import build
from zimmer_common.db import create_engine, with_database

CLI_BOUND = 60.0  # seconds a CLI run may take here (Python's start-up on a loaded CI box included)


async def _status(tmp_path: Path, nats_url: str, *args: str) -> tuple[int, str, float]:
    """Run the real CLI as the container does (a subprocess), while this loop serves the service."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZIMMER_")}
    env.update(ZIMMER_NATS_URL=nats_url, ZIMMER_DATA_DIR=str(tmp_path / "cli-data"))
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "zimmer_cli.main", "status", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), CLI_BOUND)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"`zimmer status {' '.join(args)}` did not finish within {CLI_BOUND:.0f}s", pytrace=False)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), time.monotonic() - started


async def test_status_service_answers_from_the_services_ping(settings_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    settings = settings_factory()
    service = build(settings, alert_settings=AlertSettings(alert_check_seconds=3600, health_check_seconds=3600))
    await service.start()
    try:
        code, out, _ = await _status(tmp_path, settings.nats_url, "--service", "alerts")
        assert code == 0, out
        assert "alerts: healthy" in out and "database ok" in out and settings.instance_id in out, out

        # Another service, not running: nobody answers its ping.
        code, out, _ = await _status(tmp_path, settings.nats_url, "--service", "spot-gate", "--timeout", "1")
        assert code == 1, out
        assert "spot-gate: ping FAILED" in out, out

        # Its database stops answering (the engine now reaches a database that does not exist, on the
        # real server): the ping's SELECT 1 fails, and so does the healthcheck.
        engine = service.engine
        assert engine is not None
        service.engine = create_engine(with_database(settings.database_url, "zimmer_no_such_database"))
        try:
            code, out, _ = await _status(tmp_path, settings.nats_url, "--service", "alerts")
        finally:
            await service.engine.dispose()
            service.engine = engine
        assert code == 1, out
        assert "alerts: UNHEALTHY" in out and "database DOWN" in out, out
    finally:
        await service.stop()


async def test_status_service_without_nats_fails_within_its_bound(tmp_path: Path) -> None:
    code, out, took = await _status(tmp_path, "nats://127.0.0.1:1", "--service", "backlog", "--timeout", "1")
    assert code == 1, out
    assert "backlog: ping FAILED" in out, out
    assert took < 30, f"an unreachable NATS took {took:.0f}s to report"


async def test_status_service_refuses_an_unknown_name(tmp_path: Path) -> None:
    code, out, _ = await _status(tmp_path, "nats://127.0.0.1:1", "--service", "nope")
    assert code == 2, out
    assert "no service 'nope'" in out, out
