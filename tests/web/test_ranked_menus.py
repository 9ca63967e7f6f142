"""Issue 32 #7 on the Ranked page, in headless Chromium: one ⋮ menu open at a time, closed by
Escape or a click outside; Promote asks first on a touch screen, and its notice says the promotion
started the session (it said "there is nothing to start"); a row's handle moves it with the arrow
keys (it was a dead tab stop); a refused edit says why after the reload (it reloaded silently)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
from pageshots import screenshot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from pool_readings import held_spot_session  # noqa: E402 - the gateway tests' helper, on the path just above
from test_issues_page import sign_in
from test_ranked_page import FLEET, order, precedence, spawn, until


async def menu_open(page: Any, sid: int) -> bool:
    return bool(await page.evaluate(f"() => document.querySelector('li[data-session=\"{sid}\"] details.menu').open"))


async def test_one_menu_at_a_time_and_escape_or_a_click_outside_closes_it(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        a, b = [await spawn(http, title=f"spot {p}", precedence=p) for p in (30, 20)]
        page = await browser.new_page()
        await sign_in(page, base, "/ranked")
        await page.get_by_label(f"Actions for session {a['id']}").click()
        assert await menu_open(page, a["id"])
        # The open menu covers the next row's ⋮ (the phone's mis-tap): the keyboard reaches it.
        await page.get_by_label(f"Actions for session {b['id']}").focus()
        await page.keyboard.press("Enter")
        assert await menu_open(page, b["id"]) and not await menu_open(page, a["id"])
        await page.keyboard.press("Escape")
        assert not await menu_open(page, b["id"])
        assert await page.evaluate("() => document.activeElement.getAttribute('aria-label')") == \
            f"Actions for session {b['id']}"
        await page.get_by_label(f"Actions for session {a['id']}").click()
        await page.get_by_role("heading", name="Spot queue").click()
        assert not await menu_open(page, a["id"])


async def test_promote_on_a_phone_asks_first_and_says_it_started_the_session(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        held = await held_spot_session(http)
        context = await browser.new_context(viewport={"width": 375, "height": 800}, has_touch=True, is_mobile=True)
        page = await context.new_page()
        await sign_in(page, base, "/ranked")
        row = page.locator(f'li[data-session="{held["id"]}"]')
        asked: list[str] = []

        async def decline(dialog: Any) -> None:
            asked.append(dialog.message)
            await dialog.dismiss()

        page.once("dialog", decline)
        await row.get_by_label(f"Actions for session {held['id']}").tap()
        await row.get_by_role("button", name="Promote to priority").tap()
        await until(page, "true")
        assert asked == [f"Promote session {held['id']} to priority and start it now?"]
        assert (await http.get(f"/api/v1/sessions/{held['id']}")).json()["priority_class"] == "spot"

        page.once("dialog", lambda dialog: dialog.accept())
        async with page.expect_navigation():
            await row.get_by_role("button", name="Promote to priority").tap()
        notice = await page.get_by_role("status").first.inner_text()
        assert notice == f"Made session {held['id']} priority, which started it.", notice
        after = (await http.get(f"/api/v1/sessions/{held['id']}")).json()
        assert (after["priority_class"], after["status"]) == ("priority", "running")
        await screenshot(page, "ranked-promoted-phone")
        await context.close()


async def test_the_handle_moves_its_row_with_the_arrow_keys_and_a_refusal_says_why(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        a, b, c = [await spawn(http, title=f"spot {p}", precedence=p) for p in (30, 20, 10)]
        page = await browser.new_page()
        await sign_in(page, base, "/ranked")
        await page.get_by_label(f"Move session {c['id']}: drag, or the up and down arrow keys").focus()
        await page.keyboard.press("ArrowUp")
        await until(page, f"document.querySelector('ol[data-section=spot] > li:nth-child(2)').dataset.session"
                          f" === '{c['id']}'")
        for _ in range(50):
            if await precedence(http, c["id"]) == 25:
                break
            await page.wait_for_timeout(100)
        assert await precedence(http, c["id"]) == 25  # the midpoint of 30 and 20, as a drag there
        assert await order(page, "spot") == [a["id"], c["id"], b["id"]]
        assert await page.evaluate("() => document.activeElement.classList.contains('handle')")

        # The row was trashed behind the page's back: the edit is refused, the page reloads the
        # server's order and says why.
        await http.post(f"/api/v1/sessions/{a['id']}/archive")
        stale = page.get_by_label(f"Precedence of session {a['id']}")
        await stale.fill("99")
        async with page.expect_navigation():
            await stale.press("Enter")
        alert = page.locator("[data-refused]")
        await until(page, "!document.querySelector('[data-refused]').hidden")
        said = await alert.inner_text()
        assert said.startswith("Not done: ") and "archived" in said, said
        await page.reload()
        assert await alert.is_hidden()  # said once, not on every later visit
