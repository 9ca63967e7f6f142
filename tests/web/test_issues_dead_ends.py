"""The Issues page without dead ends (issue 32 #6), in headless Chromium against a running stack
of ~50 backlog rows: at 375 px it is a few screens tall, a skip link and the counts reach every
section in a few Tab presses, long sections fold; sessions, issues and PRs are links; why a row's
session waits is a pill; a refused form comes back as it was typed, the refusal beside it, the row
named by its key, and Back goes where the form was."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pageshots import accessibility_problems, screenshot
from test_issues_page import append, sign_in

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, stack_setup, world_in_stack  # noqa: F401 - stack_setup: the fixture

from zimmer_sim.fake_github import FakePR

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
PHONE = {"width": 375, "height": 800}
QUEUED, IN_FLIGHT, PARKED = 44, 3, 3  # 50 rows


async def fifty_rows(base: str) -> dict[str, Any]:
    """44 queued rows, 3 started and running (one paused until tomorrow), 3 started and parked."""
    async with httpx.AsyncClient(base_url=base, headers=FLEET, timeout=30) as http:
        items = [await append(http, n, "small") for n in range(1, QUEUED + IN_FLIGHT + PARKED + 1)]
        started = []
        async with httpx.AsyncClient(base_url=base, headers=OPERATOR, timeout=30) as op:
            for item in items[:IN_FLIGHT + PARKED]:
                r = await op.post(f"/api/v1/work_backlog_items/{item['id']}/start_now")
                assert r.status_code == 200, r.text
                started.append(r.json()["session_id"])
        for sid in started[IN_FLIGHT:]:
            r = await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "needs_input"})
            assert r.status_code in (200, 202), r.text
        until = datetime.now(UTC) + timedelta(days=1)
        r = await http.post(f"/api/v1/sessions/{started[0]}/pause_until", json={"until": until.isoformat()})
        assert r.status_code == 200, r.text
        for _ in range(100):  # the backlog follows spot-gate's session events
            counts = (await http.get("/api/v1/work_backlog_items")).json()["counts"]
            if (counts["in_flight"], counts["parked"]) == (IN_FLIGHT, PARKED):
                break
            await asyncio.sleep(0.1)
        assert (counts["queued"], counts["in_flight"], counts["parked"]) == (QUEUED, IN_FLIGHT, PARKED), counts
    return {"items": items, "sessions": started, "paused": started[0], "parked": started[IN_FLIGHT:]}


async def test_at_375_px_the_page_is_short_and_every_section_a_few_keys_away(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    made = await fifty_rows(base)
    page = await browser.new_page(viewport=PHONE)
    await sign_in(page, base, "/issues")
    height = await page.evaluate("document.documentElement.scrollHeight")
    print(f"/issues at 375 px with {QUEUED + IN_FLIGHT + PARKED} rows: {height} px tall")
    assert height < 6500, height  # was 13,000 px with 47 rows

    # The skip link is the first Tab stop, shown when focused, and lands on the page's content.
    await page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to the page's content")
    assert await skip.evaluate("a => a === document.activeElement") and await skip.is_visible()
    await page.keyboard.press("Enter")
    assert page.url.endswith("#main")
    # From the top, Parked's count is a handful of Tab presses away (it was 164).
    await page.goto(f"{base}/issues")
    presses = 0
    while not await page.evaluate("document.activeElement.closest('[data-count=parked]') !== null"):
        await page.keyboard.press("Tab")
        presses += 1
        assert presses <= 15, f"Parked's count not reached in {presses} Tab presses"
    await page.keyboard.press("Enter")
    assert page.url.endswith("#parked")
    box = await page.locator("#parked-heading").bounding_box()
    assert box is not None and 0 <= box["y"] < PHONE["height"]  # the section is on screen

    # Queued shows its first rows; the rest fold under "N more", one click away.
    fold = page.locator("#queued details[data-fold]")
    assert await fold.locator("summary").inner_text() == f"{QUEUED - 5} more queued rows"
    later = fold.locator("tr[data-key]").first
    assert not await later.is_visible()
    await fold.locator("summary").click()
    assert await later.is_visible()

    # Why a session waits, beside its status; and the session is a link to its page.
    paused = page.locator(f'#in-flight tr:has(a[href="/sessions/{made["paused"]}"])')
    pill = paused.locator("[data-wait]")
    assert await pill.get_attribute("data-wait") == "paused_until"
    assert "paused until" in await pill.inner_text() and await pill.locator("time").count() == 1
    parked = made["parked"][0]
    assert await page.locator('#parked [data-status]').first.inner_text() == "needs_input"
    await page.set_viewport_size({"width": 1280, "height": 900})
    assert await accessibility_problems(page) == []
    await screenshot(page, "issues-fifty-rows")
    await page.locator("#parked").get_by_role("link", name=f"Session {parked}", exact=True).click()
    await page.wait_for_url(f"{base}/sessions/{parked}")
    assert await page.get_by_role("heading", level=1).inner_text() == f"Session {parked}"


async def test_issues_and_prs_are_links_to_github(stack, browser, request) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    world = world_in_stack(services, request.getfixturevalue("stack_setup"))  # the fake GitHub the stack reads
    world.gh.issue(REPO, 300, title="Follows another")
    world.gh.issues[(REPO, 300)].prs.append(FakePR(REPO, 400, "MERGED", world.now - timedelta(days=20)))
    world.gh.issue(REPO, 310, title="No PR")
    await world.left_queue(300, ago=timedelta(days=12))
    await world.left_queue(310, ago=timedelta(days=12))
    await world.sweep()
    await world.app.snapshot.run()
    await world.hold(world.ids["zimmer#310"], "pick #300 or zimmer#311: the maintainers")

    page = await browser.new_page()
    await sign_in(page, base, "/issues")
    merged = page.locator('#stranded tr[data-key="zimmer#300"]')
    assert await merged.locator("[data-verdict]").get_attribute("data-verdict") == "pr_merged_issue_open"
    prs = merged.locator("[data-verdict] a[data-prs]")  # the PRs referencing it are on the issue's page
    assert await prs.get_attribute("href") == f"https://github.com/{REPO}/issues/300"
    reason = page.locator('#awaiting tr[data-key="zimmer#310"] [data-reason]')
    assert await reason.locator("a").evaluate_all("links => links.map(a => a.href)") == [
        f"https://github.com/{REPO}/issues/300", f"https://github.com/{REPO}/issues/311"]
    assert await accessibility_problems(page) == []
    await screenshot(page, "issues-links")


async def test_a_refused_form_comes_back_as_typed_with_the_row_named_by_its_key(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        items = [await append(http, n, "small") for n in (1, 2, 3)]
    page = await browser.new_page()
    await sign_in(page, base, "/issues")

    # A precedence past the contract's limit: the page again, the field as typed, the limit in words.
    row = page.locator('tr[data-key="zimmer#2"]')
    await row.get_by_label("Pin at precedence").fill("99999999999")
    async with page.expect_response(lambda r: r.url.endswith("/pin") and r.request.method == "POST") as answer:
        await row.get_by_role("button", name="Pin zimmer#2").click()
    assert (await answer.value).status == 422
    assert page.url.endswith(f"/issues/{items[1]['id']}/pin")
    field = page.locator('tr[data-key="zimmer#2"]').get_by_label("Pin at precedence")
    assert await field.input_value() == "99999999999"
    assert await field.get_attribute("aria-invalid") == "true"
    beside = page.locator(f'[data-field-error="pin-{items[1]["id"]}"]')
    assert await beside.inner_text() == "Precedence must be at most 2,147,483,647. Nothing was done."
    assert await field.evaluate("f => f.getAttribute('aria-describedby') === document.querySelector("
                                "'[data-field-error]').id")
    assert "Not done" in await page.get_by_role("alert").inner_text()
    assert await accessibility_problems(page) == []
    await screenshot(page, "issues-refused-pin")

    # A stale row: started meanwhile, then Remove from the old page. The refusal names zimmer#3, never
    # the backlog's internal id. The old page is one without script: a live page would move the row
    # to Started under the test's hands (a CI run filled a row already gone).
    stale_context = await browser.new_context(java_script_enabled=False)
    try:
        old_page = await stale_context.new_page()
        await sign_in(old_page, base, "/issues")
        async with httpx.AsyncClient(base_url=base, headers=OPERATOR) as op:
            assert (await op.post(f"/api/v1/work_backlog_items/{items[2]['id']}/start_now")).status_code == 200
        stale = old_page.locator('tr[data-key="zimmer#3"]')
        await stale.get_by_label("Reason for removing").fill("a duplicate, judged by hand")
        await stale.get_by_role("button", name="Remove zimmer#3").click()
        said = await old_page.get_by_role("alert").inner_text()
        assert "zimmer#3 is started" in said and f"item {items[2]['id']}" not in said, said
        assert await old_page.get_by_role("heading", name="Queued").count() == 1  # the page, not a dead end
    finally:
        await stale_context.close()

    # A form that did not come from this page's session (a CSRF mismatch) cannot be re-rendered: its
    # refusal page's Back goes to Issues, where it was posted from.
    await page.goto(f"{base}/issues")
    await page.locator('tr[data-key="zimmer#1"] input[name=csrf]').first.evaluate("i => i.value = 'forged'")
    await page.locator('tr[data-key="zimmer#1"]').get_by_role("button", name="Promote zimmer#1").click()
    back = page.locator("[data-back]")
    assert await back.inner_text() == "Back to Issues"
    await back.click()
    await page.wait_for_url(f"{base}/issues")
