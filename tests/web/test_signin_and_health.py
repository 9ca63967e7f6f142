"""Sign-in, CSRF refusal, sign-out and the Health page, in headless Chromium against a running stack."""

from __future__ import annotations

from typing import Any

import httpx
from pageshots import accessibility_problems, screenshot

OPERATOR = "test-operator-token"
FLEET = "test-fleet-key"


async def sign_in(page: Any, base: str, token: str, path: str = "/health") -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(token)
    await page.get_by_role("button", name="Sign in").click()


async def test_signing_in_opens_the_health_page_with_every_service(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    page = await browser.new_page()
    await page.goto(f"{base}/health")
    assert page.url.startswith(f"{base}/signin?next=/health")  # no session: to the sign-in form
    await sign_in(page, base, OPERATOR)
    assert page.url == f"{base}/health"
    assert await page.locator("[data-overall]").get_attribute("data-overall") == "ok"
    for name in ("gateway", "backlog", "spot-gate", "sweeper", "alerts"):
        row = page.locator(f'tr[data-service="{name}"]')
        assert await row.locator("td").first.inner_text() == "up", name
    cookies = {c["name"]: c for c in await page.context.cookies()}
    session = cookies["zimmer_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict" and session["expires"] > 0
    shots = await screenshot(page, "health")
    assert all(p.stat().st_size > 0 for p in shots)
    assert await accessibility_problems(page) == []


async def test_the_fleet_key_and_a_wrong_token_open_nothing(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    page = await browser.new_page()
    await sign_in(page, base, FLEET)
    assert "fleet's API key" in await page.get_by_role("alert").inner_text()
    await sign_in(page, base, "not-the-token")
    assert "not the operator token" in await page.get_by_role("alert").inner_text()
    assert "zimmer_session" not in {c["name"] for c in await page.context.cookies()}
    await page.goto(f"{base}/health")
    assert "/signin" in page.url
    assert await accessibility_problems(page) == []
    await screenshot(page, "signin")


async def test_forms_without_this_sites_csrf_token_are_refused(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base) as http:  # a cross-site form post carries no token
        r = await http.post("/signin", data={"token": OPERATOR, "csrf": "forged"})
        assert r.status_code == 403 and "zimmer_session" not in r.cookies
    page = await browser.new_page()
    await sign_in(page, base, OPERATOR)
    session_cookie = {c["name"]: c["value"] for c in await page.context.cookies()}["zimmer_session"]
    async with httpx.AsyncClient(base_url=base, cookies={"zimmer_session": session_cookie}) as http:
        refused = await http.post("/signout", data={"csrf": "forged"})
        assert refused.status_code == 403 and "CSRF" in refused.text and "Nothing was done" in refused.text
        still = await http.get("/health", follow_redirects=False)
        assert still.status_code == 200  # the forged sign-out did nothing
    await page.get_by_role("button", name="Sign out").click()
    assert "/signin" in page.url
    await page.goto(f"{base}/health")
    assert "/signin" in page.url


async def test_a_tampered_or_foreign_cookie_is_no_session(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, cookies={"zimmer_session": "eyJyZWFsbSI6Im9wZXJhdG9yIn0.x.y"}) as http:
        r = await http.get("/health", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin")
        r = await http.get("/signin?next=//evil.example/x", follow_redirects=False)
        assert 'name="next" value="/issues"' in r.text  # an off-site `next` is never followed


async def test_the_accessibility_pass_finds_what_it_looks_for(browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    page = await browser.new_page()
    await page.set_content('<html><body><h1>A</h1><h3>skipped</h3><input name="q"><button></button></body></html>')
    assert sorted(await accessibility_problems(page)) == [
        'heading H3 "skipped" skips a level after h1', "nameless button", "no lang on <html>", "unlabelled input name=q"]
