"""Issue 32 #7 on the Ranked page, in headless Chromium: one ⋮ menu open at a time, closed by
Escape or a click outside; Promote asks first on a touch screen, and its notice says the promotion
started the session (it said "there is nothing to start"); a row's handle moves it with the arrow
keys (it was a dead tab stop); a refused edit says why after the reload (it reloaded silently).
Issue 32 #1: a row the live update inserted has all of that without a reload (the script bound its
handlers to the rows it loaded with)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from pageshots import screenshot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from pool_readings import held_spot_session  # noqa: E402 - the gateway tests' helper, on the path just above
from test_issues_page import sign_in
from test_ranked_page import FLEET, drag_below, order, precedence, spawn, until


async def menu_open(page: Any, sid: int) -> bool:
    return bool(await page.evaluate(f"() => document.querySelector('li[data-session=\"{sid}\"] details.menu').open"))



async def saved_precedence(page: Any, http: httpx.AsyncClient, session_id: int, saved: Callable[[int], bool]) -> int:
    """The session's precedence on the server once `saved` holds of it (the page's write is on its
    way), or after 5 s, whatever it is then."""
    for _ in range(50):
        value = await precedence(http, session_id)
        if saved(value):
            return value
        await page.wait_for_timeout(100)
    return await precedence(http, session_id)

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
        assert await saved_precedence(page, http, c["id"], lambda p: p == 25) == 25  # the midpoint of 30 and 20, as a drag there
        assert await order(page, "spot") == [a["id"], c["id"], b["id"]]
        assert await page.evaluate("() => document.activeElement.classList.contains('handle')")

        # The row was trashed behind the page's back while its field was being edited: the edit is
        # refused, the page reloads the server's order and says why. Filled first: a live update
        # keeps an edited field's row and removes an untouched one (a CI run archived first and
        # the row was gone before the fill).
        stale = page.get_by_label(f"Precedence of session {a['id']}")
        await stale.fill("99")
        await http.post(f"/api/v1/sessions/{a['id']}/archive")
        async with page.expect_navigation():
            await stale.press("Enter")
        alert = page.locator("[data-refused]")
        await until(page, "!document.querySelector('[data-refused]').hidden")
        said = await alert.inner_text()
        assert said.startswith("Not done: ") and "archived" in said, said
        await page.reload()
        assert await alert.is_hidden()  # said once, not on every later visit


async def test_a_row_the_live_update_inserted_has_the_menu_and_the_handle_of_a_loaded_one(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        a, b = [await spawn(http, title=f"spot {p}", precedence=p) for p in (30, 10)]
        page = await browser.new_page()
        await sign_in(page, base, "/ranked")
        await page.wait_for_selector('html[data-live-state="live"]', state="attached", timeout=15_000)
        await page.evaluate("() => { window.__notReloaded = true; }")
        c = await spawn(http, title="arrived live", precedence=20)  # inserted by live.js between a and b
        await page.wait_for_selector(f'ol[data-section="spot"] > li[data-session="{c["id"]}"]', timeout=10_000)
        assert await order(page, "spot") == [a["id"], c["id"], b["id"]]

        # Its ⋮ menu: one open at a time, Escape closes it (focus back on its ⋮), so does a click outside.
        await page.get_by_label(f"Actions for session {a['id']}").click()
        await page.get_by_label(f"Actions for session {c['id']}").click()
        assert await menu_open(page, c["id"]) and not await menu_open(page, a["id"])
        await page.keyboard.press("Escape")
        assert not await menu_open(page, c["id"])
        assert await page.evaluate("() => document.activeElement.getAttribute('aria-label')") == \
            f"Actions for session {c['id']}"
        await page.get_by_label(f"Actions for session {c['id']}").click()
        assert await menu_open(page, c["id"])
        await page.get_by_label(f"Actions for session {a['id']}").click()  # a loaded row's menu closes the new one
        assert await menu_open(page, a["id"]) and not await menu_open(page, c["id"])
        await page.get_by_role("heading", name="Spot queue").click()
        assert not await menu_open(page, a["id"])

        # Its handle: a drag moves it and saves the move, as a loaded row's does (to the end: below b's 10).
        await drag_below(page, c["id"], b["id"])
        await until(page, f"document.querySelector('ol[data-section=spot] > li:last-child').dataset.session"
                          f" === '{c['id']}'")
        assert await saved_precedence(page, http, c["id"], lambda p: p < 10) < 10
        # And its arrow keys: back up between a and b, which is their midpoint, (30 + 10) / 2.
        await page.get_by_label(f"Move session {c['id']}: drag, or the up and down arrow keys").focus()
        await page.keyboard.press("ArrowUp")
        await until(page, f"document.querySelector('ol[data-section=spot] > li:nth-child(2)').dataset.session"
                          f" === '{c['id']}'")
        assert await saved_precedence(page, http, c["id"], lambda p: p == 20) == 20
        assert await order(page, "spot") == [a["id"], c["id"], b["id"]]
        assert await page.evaluate("() => document.activeElement.classList.contains('handle')")
    assert await page.evaluate("() => window.__notReloaded === true")
