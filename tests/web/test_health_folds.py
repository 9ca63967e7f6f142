"""The Health page at 375 px (issue 32 #6, as /issues): an index of the panels at the top, each with
its verdict and a link that moves focus to it; a skip link to the first panel that is not ok; the
long panels folded when ok and open when not; a live update opens a panel nobody touched that turned
not ok, and leaves one the operator opened or closed as they left it. In headless Chromium against a
running stack."""

from __future__ import annotations

from typing import Any

from pageshots import accessibility_problems, screenshot
from test_health_monitor_pages import sign_in

PHONE = {"width": 375, "height": 800}
FOLDS = "details[data-panel-fold]"
ALL_OPEN = f"""() => {{
  const folds = [...document.querySelectorAll('{FOLDS}')];
  const was = folds.map(d => d.open);
  folds.forEach(d => {{ d.open = true; }});
  const height = document.documentElement.scrollHeight;
  folds.forEach((d, i) => {{ d.open = was[i]; }});
  return height;
}}"""


async def focused_id(page: Any) -> str:
    return str(await page.evaluate("document.activeElement ? document.activeElement.id : ''"))


async def test_at_375_px_ok_panels_fold_a_failing_one_is_open_and_the_index_reaches_each(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    page = await browser.new_page(viewport=PHONE)
    await sign_in(page, base)
    # Nothing pages yet: Alerts is ok and folded. An error arrives; the live update opens the panel
    # by itself, since nobody has opened or closed it.
    assert await page.locator('[data-index-entry="alerts-ledger"]').inner_text() == "Alerts: ok"
    assert not await page.locator("#alerts-ledger-fold").evaluate("d => d.open")
    await services["backlog"].pager.report(title="Liveness sweep failed", fingerprint=["backlog", "liveness"],
                                           message="GitHub answered 502")
    await page.locator("#alerts-ledger-fold[open]").wait_for(state="attached", timeout=15_000)

    # The index: every panel, each with its verdict; Alerts says it pages, Cron and Workers are ok.
    verdicts = {await e.get_attribute("data-index-entry"): await e.inner_text()
                for e in await page.locator("[data-index-entry]").all()}
    assert verdicts["alerts-ledger"] == "Alerts: 1 paging", verdicts
    assert verdicts["cron"] == "Cron freshness: ok" and verdicts["workers"] == "Workers: ok", verdicts
    assert set(verdicts) >= {"overall", "services", "disk", "queues", "nats-cluster", "lane-charts"}, verdicts

    # Folded when ok: their tables are not visible; the paging panel is open and its issue shows.
    cron, workers, alerts = (page.locator(f"#{p}-fold") for p in ("cron", "workers", "alerts-ledger"))
    assert not await cron.evaluate("d => d.open") and not await page.locator("[data-cron-keys]").is_visible()
    assert not await workers.evaluate("d => d.open") and not await page.locator("[data-instance]").first.is_visible()
    assert await alerts.evaluate("d => d.open") and await page.locator("[data-alert-issue]").first.is_visible()
    height = await page.evaluate("document.documentElement.scrollHeight")
    unfolded = await page.evaluate(ALL_OPEN)
    print(f"/health at 375 px: {height} px tall folded, {unfolded} px with every panel open")
    assert height < unfolded * 0.7, (height, unfolded)

    # The skip link goes to the first panel that is not ok, and focus goes with it.
    skip = page.locator("[data-skip-trouble]")
    assert await skip.inner_text() == "Skip to the first panel that is not ok: Alerts"
    await skip.focus()
    await page.keyboard.press("Enter")
    assert page.url.endswith("#alerts-ledger") and await focused_id(page) == "alerts-ledger"
    # An index link moves focus to its panel and unfolds it; the next Tab is inside it.
    await page.locator('[data-index-entry="workers"] a').focus()
    await page.keyboard.press("Enter")
    assert await focused_id(page) == "workers"
    assert await workers.evaluate("d => d.open") and await page.locator("[data-instance]").first.is_visible()
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.closest('#workers') !== null")

    # The reader closes Alerts and opens Cron; a live update keeps both as they were left, and a
    # panel nobody touched (NATS cluster, ok) stays folded.
    await alerts.locator("summary").click()
    await cron.locator("summary").click()
    await page.evaluate("window.zimmerLive.refresh()")
    assert not await alerts.evaluate("d => d.open") and await cron.evaluate("d => d.open")
    assert not await page.locator("#nats-cluster-fold").evaluate("d => d.open")

    assert await accessibility_problems(page) == []
    await page.goto(f"{base}/health")
    await page.set_viewport_size({"width": 1280, "height": 900})  # a wide screen: every panel open
    assert await cron.evaluate("d => d.open") and await page.locator("[data-cron-keys]").is_visible()
    await screenshot(page, "health-folded")  # 1280 px, then 375 px, where the ok ones fold again
    assert not await cron.evaluate("d => d.open") and await alerts.evaluate("d => d.open")
