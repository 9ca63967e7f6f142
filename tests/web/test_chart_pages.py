"""The charts on Quotas, Costs and Health in headless Chromium against a running stack (issue 32 #4):
each draws a canvas with uPlot (vendored) with the series its spec names, at 1280 and at 375 px, with
screenshots; each has its summary sentence and table for readers without JavaScript; and a page with
no history yet says so instead of drawing an empty chart."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pageshots import SCREENSHOTS, VIEWPORTS, accessibility_problems, screenshot
from sqlalchemy import text

from zimmer_common.contracts.runtime import INGEST_SPEND, SpendReport
from zimmer_common.history import floor_to

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


@pytest.fixture
def stack_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZIMMER_HEALTH_CHECK_SECONDS", "0.5")  # the health monitor records lanes within a second


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url


async def a_crunch(services: dict[str, Any]) -> None:
    """Five hours of a quota crunch as spot-gate would have recorded it: utilization climbing past the
    pacing curve to the spot budget line, work held, two sessions paused by the ceiling, then a resume;
    and a week of quarter hours behind it."""
    now = floor_to(datetime.now(UTC), 1)
    rows = []
    for m in range(300, 0, -1):
        u = min(0.85, 0.2 + (300 - m) * 0.0025)
        rows.append({"w": "five_hour", "at": now - timedelta(minutes=m), "r": 1, "s": 1, "reserve": 0.2, "u": u,
                     "p": 0.8 * (300 - m + 60) / 300, "running": 4 if u < 0.8 else 1, "held": 0 if u < 0.75 else 3,
                     "holds": 1 if u >= 0.75 and m % 7 == 0 else 0, "pauses": 2 if m == 40 else 0,
                     "resumes": 1 if m == 5 else 0})
    for q in range(7 * 96, 0, -1):
        rows.append({"w": "seven_day", "at": floor_to(now, 15) - timedelta(minutes=15 * q), "r": 15, "s": 15,
                     "reserve": 0.1,
                     "u": 0.1 + (7 * 96 - q) / (7 * 96) * 0.5, "p": 0.9 * (7 * 96 - q) / (7 * 96), "running": 3,
                     "held": 0, "holds": 0, "pauses": 0, "resumes": 0})
    async with services["spot-gate"].engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO spot_gate.pool_history (resolution_minutes, window_name, at, samples, utilization, pacing, "
            "reserve, capacity_dollars, running, held, paused, holds, pauses, resumes) VALUES (:r, :w, :at, :s, :u, "
            ":p, :reserve, NULL, :running, :held, 0, :holds, :pauses, :resumes) "
            "ON CONFLICT DO NOTHING"), rows)  # a minute the live recorder already wrote keeps its row


async def rendered(page: Any, chart: str) -> dict[str, Any]:
    figure = page.locator(f'figure[data-chart="{chart}"]')
    await figure.locator("canvas").first.wait_for()
    return {"series": int(await figure.get_attribute("data-series") or 0),
            "marks": int(await figure.get_attribute("data-marks") or 0),
            "rendered": await figure.get_attribute("data-rendered"),
            "legend": await figure.locator(".u-legend .u-series").count(),
            "width": (await figure.locator("canvas").first.bounding_box())["width"]}


async def test_the_quotas_charts_draw_the_crunch_at_both_widths(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    page = await browser.new_page(viewport=VIEWPORTS["desktop"])
    await sign_in(page, base, "/quotas")
    for chart in ("pool-five_hour", "pool-seven_day"):  # nothing recorded yet: said, not drawn
        figure = page.locator(f'figure[data-chart="{chart}"]')
        assert await figure.get_attribute("data-no-history") is not None
        assert "No history yet" in await figure.inner_text() and await figure.locator("canvas").count() == 0

    await a_crunch(services)
    await page.reload()
    five = await rendered(page, "pool-five_hour")
    assert five == {**five, "series": 6, "rendered": "uplot", "legend": 7}  # x and the six series in the legend
    assert five["marks"] > 10  # holds, the pauses and the resume, on the time axis
    week = await rendered(page, "pool-seven_day")
    assert week["series"] == 6 and week["marks"] == 0
    summary = await page.locator('figure[data-chart="pool-five_hour"] [data-chart-summary]').inner_text()
    assert "85.0% now" in summary and "2 sessions paused by the ceiling, 1 resumed" in summary
    assert "spot budget line at 80.0%" in summary
    assert await accessibility_problems(page) == []
    assert [e for e in await page.evaluate("() => [...document.querySelectorAll('[data-chart-error]')]"
                                           ".map(f => f.dataset.chartError)")] == []
    await screenshot(page, "quotas-charts")

    await page.set_viewport_size(VIEWPORTS["375px"])
    await page.reload()
    narrow = await rendered(page, "pool-five_hour")
    assert narrow["series"] == 6 and narrow["width"] <= 375 - 20
    for label, size in VIEWPORTS.items():  # the charts alone, for review
        await page.set_viewport_size(size)
        await page.reload()
        await rendered(page, "pool-five_hour")
        await page.locator("#pool-charts").screenshot(path=str(SCREENSHOTS / f"quotas-charts-panel-{label}.png"))
    width = await page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 375, f"the page scrolls sideways at 375 px: {width}"


async def test_without_javascript_the_charts_are_their_words_and_tables(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    await a_crunch(services)
    context = await browser.new_context(java_script_enabled=False, viewport=VIEWPORTS["desktop"])
    page = await context.new_page()
    await sign_in(page, base, "/quotas")
    figure = page.locator('figure[data-chart="pool-five_hour"]')
    assert await figure.locator("canvas").count() == 0
    assert "% at the start, 85.0% now" in await figure.locator("[data-chart-summary]").inner_text()
    await figure.locator("details.chart-table summary").click()
    rows = figure.locator("details.chart-table tbody tr")
    assert 5 <= await rows.count() <= 12
    assert "Pauses" in await figure.locator("details.chart-table thead").inner_text()
    await context.close()


async def test_the_costs_charts_draw_each_model(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    page = await browser.new_page(viewport=VIEWPORTS["desktop"])
    await sign_in(page, base, "/costs")
    assert "No spend recorded" in await page.locator('figure[data-chart="costs-rate"]').inner_text()
    bus = services["gateway"].bus
    now = datetime.now(UTC)
    spends = [("claude_code", "claude-opus-4", h) for h in (1, 2, 5, 30, 60)] + \
        [("claude_code", "claude-sonnet-4", h) for h in (3, 4, 50)] + [("codex", "gpt-5-codex", h) for h in (2, 100)]
    for i, (harness, model, hours) in enumerate(spends):
        await bus.publish_event(INGEST_SPEND, "spend", SpendReport(
            request_id=f"chart-{i}", session_id=None, harness=harness, model=model, output_tokens=200_000,
            at=now - timedelta(hours=hours)), event_id=f"chart-spend-{i}")
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for _ in range(100):
            if len((await http.get("/api/v1/costs/history")).json()["models"]) == 3:
                break
            await asyncio.sleep(0.1)
    await page.reload()
    for chart in ("costs-rate", "costs-spent"):
        drawn = await rendered(page, chart)
        assert (drawn["series"], drawn["rendered"], drawn["legend"]) == (3, "uplot", 4)
    summary = await page.locator('figure[data-chart="costs-rate"] [data-chart-summary]').inner_text()
    assert "across 3 models" in summary and "the most by claude-opus-4" in summary
    assert await accessibility_problems(page) == []
    await page.locator("#costs-charts").screenshot(path=str(SCREENSHOTS / "costs-charts-panel-desktop.png"))
    await screenshot(page, "costs-charts")
    await page.set_viewport_size(VIEWPORTS["375px"])
    await page.reload()
    assert (await rendered(page, "costs-rate"))["width"] <= 375 - 20


async def test_the_health_charts_draw_each_lane_with_its_thresholds(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    now = floor_to(datetime.now(UTC), 1)
    # A day of the ingest lane backing up past its thresholds an hour ago, as the monitor would have recorded it.
    rows = [{"at": now - timedelta(minutes=m), "ready": 400 if 60 <= m <= 120 else 3,
             "age": 900.0 if 60 <= m <= 120 else 2.0} for m in range(24 * 60, 0, -1)]
    async with services["alerts"].engine.begin() as conn:
        # ON CONFLICT: the live monitor may have recorded the last minute already (CI: a minute turned between).
        await conn.execute(text("INSERT INTO alerts.lane_history VALUES (1, 'ingest', :at, 1, :ready, 0, :age, 100, "
                                "300.0) ON CONFLICT DO NOTHING"), rows)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for _ in range(100):  # and the live monitor's own minute for every lane
            if len((await http.get("/api/v1/health/history")).json()["lanes"]) > 2:
                break
            await asyncio.sleep(0.1)
        lanes = [lane["lane"] for lane in (await http.get("/api/v1/health/history")).json()["lanes"]]
    page = await browser.new_page(viewport=VIEWPORTS["desktop"])
    await sign_in(page, base, "/health")
    for lane in lanes:
        drawn = await rendered(page, f"lane-{lane}")
        assert (drawn["series"], drawn["rendered"], drawn["legend"]) == (4, "uplot", 5), lane
    ingest = await page.locator('figure[data-chart="lane-ingest"] [data-chart-summary]').inner_text()
    assert "Peak depth 400 (threshold 100)" in ingest and "oldest waiting 15 min at worst" in ingest
    row = page.locator("table[data-lane-summary] tbody tr", has_text="ingest")
    assert "400" in await row.inner_text()
    assert await accessibility_problems(page) == []
    await page.locator("#lane-charts").screenshot(path=str(SCREENSHOTS / "health-charts-panel-desktop.png"))
    await screenshot(page, "health-charts")
    await page.set_viewport_size(VIEWPORTS["375px"])
    await page.goto(f"{base}/health#lane-charts")  # the link opens the panel, folded on a phone when ok
    assert (await rendered(page, "lane-ingest"))["width"] <= 375 - 20
    width = await page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 375, f"the page scrolls sideways at 375 px: {width}"


async def test_health_without_the_alerts_service_says_why_there_is_no_chart(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    await services["alerts"].stop()  # the history's owner is down: the page still answers, and says so
    page = await browser.new_page(viewport=VIEWPORTS["desktop"])
    await sign_in(page, base, "/health")
    panel = page.locator("#lane-charts")
    assert await panel.locator("canvas").count() == 0
    assert "The lanes' history could not be read now (unavailable" in await panel.inner_text()
