"""The Health page's Disk and clones panel (issue 16), in headless Chromium against a running stack:
every host's roots with their free space and fence, the newest run of each sweep with its counts
and bytes, the guard's refusals; outside the overall status. And the same readings on REST
(`GET /api/v1/health/disk`, and beside the report in `GET /api/v1/health` with its prose)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
from pageshots import accessibility_problems, screenshot
from sqlalchemy import insert

from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.tables import DiskRootRow

OPERATOR = {"Authorization": "Bearer test-operator-token"}
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill("test-operator-token")
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url


async def seed_two_hosts(sweeper: Any) -> None:
    now = datetime.now(UTC)
    async with sweeper.engine.begin() as conn:
        await conn.execute(insert(DiskRootRow), [
            dict(host="runner-1", name="clones", path="/srv/zimmer/clones", exists_now=True, free_bytes=12 << 30,
                 total_bytes=100 << 30, sweepable=True, fence="relocated clear of the durable volume", read_at=now),
            dict(host="runner-1", name="scratch", path=None, exists_now=False, free_bytes=None, total_bytes=None,
                 sweepable=False, fence="not configured", read_at=now),
            dict(host="runner-2", name="clones", path="/home/z/.zimmer/clones", exists_now=True, free_bytes=1 << 30,
                 total_bytes=50 << 30, sweepable=False,
                 fence="inside the durable volume ~/.zimmer: swept only in production and staging", read_at=now)])
    one = DiskRecords(UnitsOfWork(sweeper, "sweeper"), "runner-1", lambda: now)
    await one.run("orphan_clone_sweep", started_at=now, outcome="partial", counts={"removed": 3, "deferred": 17},
                  bytes_freed=3 << 30, note="the 5-minute budget ran out; 17 left for the next run")
    await one.refusal("orphan_clone_sweep", "/srv/zimmer/clones/zimmer-main-1-aa", [42], "session 42 is running")


async def test_the_health_page_shows_every_hosts_disk_outside_the_overall_status(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=OPERATOR) as http:
        empty = (await http.get("/api/v1/health/disk")).json()
        assert empty["hosts"] == [] and empty["status"] == "ok"
        await seed_two_hosts(services["sweeper"])
        disk = (await http.get("/api/v1/health/disk")).json()
        assert [h["host"] for h in disk["hosts"]] == ["runner-1", "runner-2"] and disk["status"] == "warning"
        report = (await http.get("/api/v1/health", headers=FLEET)).json()
        assert report["disk"]["status"] == "warning" and report["log_retention"] is not None
        assert "Disk on runner-1: pressure ok; 1 guard refusal in the last 24 h." in report["summary"]
        assert (await httpx.AsyncClient(base_url=base).get("/api/v1/health/disk")).status_code == 401
    page = await browser.new_page()
    await sign_in(page, base, "/health")
    panel = page.locator("#disk")
    assert await panel.locator("[data-disk-status]").get_attribute("data-disk-status") == "warning"
    assert "Not counted in the overall status" in await panel.inner_text()
    one = panel.locator("[data-disk-host=runner-1]")
    assert await one.locator("[data-refusals]").get_attribute("data-refusals") == "1"
    assert "12.0 GiB of 100.0 GiB" in await one.locator("[data-root=clones]").inner_text()
    assert "not configured" in await one.locator("[data-root=scratch]").inner_text()
    sweep = one.locator("[data-sweep=orphan_clone_sweep]")
    assert await sweep.locator("[data-outcome]").get_attribute("data-outcome") == "partial"
    assert "deferred 17, removed 3" in await sweep.inner_text()
    assert await sweep.locator("[data-bytes-freed]").get_attribute("data-bytes-freed") == str(3 << 30)
    two = panel.locator("[data-disk-host=runner-2]")
    assert "swept only in production and staging" in await two.locator("[data-root=clones]").inner_text()
    assert "No disk sweep has run on this host yet" in await two.inner_text()
    assert await page.locator("[data-overall]").get_attribute("data-overall") != "critical"
    assert await accessibility_problems(page) == []
    await screenshot(page, "health-disk")
