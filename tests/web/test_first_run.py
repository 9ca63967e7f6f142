"""The first run shows the system at work (issue 28 #3): `zimmer up` exactly as `python3 dev.py run`
starts it, with its simulated fleet attached, and within a minute of "Zimmer is up" the operator
pages show running sessions on /sessions, spend and burn rates on /costs and the fake GitHub's issues
queued on /issues, read in headless Chromium."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from test_zimmer_up import Run, _zimmer  # the e2e tests' `zimmer up` driver

pytestmark = pytest.mark.e2e

LIVE_WITHIN = 60.0  # seconds after "Zimmer is up" (the issue's promise)


async def _reload_until(page: Any, url: str, check: Any, deadline: float) -> Any:
    """Reload `url` until `check(page)` answers something truthy; None at the deadline."""
    while True:
        await page.goto(url)
        found = await check(page)
        if found or time.monotonic() > deadline:
            return found
        await page.wait_for_timeout(2000)


async def _running_rows(page: Any) -> list[str]:
    return await page.locator("tr[data-session]").evaluate_all(
        "rows => rows.filter(r => r.querySelector('[data-label=Status]').textContent.trim() === 'running')"
        ".map(r => r.dataset.session)")


async def _spend(page: Any) -> str | None:
    figure = page.locator('[data-figure="spend_five_hour_dollars"]')
    text = (await figure.inner_text()) if await figure.count() else ""
    return text if text and text != "$0.00" else None


async def _burn_rates(page: Any) -> int:
    return await page.locator("#burn tbody tr").count()


async def _queued_issues(page: Any) -> list[str]:
    return await page.locator("tr[data-key][data-id] a[href^='https://github.com/']").evaluate_all(
        "links => links.map(a => a.textContent)")


async def test_a_fresh_zimmer_up_shows_live_sessions_and_spend_within_a_minute(tmp_path: Path, browser: Any) -> None:
    run = Run(tmp_path / ".zimmer", tmp_path, "first-run", sim=True)
    run.start()
    try:
        run.wait_ready()
        up_at = time.monotonic()
        assert "A simulated fleet is attached" in run.stdout(), run.logs()
        status = _zimmer("status", "--data-dir", str(run.data_dir), run=run)
        assert status.returncode == 0 and "(simulated fleet)" in status.stdout, status.stdout + status.stderr
        token = json.loads((run.data_dir / "credentials.json").read_text())["operator_token"]
        page = await browser.new_page()
        await page.goto(f"{run.url}/signin")
        await page.get_by_label("Operator token").fill(token)
        await page.get_by_role("button", name="Sign in").click()

        running = await _reload_until(page, f"{run.url}/sessions", _running_rows, up_at + LIVE_WITHIN)
        assert running, f"no running session on /sessions within {LIVE_WITHIN:g}s of Zimmer is up\n{run.logs()}"
        spend = await _reload_until(page, f"{run.url}/costs", _spend, up_at + LIVE_WITHIN)
        assert spend, f"no spend on /costs within {LIVE_WITHIN:g}s of Zimmer is up\n{run.logs()}"
        burn = await _reload_until(page, f"{run.url}/costs", _burn_rates, up_at + LIVE_WITHIN)
        assert burn, f"no burn rate on /costs within {LIVE_WITHIN:g}s of Zimmer is up\n{run.logs()}"
        queue = await _reload_until(page, f"{run.url}/issues", _queued_issues, up_at + LIVE_WITHIN)
        assert queue, f"no queued GitHub issue on /issues within {LIVE_WITHIN:g}s of Zimmer is up\n{run.logs()}"
        assert run.stop() == 0, run.logs()
    finally:
        run.kill_everything()
