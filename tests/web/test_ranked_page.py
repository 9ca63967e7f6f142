"""The Ranked page in headless Chromium (seed 004 "The Ranked view", "Quick filters"): priority
above the spot queue, inline precedence (Enter saves, the row moves without a page load), drag
between two rows (midpoint, and the nudge 21/20 → 22/19), a refused write rolling back by reload,
live status pills that never re-sort, and Trash with its speed bump and Undo."""

from __future__ import annotations

from typing import Any

import httpx
from pageshots import accessibility_problems, screenshot
from test_issues_page import sign_in

FLEET = {"Authorization": "Bearer test-fleet-key"}


async def spawn(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    r = await http.post("/api/v1/sessions", json={"start": False, "genesis": "api", **body})
    assert r.status_code == 201, r.text
    return r.json()["session"]


async def order(page: Any, section: str) -> list[int]:
    return [int(x) for x in await page.locator(f'ol[data-section="{section}"] > li').evaluate_all(
        "rows => rows.map(r => r.dataset.session)")]


async def precedence(http: httpx.AsyncClient, sid: int) -> int:
    return int((await http.get(f"/api/v1/sessions/{sid}")).json()["precedence"])


# The rows as the page shows them, for a failure's message.
ROWS = ("() => [...document.querySelectorAll('ol[data-section] > li')]"
        ".map(r => `${r.dataset.session}@${r.dataset.precedence}`).join(' ')")


async def until(page: Any, expression: str) -> None:
    """Poll a page expression until it holds (the page's CSP forbids the eval wait_for_function uses),
    for 10 s at most: a bound, not the claim (the change takes well under a second on a quiet box)."""
    for _ in range(200):
        if await page.evaluate(f"() => Boolean({expression})"):
            return
        await page.wait_for_timeout(50)
    raise AssertionError(f"never true: {expression}; rows (session@precedence): {await page.evaluate(ROWS)}")


async def drag_below(page: Any, sid: int, onto: int) -> None:
    """Drag a row's handle down over another row (SortableJS in its pointer fallback): moving down
    across a row drops the dragged one just below it."""
    handle = page.locator(f'li[data-session="{sid}"] .handle')
    target = await page.locator(f'li[data-session="{onto}"]').bounding_box()
    box = await handle.bounding_box()
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await page.mouse.down()
    target_y = target["y"] + target["height"] * 0.75
    steps = 12
    start_y = box["y"] + box["height"] / 2
    for i in range(1, steps + 1):
        await page.mouse.move(box["x"] + box["width"] / 2, start_y + (target_y - start_y) * i / steps)
        await page.wait_for_timeout(15)
    # Sortable ignores a move over a row still animating (100 ms) from an earlier swap, and a loaded
    # box can put the last step inside that: once the animations are over, one more move on the same
    # spot has it decide from where the pointer rests.
    await page.wait_for_timeout(250)
    await page.mouse.move(box["x"] + box["width"] / 2, target_y + 1)
    await page.wait_for_timeout(50)
    await page.mouse.up()


async def test_the_ranked_page_edits_in_place(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        boss = await spawn(http, genesis="web_ui", title="typed by a human", precedence=3)
        a, b, c, d = [await spawn(http, title=f"spot {p}", precedence=p) for p in (30, 21, 20, 0)]
        page = await browser.new_page()
        await sign_in(page, base, "/ranked")
        assert await order(page, "priority") == [boss["id"]]
        assert await order(page, "spot") == [a["id"], b["id"], c["id"], d["id"]]
        assert await accessibility_problems(page) == []
        await screenshot(page, "ranked")
        await page.evaluate("window.__loaded = 'once'")  # gone if the page reloads

        # Inline precedence: Enter saves and the row moves now, with no page load.
        field = page.get_by_label(f"Precedence of session {d['id']}")
        await field.fill("25")
        await field.press("Enter")
        await until(page, f"document.querySelector('ol[data-section=spot] > li:nth-child(2)')"
                                     f".dataset.session === '{d['id']}'")
        assert await page.evaluate("window.__loaded") == "once"
        for _ in range(50):
            if await precedence(http, d["id"]) == 25:
                break
            await page.wait_for_timeout(100)
        assert await precedence(http, d["id"]) == 25

        # Drag between 21 and 20 (adjacent): the neighbours are nudged to 22 and 19, the row takes 20.
        await drag_below(page, d["id"], b["id"])
        await until(page, f"document.querySelector('li[data-session=\"{b['id']}\"]').dataset.precedence"
                                     " === '22'")
        assert await order(page, "spot") == [a["id"], b["id"], d["id"], c["id"]]
        assert [await precedence(http, x["id"]) for x in (a, b, d, c)] == [30, 22, 20, 19]
        assert await page.get_by_label(f"Precedence of session {c['id']}").input_value() == "19"
        assert await page.evaluate("window.__loaded") == "once"

        # Live status: a pill changes in place, the order does not.
        r = await http.post(f"/api/v1/sessions/{c['id']}/status", json={"status": "needs_input"})
        assert r.status_code == 200, r.text
        await page.evaluate("window.rankedRefresh()")
        await until(page, f"document.querySelector('li[data-session=\"{c['id']}\"] [data-status]')"
                                     ".textContent === 'needs_input'")
        assert await order(page, "spot") == [a["id"], b["id"], d["id"], c["id"]]

        # A refused write rolls back: the row was trashed behind the page's back while its field was
        # being edited, so the edit is refused and the page reloads the server's order. The field is
        # filled first: a live update keeps an edited field's row, and removes an untouched one (a CI
        # run archived first and the row was gone before the fill).
        stale = page.get_by_label(f"Precedence of session {a['id']}")
        await stale.fill("99")
        await http.post(f"/api/v1/sessions/{a['id']}/archive")
        async with page.expect_navigation():
            await stale.press("Enter")
        assert await order(page, "spot") == [b["id"], d["id"], c["id"]]  # archived: not in the queue filter
        assert await precedence(http, a["id"]) == 30

        # Trash: a speed bump, then the row leaves with an Undo that brings it back.
        page.once("dialog", lambda dialog: dialog.accept())
        row = page.locator(f'li[data-session="{c["id"]}"]')
        await row.get_by_label(f"Actions for session {c['id']}").click()
        await row.get_by_role("button", name="Trash").click()
        await until(page, f"!document.querySelector('li[data-session=\"{c['id']}\"]')")
        assert (await http.get(f"/api/v1/sessions/{c['id']}")).json()["status"] == "archived"
        await page.get_by_role("button", name="Undo").click()
        await until(page, f"!!document.querySelector('li[data-session=\"{c['id']}\"]')")
        assert (await http.get(f"/api/v1/sessions/{c['id']}")).json()["status"] == "needs_input"

        # Quick filters: All Priority Unarchived shows no spot queue; All shows the trash too.
        await page.get_by_role("link", name="All Priority Unarchived").click()
        assert await page.locator('ol[data-section="spot"]').count() == 0
        assert await order(page, "priority") == [boss["id"]]
        await page.get_by_role("link", name="All", exact=True).click()
        assert a["id"] in await order(page, "spot")


async def test_the_menu_works_without_script(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Every control is a form: with JavaScript off, demote and start now still work."""
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        top = await spawn(http, title="top", precedence=40)
        boss = await spawn(http, genesis="web_ui", title="boss")
        context = await browser.new_context(java_script_enabled=False)
        page = await context.new_page()
        await sign_in(page, base, "/ranked")
        row = page.locator(f'li[data-session="{boss["id"]}"]')
        await row.get_by_label(f"Actions for session {boss['id']}").click()
        await row.get_by_role("button", name="Demote to spot").click()
        assert "Demoted session" in await page.get_by_role("status").first.inner_text()
        assert await order(page, "spot") == [boss["id"], top["id"]]  # 5 above the top of the spot queue
        assert await precedence(http, boss["id"]) == 45
        await context.close()
