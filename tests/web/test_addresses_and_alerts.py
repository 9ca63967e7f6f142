"""A bad address is a page, and Health's Alerts say what each alert is and whether it still pages
(issue 32 #6), in headless Chromium against a running stack: `/sessions/abc` and
`/ranked?filter=bogus` answer a page in words with a 4xx and a way back (the API still answers
problem JSON); each alert shows its message, its snippet, whether it still pages, and Resolve;
cadences and spans in words."""

from __future__ import annotations

import re
from typing import Any

import httpx
from pageshots import accessibility_problems, notice, screenshot
from test_issues_page import sign_in

FLEET = {"Authorization": "Bearer test-fleet-key"}


async def test_a_bad_address_is_a_page_with_a_way_back(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    page = await browser.new_page()
    await sign_in(page, base, "/sessions")
    for path, status, said, back in (
            ("/sessions/abc", 404, "There is no session “abc”", "Back to Sessions"),
            ("/ranked?filter=bogus", 400, "“bogus” is not one of this page's choices for filter", "Back to Ranked"),
            ("/issues?offset=-3", 400, "offset “-3” is not something this page takes", "Back to Issues"),
            ("/sesions", 404, "Nothing is at /sesions here", "Back to the pages")):
        answer = await page.goto(f"{base}{path}")
        assert answer is not None and answer.status == status, (path, answer and answer.status)
        assert answer.headers["content-type"].startswith("text/html"), path
        assert said in await page.locator("[data-not-a-page]").inner_text(), path
        assert await page.locator("[data-back]").inner_text() == back, path
        assert await page.get_by_role("navigation", name="Pages").count() == 1  # still a page, with its navigation
        assert await accessibility_problems(page) == []
        if path == "/sessions/abc":
            await screenshot(page, "not-a-page")
    await page.goto(f"{base}/ranked?filter=bogus")
    await page.locator("[data-back]").click()
    await page.wait_for_url(f"{base}/ranked")
    assert await page.get_by_role("heading", level=1).inner_text() == "Ranked"
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:  # the API keeps its problem documents
        r = await http.get("/api/v1/sessions/abc", headers={"Accept": "text/html"})
        assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"


async def reported(services: dict[str, Any], page: Any, base: str, titles: set[str]) -> None:
    for _ in range(100):  # the pages reach the ledger through the senders' outboxes
        shown = set(await page.locator("[data-alert-issue] .alert-title").all_inner_texts())
        if titles <= shown:
            return
        await page.wait_for_timeout(100)
        await page.goto(f"{base}/health#alerts-ledger")
    raise AssertionError(f"never shown: {titles - shown}")


async def test_each_alert_shows_its_message_snippet_whether_it_still_pages_and_resolve(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    pager = services["backlog"].pager
    await pager.report(title="Disk nearly full", fingerprint=["disk", "host-a"], message="3 GB left on host-a",
                       condition_key="disk:host-a", snippet_source=RuntimeError("df says 97% used"))
    await pager.report(title="Sweep crashed", fingerprint=["sweep"], message="it raised KeyError")
    await pager.report(title="Slow answer", fingerprint=["slow"], message="GitHub took 9 s", level="warning")
    page = await browser.new_page()
    await sign_in(page, base, "/health")
    await reported(services, page, base, {"Disk nearly full", "Sweep crashed", "Slow answer"})

    def row(title: str) -> Any:
        return page.locator(f'[data-alert-issue]:has(.alert-title:text-is("{title}"))')

    disk = row("Disk nearly full")
    assert await disk.locator("[data-alert-message]").inner_text() == "3 GB left on host-a"
    snippet = disk.locator("[data-alert-snippet]")
    await snippet.locator("summary").click()
    assert "df says 97% used" in await snippet.locator("pre").inner_text()
    assert await disk.get_attribute("data-firing") == "yes"
    assert "its condition is still true" in await disk.locator("[data-still-firing]").inner_text()
    crash = row("Sweep crashed")
    assert await crash.get_attribute("data-firing") == "yes"
    assert "stops paging" in await crash.locator("[data-still-firing]").inner_text()
    assert await crash.locator("[data-still-firing] time").count() == 1
    assert await crash.get_by_role("button", name=re.compile("Resolve")).count() == 0  # it rests by itself
    slow = row("Slow answer")
    assert await slow.get_attribute("data-firing") == "no"
    assert "a warning pages once" in await slow.locator("[data-still-firing]").inner_text()
    assert "2 of the 3 issues shown are still paging" in await page.locator("[data-firing-count]").inner_text()
    # Spans in words: the gateway's uptime reads "12 s" or "3 min", never "0m 12s".
    uptime = await page.locator('tr[data-service="gateway"] td[data-label="Uptime"]').inner_text()
    assert re.fullmatch(r"\d+ (s|min)", uptime), uptime
    cadences = await page.locator("[data-cadence]").all_inner_texts()  # a job's cadence in words
    assert all(not re.search(r"[*/]", c) for c in cadences), cadences
    assert await accessibility_problems(page) == []
    await screenshot(page, "health-alerts")

    await disk.get_by_role("button", name="Resolve “Disk nearly full”: it is no longer true").click()
    assert await notice(page) == "Resolved: it no longer pages, and Alertmanager is told it resolved."
    disk = row("Disk nearly full")
    assert await disk.get_attribute("data-firing") == "no"
    assert "resolved" in await disk.locator("[data-still-firing]").inner_text()
    await screenshot(page, "health-alert-resolved")
