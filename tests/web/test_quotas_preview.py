"""The Quotas page's "Preview these settings against the last 7 days" (issue 32 #5) in headless
Chromium against a running stack: the form beside the settings form, filled in with the settings
in force; its answer on the page (the sentence, the totals beside what happened, the hours that
differed, the replay drawn on the 7-day utilization chart and its own chart); a refusal shown
again beside its field with what was typed; CSRF as every form. At 1280 and 375 px, with
screenshots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from pageshots import SCREENSHOTS, VIEWPORTS, accessibility_problems, screenshot
from sqlalchemy import text

from zimmer_common.history import floor_to

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def sign_in(page: Any, base: str) -> None:
    await page.goto(f"{base}/quotas")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}/quotas"), page.url


async def a_held_week(services: dict[str, Any], base: str) -> None:
    """The 5-hour budget spent and five spot sessions asking (held, as recorded), and the 7-day
    window's history for its chart: what the preview replays and draws on."""
    async with httpx.AsyncClient(base_url=base, headers=FLEET, timeout=15) as http:
        r = await http.post("/api/v1/quota/readings", json={"account": "acct-1", "status": "active",
                                                             "five_hour": {"utilization": 0.9},
                                                             "seven_day": {"utilization": 0.4}})
        assert r.status_code == 202, r.text
        for i in range(5):
            made = await http.post("/api/v1/sessions", json={"title": f"nightly {i}", "genesis": "schedule",
                                                             "prompt": "go"})
            assert made.json()["turn"]["outcome"] == "held", made.text
    now = floor_to(datetime.now(UTC), 1)
    rows = [{"at": floor_to(now, 15) - timedelta(minutes=15 * q), "u": 0.1 + (7 * 96 - q) / (7 * 96) * 0.3,
             "p": 0.9 * (7 * 96 - q) / (7 * 96)} for q in range(7 * 96, 0, -1)]
    async with services["spot-gate"].engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO spot_gate.pool_history (resolution_minutes, window_name, at, samples, utilization, pacing, "
            "reserve, capacity_dollars, running, held, paused, holds, pauses, resumes) VALUES (15, 'seven_day', :at, "
            "15, :u, :p, 0.1, NULL, 2, 0, 0, 0, 0, 0) ON CONFLICT DO NOTHING"), rows)  # a quarter the live recorder wrote


async def no_overflow(page: Any) -> None:
    assert await page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


async def test_preview_these_settings_against_the_last_7_days(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    await a_held_week(services, base)
    page = await browser.new_page(viewport=VIEWPORTS["desktop"])
    await sign_in(page, base)
    form = page.locator("form[data-preview-form]")
    # Filled in with the settings in force, beside (after) the settings form.
    assert await form.get_by_label("Priority reserve to preview, 5-hour window (%)").input_value() == "20"
    assert await form.get_by_label("Max sessions to preview (at once)").input_value() == "10"
    assert await page.locator("[data-preview-answer]").count() == 0
    before = int(await page.locator('figure[data-chart="pool-seven_day"]').get_attribute("data-series") or 0)

    await form.get_by_label("Priority reserve to preview, 5-hour window (%)").fill("5")
    await form.get_by_role("button", name="Preview these settings against the last 7 days").click()
    answer = page.locator("[data-preview-answer]")
    await answer.wait_for()
    sentence = await page.locator("[data-preview-sentence]").inner_text()
    assert "a 5-hour reserve of 5%" in sentence and "5 came out the other way" in sentence, sentence
    held = page.locator('[data-preview-totals] tr[data-total="held"] td')
    assert [await td.inner_text() for td in await held.all()] == ["5", "0"]
    assert await page.locator("[data-preview-hours] tr[data-changed]").count() >= 1
    assert await page.locator("[data-preview-sessions] li").count() == 5
    # What was typed stays in the form; nothing was saved.
    assert await form.get_by_label("Priority reserve to preview, 5-hour window (%)").input_value() == "5"
    assert await page.locator("#reserve_five_hour_percent").input_value() == "20"
    # Drawn on the same 7-day chart (two dashed series more) and on a chart of its own.
    seven = page.locator('figure[data-chart="pool-seven_day"]')
    await seven.locator("canvas").first.wait_for()
    assert int(await seven.get_attribute("data-series") or 0) == before + 2
    assert "previewed settings" in await seven.locator(".u-legend").inner_text()
    await page.locator('figure[data-chart="preview-waiting"] canvas').first.wait_for()
    assert await page.locator("[data-preview-drawn]").get_attribute("data-preview-drawn") == ""
    assert await accessibility_problems(page) == []
    await no_overflow(page)
    await screenshot(page, "quotas-preview")
    await page.set_viewport_size(VIEWPORTS["375px"])
    await no_overflow(page)
    for label, size in VIEWPORTS.items():  # the panel alone, for review: the full pages are long
        await page.set_viewport_size(size)
        await page.locator("#preview").screenshot(path=str(SCREENSHOTS / f"quotas-preview-panel-{label}.png"))

    # A refusal: the page again (422), what was typed kept, the words beside the field at fault.
    await page.set_viewport_size(VIEWPORTS["desktop"])
    await form.get_by_label("Max sessions to preview (at once)").fill("lots")
    await form.get_by_label("Priority reserve to preview, 7-day window (%)").fill("12.5")
    async with page.expect_response(lambda r: r.url.endswith("/quotas/preview")) as posted:
        await form.get_by_role("button", name="Preview these settings against the last 7 days").click()
    assert (await posted.value).status == 422
    error = page.locator('[data-preview-error="max_sessions"]')
    await error.wait_for()
    said = await error.inner_text()
    assert said.startswith("Not previewed:") and "lots" in said and "is not a whole number" in said, said
    field = form.get_by_label("Max sessions to preview (at once)")
    assert await field.get_attribute("aria-invalid") == "true" and await field.input_value() == "lots"
    assert await form.get_by_label("Priority reserve to preview, 7-day window (%)").input_value() == "12.5"
    assert await page.locator("[data-preview-answer]").count() == 0
    assert await accessibility_problems(page) == []
    await screenshot(page, "quotas-preview-refused")
    await page.set_viewport_size(VIEWPORTS["375px"])
    await no_overflow(page)

    await page.set_viewport_size(VIEWPORTS["desktop"])
    await form.get_by_label("Max sessions to preview (at once)").fill("10")
    await form.get_by_label("Priority reserve to preview, 5-hour window (%)").fill("140")
    await form.get_by_role("button", name="Preview these settings against the last 7 days").click()
    reserve = page.locator('[data-preview-error="reserve_five_hour_percent"]')
    await reserve.wait_for()
    assert "the 5-hour reserve" in await reserve.inner_text() and "100" in await reserve.inner_text()

    # CSRF, as every form: a post without this page's token is refused and nothing is replayed.
    forged = await page.request.post(f"{base}/quotas/preview", form={"csrf": "not-this-page",
                                                                      "reserve_five_hour_percent": "5"})
    assert forged.status == 403 and "CSRF" in await forged.text()
    await page.close()
