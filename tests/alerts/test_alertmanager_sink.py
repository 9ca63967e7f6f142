"""The Alertmanager sink against a real Alertmanager (Debian's prometheus-alertmanager, started on a
free port): conditions page through `POST /api/v2/alerts` with labels from the fingerprint; the
Alertmanager receives and groups them; a resolved condition resolves (endsAt)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from alerting import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.service import build
from zimmer_cli.embedded import free_port
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts.alerts import LIST_ALERTS, RESOLVE_CONDITION, AlertQuery, ResolveCondition
from zimmer_common.settings import Environment

CONFIG = """
route:
  receiver: nobody
  group_by: [alertname]
  group_wait: 1s
receivers:
  - name: nobody
"""


def alertmanager_binary() -> str:
    found = os.environ.get("ZIMMER_ALERTMANAGER") or shutil.which("prometheus-alertmanager") or \
        shutil.which("alertmanager")
    if not found:
        pytest.fail("no Alertmanager on PATH: install Debian's prometheus-alertmanager (.ci/run and dev.py test do) "
                    "or set ZIMMER_ALERTMANAGER", pytrace=False)
    return found


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "am.yml").write_text(CONFIG)
    port = free_port()
    proc = subprocess.Popen([alertmanager_binary(), f"--config.file={tmp_path / 'am.yml'}",
                             f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"alertmanager exited with {proc.returncode}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


async def test_alertmanager_receives_groups_and_resolves(settings_factory, alertmanager: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # A real Alertmanager judges endsAt against its own wall clock, so this test's clock follows the real
    # one: a fixed date sends pages whose endsAt (now + 4 h repeat + group interval) is already past on any
    # later afternoon, and Alertmanager takes them as resolved on arrival. It starts a few minutes behind so
    # that a resolution's endsAt (the frozen now, after the test's advances) is past when it arrives.
    clock = FrozenClock(datetime.now(UTC) - timedelta(minutes=5))
    config = AlertSettings(alertmanager_url=alertmanager, alert_check_seconds=3600, health_check_seconds=3600)
    service = build(settings_factory(env=Environment.PRODUCTION), clock=clock, alert_settings=config)
    await service.start()
    try:
        for title, key in (("Cron schedule stale", "cron:a"), ("Cron schedule stale", "cron:b"),
                           ("Queue backlog critical", "lane:default")):
            await service.pager.report(title=title, fingerprint=["alerts", title], message=f"{key} is behind",
                                       condition_key=key)

        async def recorded() -> bool:
            return len((await service.bus.request(LIST_ALERTS, AlertQuery())).conditions) == 3

        await eventually(recorded, "three conditions")
        clock.advance(30)
        await service.app.run_once()
        async with httpx.AsyncClient(base_url=alertmanager) as am:
            async def grouped() -> bool:
                groups = (await am.get("/api/v2/alerts/groups")).json()
                return len(groups) == 2

            await eventually(grouped, "two Alertmanager groups")
            alerts = (await am.get("/api/v2/alerts")).json()
            labels = sorted((a["labels"]["alertname"], a["labels"]["severity"]) for a in alerts)
            assert labels == [("Cron schedule stale", "error"), ("Queue backlog critical", "error")]
            groups = {g["labels"]["alertname"]: g for g in (await am.get("/api/v2/alerts/groups")).json()}
            assert set(groups) == {"Cron schedule stale", "Queue backlog critical"}

            for key in ("lane:default",):
                await service.bus.request(RESOLVE_CONDITION, ResolveCondition(condition_key=key))
            clock.advance(1)
            await service.app.run_once()

            async def resolved() -> bool:
                active = (await am.get("/api/v2/alerts", params={"active": "true"})).json()
                names = {a["labels"]["alertname"] for a in active if a["status"]["state"] == "active"}
                return names == {"Cron schedule stale"}

            await eventually(resolved, "the resolved condition to leave the active alerts")
        result = await service.bus.request(LIST_ALERTS, AlertQuery())
        am_rows = [n for n in result.page_notifications if n.sink == "alertmanager"]
        assert len(am_rows) == 3 and {n.outcome for n in am_rows} == {"sent"}  # two pages and one resolution
    finally:
        await service.stop()


