"""The chat-bubble Quick Router and the mobile joystick's petal (seed 004 "The Quick Router's spot
opt-in", issue 32 #2), in headless Chromium against a running stack: the bubble opens a labelled
dialog on a page that is not Ranked, both submit paths read Run as spot (the result read back over
REST: class, genesis, precedence, parent), closing the panel clears the tick and keeps the prompt,
a session's page threads the new session under it while declaring web_ui, the joystick's petal
at 375 px opens the same panel, and without script the bubble is a link to the same form on a
page, a refusal re-rendered beside the field with what was typed kept."""

from __future__ import annotations

import re
from typing import Any

import httpx
from a11y_checks import axe_violations
from pageshots import VIEWPORTS, accessibility_problems, notice, screenshot

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def opened(browser: Any, base: str, path: str, viewport: str, script: bool = True) -> Any:
    """A signed-in page at `path` (the CSP bypassed so axe-core can be injected)."""
    context = await browser.new_context(viewport=VIEWPORTS[viewport], java_script_enabled=script, bypass_csp=True)
    page = await context.new_page()
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url
    return page


async def spawned(http: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    r = await http.post("/api/v1/sessions", json=fields)
    assert r.status_code == 201, r.text
    return r.json()["session"]  # type: ignore[no-any-return]  # JSON


async def made_with_prompt(http: httpx.AsyncClient, prompt: str) -> list[dict[str, Any]]:
    listed = (await http.get("/api/v1/sessions", params={"limit": 500})).json()["sessions"]
    return [(await http.get(f"/api/v1/sessions/{s['id']}")).json() for s in listed if s["prompt"] == prompt]


def facts(s: dict[str, Any]) -> tuple[Any, ...]:
    return s["genesis"], s["scheduling_class"], s["priority_class"], s["parent_session_id"]


async def focused(page: Any) -> str:
    return str(await page.evaluate("() => document.activeElement.id || document.activeElement.className"))


async def test_the_bubble_on_a_session_page_threads_under_it_declares_web_ui_and_reads_the_tick(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        parent = await spawned(http, genesis="schedule", title="a nightly sweep", precedence=40, start=False)
        assert parent["priority_class"] == "spot"
        top = await spawned(http, genesis="schedule", title="automated", precedence=500, start=False)
        page = await opened(browser, base, f"/sessions/{parent['id']}", "desktop")
        bubble = page.get_by_role("link", name="Quick Router")
        assert await page.get_by_role("dialog").count() == 0  # drawn only when opened
        await bubble.click()
        dialog = page.get_by_role("dialog", name="Quick Router")
        await dialog.wait_for()
        assert await focused(page) == "bubble-prompt"
        assert await dialog.get_by_label("Run as spot").is_checked() is False  # unticked by default
        assert "Threads under session" in await dialog.inner_text()
        assert await axe_violations(page) == [] and await accessibility_problems(page) == []

        # Unticked: no class; web_ui declared although the parent is schedule work (spot); just above its parent.
        await dialog.get_by_label("Prompt").fill("a question about this sweep")
        await dialog.get_by_role("button", name="Submit", exact=True).click()
        await page.wait_for_url(re.compile(rf"/sessions/{parent['id']}\?quick=\d+$"))
        assert "from the Quick Router" in await notice(page)
        [child] = await made_with_prompt(http, "a question about this sweep")
        assert facts(child) == ("web_ui", None, "priority", parent["id"])
        assert child["precedence"] == parent["precedence"] + 1

        # Escape, the X and the backdrop each close it: the tick is cleared, the half-typed prompt kept.
        for close in ("Escape", "X", "backdrop"):
            await page.get_by_role("link", name="Quick Router").click()
            await dialog.wait_for()
            await dialog.get_by_label("Prompt").fill(f"half typed ({close})")
            await dialog.get_by_label("Run as spot").check()
            if close == "Escape":
                await page.keyboard.press("Escape")
            elif close == "X":
                await dialog.get_by_role("button", name="Close the Quick Router").click()
            else:
                await page.mouse.click(5, 5)
            await dialog.wait_for(state="hidden")
            assert await focused(page) == "quick-bubble", close  # focus back on the bubble
            await page.get_by_role("link", name="Quick Router").click()
            assert await dialog.get_by_label("Run as spot").is_checked() is False, close
            assert await dialog.get_by_label("Prompt").input_value() == f"half typed ({close})", close
            await page.keyboard.press("Escape")

        # Ticked, Submit & Open: spot, SLOT_GAP above the top of the spot queue, still threaded, still web_ui.
        await page.get_by_role("link", name="Quick Router").click()
        await dialog.get_by_label("Prompt").fill("a long unattended follow-up")
        await dialog.get_by_label("Run as spot").check()
        await screenshot(page, "quick-bubble-panel")
        await page.set_viewport_size(VIEWPORTS["desktop"])
        await dialog.get_by_role("button", name="Submit & Open").click()
        await page.wait_for_url(re.compile(r"/sessions/\d+\?done=routed"))
        [spot] = await made_with_prompt(http, "a long unattended follow-up")
        assert page.url.startswith(f"{base}/sessions/{spot['id']}?")
        assert facts(spot) == ("web_ui", "spot", "spot", parent["id"])
        assert spot["precedence"] > top["precedence"]


async def test_the_joystick_petal_opens_the_same_panel_at_phone_width(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        top = await spawned(http, genesis="schedule", title="automated", precedence=300, start=False)
        page = await opened(browser, base, "/issues", "375px")
        assert await page.locator("a.quick-bubble").is_visible() is False  # the bubble is part of the joystick here
        await page.locator("[data-joystick] > summary").click()
        joystick = page.get_by_role("navigation", name="Joystick")
        for petal in ("Issues", "Ranked", "Sessions", "Quotas", "Health"):
            assert await joystick.get_by_role("link", name=petal, exact=True).is_visible(), petal
        assert await axe_violations(page) == [] and await accessibility_problems(page) == []
        await screenshot(page, "quick-bubble-joystick")
        await page.set_viewport_size(VIEWPORTS["375px"])
        await joystick.get_by_role("link", name="Quick Router").click()
        dialog = page.get_by_role("dialog", name="Quick Router")
        await dialog.wait_for()
        assert await focused(page) == "bubble-prompt"
        assert await axe_violations(page) == []
        await dialog.get_by_label("Prompt").fill("sweep the docs for dead links")
        await dialog.get_by_label("Run as spot").check()
        await dialog.get_by_role("button", name="Submit", exact=True).click()
        await page.wait_for_url(re.compile(r"/issues\?quick=\d+&quick_class=spot$"))
        assert "as spot, at the top of the spot queue" in await notice(page)
        [made] = await made_with_prompt(http, "sweep the docs for dead links")
        assert facts(made) == ("web_ui", "spot", "spot", None)
        assert made["precedence"] > top["precedence"]
        # A fresh page: the panel's box starts unticked again.
        await page.locator("[data-joystick] > summary").click()
        await joystick.get_by_role("link", name="Quick Router").click()
        assert await dialog.get_by_label("Run as spot").is_checked() is False


async def test_without_script_the_bubble_is_a_link_to_the_same_form_and_a_refusal_keeps_what_was_typed(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        parent = await spawned(http, genesis="web_ui", title="talk to me", precedence=7, start=False)
        page = await opened(browser, base, f"/sessions/{parent['id']}", "desktop", script=False)
        await page.get_by_role("link", name="Quick Router").click()
        await page.wait_for_url(re.compile(r"/quick\?"))
        assert await accessibility_problems(page) == []
        assert await page.get_by_role("link", name="Quick Router").count() == 0  # no bubble over its own form
        long_prompt = "x" * 100_001
        await page.get_by_label("Prompt").fill(long_prompt)
        await page.get_by_label("Run as spot").check()
        await page.get_by_role("button", name="Submit", exact=True).click()
        await page.wait_for_selector("[data-field-error=bubble]")
        said = await page.locator("[data-field-error=bubble]").inner_text()
        assert "Prompt is too long: at most 100,000 characters" in said, said
        assert await page.get_by_label("Prompt").input_value() == long_prompt
        assert await page.get_by_label("Run as spot").is_checked()
        assert await made_with_prompt(http, long_prompt) == []
        assert await accessibility_problems(page) == []

        await page.get_by_label("Prompt").fill("and one more thing")
        await page.get_by_label("Run as spot").uncheck()
        await page.get_by_role("button", name="Submit", exact=True).click()
        await page.wait_for_url(re.compile(rf"/sessions/{parent['id']}\?quick=\d+$"))
        assert "from the Quick Router" in await notice(page)
        [child] = await made_with_prompt(http, "and one more thing")
        assert facts(child) == ("web_ui", None, "priority", parent["id"])
        assert child["precedence"] == 8
