"""The Quotas page's accounts and the numbers that can look wrong (issue 32 #3), in headless
Chromium at 1280 and 375 px against a running stack: every account listed with its status (a
needs_reauth one flagged), each window and its reset, the reading's age (a stale one flagged);
"estimate, calibrated at …" beside every calibrated dollar figure; a budget below zero said as how
far into the reserve it went; "Running 5 of 2" flagged with why; held sessions under "Work is not
blocked" reconciled; "no reset recorded" instead of a window's length."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from pageshots import VIEWPORTS, accessibility_problems, screenshot
from test_quotas_page import FLEET, OPERATOR_API, sign_in

from zimmer_spot_gate.domain.model import Window
from zimmer_spot_gate.store import quota


def window(utilization: float, resets_in: timedelta | None) -> dict[str, Any]:
    at = None if resets_in is None else (datetime.now(UTC) + resets_in).isoformat()
    return {"utilization": utilization, "resets_at": at}


async def reading(http: httpx.AsyncClient, account: str, status: str, five: dict[str, Any] | None,
                  seven: dict[str, Any] | None, **more: Any) -> None:
    r = await http.post("/api/v1/quota/readings", json={
        "account": account, "status": status, "five_hour": five, "seven_day": seven, **more})
    assert r.status_code == 202, r.text


async def running_priority_sessions(http: httpx.AsyncClient, n: int) -> None:
    for i in range(n):
        r = await http.post("/api/v1/sessions", json={"genesis": "web_ui", "title": f"typed {i}", "prompt": "go"})
        assert r.status_code == 201 and r.json()["session"]["status"] == "running", r.text


async def lower_the_cap(base: str, to: int) -> None:
    async with httpx.AsyncClient(base_url=base, headers=OPERATOR_API) as op:
        r = await op.patch("/api/v1/spot_policy", json={"max_sessions": to})
        assert r.status_code == 200, r.text


async def held_spot_session(http: httpx.AsyncClient, reason: str) -> None:
    r = await http.post("/api/v1/sessions", json={"genesis": "api", "title": "spot work", "prompt": "sweep"})
    assert r.status_code == 201 and r.json()["turn"]["outcome"] == "held", r.text
    assert r.json()["turn"]["decision"]["reason"] == reason, r.json()["turn"]["decision"]


async def test_every_account_and_every_dollar_figure_explained(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    spot = services["spot-gate"].app
    async with spot.units.begin() as uow:  # calibrated as quota_calibration would leave it: $400 / $2,000
        await quota.save_capacity(uow.conn, Window.FIVE_HOUR, 400.0)
        await quota.save_capacity(uow.conn, Window.SEVEN_DAY, 2000.0)
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        await reading(http, "acct-1", "active", window(0.30, timedelta(hours=2)), window(0.40, timedelta(days=3)),
                      serving=True)
        await reading(http, "acct-2", "needs_reauth", window(0.95, timedelta(hours=1)), window(0.50, timedelta(days=3)),
                      read_at=two_hours_ago)
        await reading(http, "acct-3", "quota_exceeded", window(1.0, timedelta(hours=1)), window(0.60, timedelta(days=3)))
        await reading(http, "acct-4", "active", window(0.10, None), window(1.0, timedelta(days=2)))
        spot.gate.pool.invalidate()
        await running_priority_sessions(http, 5)
        await lower_the_cap(base, 2)
        # The pool averages 81.25% of its 5-hour window: $325 of $400 against a $320 spot budget.
        await held_spot_session(http, "at_utilization_limit")
        policy = (await http.get("/api/v1/spot_policy")).json()
    five = next(w for w in policy["windows"] if w["window"] == "five_hour")
    assert round(five["spot_budget_left_dollars"], 2) == -5.0 and policy["unblock"]["state"] == "not_blocked"
    assert (policy["running_slots"], policy["max_sessions"]) == (5, 2)

    page = await browser.new_page()
    await sign_in(page, base, "/quotas")
    rows = page.locator("table[data-accounts] tbody tr")
    assert await rows.evaluate_all("rs => rs.map(r => [r.dataset.account, r.dataset.status])") == [
        ["acct-1", "active"], ["acct-2", "needs_reauth"], ["acct-3", "quota_exceeded"], ["acct-4", "active"]]
    reauth = page.locator('tr[data-account="acct-2"]')
    pill = reauth.locator("[data-account-status]")
    assert await pill.inner_text() == "needs sign-in" and "bad" in (await pill.get_attribute("class") or "")
    assert "sign in again" in await reauth.locator("[data-account-note]").inner_text()
    assert await reauth.locator('[data-account-window="five_hour"]').inner_text() == "95.0%"
    assert await reauth.locator("[data-reading-age]").inner_text() == "2 h ago"
    assert (await reauth.locator("[data-stale-note]").inner_text()).startswith("Stale: older than 1 h")
    assert await page.locator('tr[data-account="acct-1"] [data-stale-note]').count() == 0  # fresh: not flagged
    assert "serving" in await page.locator('tr[data-account="acct-1"] th').inner_text()
    out = page.locator('tr[data-account="acct-3"]')
    assert "serves again at" in await out.locator("[data-back]").inner_text()
    week_spent = page.locator('tr[data-account="acct-4"]')
    assert "counted as 100%: its week is spent" in await week_spent.locator('[data-account-window="five_hour"]').inner_text()
    assert await week_spent.locator('[data-account-reset="five_hour"]').inner_text() == "no reset recorded"

    # Every dollar figure derived from calibration says it is an estimate, and when it was made.
    windows = page.locator("#windows")
    for figure in await windows.locator("td:has([data-figure])").all():
        if "$" in await figure.inner_text():
            assert (await figure.locator("[data-estimate]").inner_text()).startswith("estimate, calibrated at "), \
                await figure.inner_text()
    assert await windows.locator("[data-estimate]").count() >= 8
    for derived in await page.locator("[data-derived]").all():
        assert await derived.locator("[data-estimate]").count() == 1
    sustainable = page.locator("#gate td:has([data-figure=sustainable])").first
    assert await sustainable.locator("[data-estimate]").count() == 1
    if "$" in await page.locator("[data-sentence]").inner_text():
        assert "estimates" in await page.locator("#gate p[data-estimate]").inner_text()

    # A budget below zero: how far into the reserve, and why; never "-$5.00".
    left = windows.locator('tr[data-window="five_hour"] [data-figure="spot_budget_left"]')
    assert await left.inner_text() == "$5.00 into the priority reserve"
    assert "passed the spot budget" in await windows.locator('tr[data-window="five_hour"] [data-budget-note]').inner_text()
    assert "-$" not in await page.locator("main").inner_text()
    assert await page.locator('#gate tr:has-text("5-hour") [data-figure="sustainable"]').inner_text() == \
        "none: the spot budget is spent"

    # No burn rate measured yet: a zero burn beside five running sessions says why.
    assert (await page.locator("[data-burn-note]").first.inner_text()).startswith("Zero with 5 sessions running")

    # Running over the cap, flagged with why; the held session reconciled with the banner.
    running = page.locator('[data-figure="running"]')
    assert await running.inner_text() == "5 of 2 at once (over the cap)" and await running.get_attribute("data-over-cap") == ""
    note = await page.locator("[data-running-note]").inner_text()
    assert note.startswith("3 sessions over the cap of 2.") and "already running when it was lowered" in note
    assert "Work is not blocked." in await page.locator("[data-unblock]").inner_text()
    held = await page.locator("[data-unblock] [data-held-note]").inner_text()
    assert held.startswith("“Work is not blocked” means an account has room on both windows right now; 1 spot session")
    assert "the pool's spot budget is spent" in held
    assert await accessibility_problems(page) == []
    await screenshot(page, "quotas-accounts")
    await page.set_viewport_size(VIEWPORTS["375px"])  # a phone: each row a card, nothing off the screen
    box = await reauth.bounding_box()
    assert box is not None and box["width"] <= 375
    assert await reauth.locator("[data-stale-note]").is_visible()


async def test_uncalibrated_a_full_fleet_and_no_reset_recorded(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        await reading(http, "acct-1", "active", window(0.20, None), window(0.30, None))
        await reading(http, "acct-2", "needs_reauth", window(0.40, None), window(0.30, None))
        await running_priority_sessions(http, 2)
        await lower_the_cap(base, 1)
        await held_spot_session(http, "fleet_at_cap")
    page = await browser.new_page()
    await sign_in(page, base, "/quotas")
    assert await page.locator('tr[data-account="acct-2"] [data-account-status]').inner_text() == "needs sign-in"
    for name in ("five_hour", "seven_day"):
        row = page.locator(f'#windows tr[data-window="{name}"]')
        # The window's length is not a reset anything recorded.
        assert await row.locator('[data-figure="resets_in"]').inner_text() == "no reset recorded"
        assert "assumes the whole" in await row.locator("[data-resets-note]").inner_text()
        assert await row.locator('[data-figure="capacity"]').inner_text() == "not calibrated"
    assert await page.locator("[data-estimate]").count() == 0  # nothing calibrated: no estimate claimed
    assert "$" not in await page.locator("#windows").inner_text()
    held = await page.locator("[data-held-note]").inner_text()
    assert "1 spot session is held because every session slot is taken (2 running, cap 1)" in held
    assert (await page.locator("[data-running-note]").inner_text()).startswith("1 session over the cap of 1.")
    assert await accessibility_problems(page) == []
    await screenshot(page, "quotas-uncalibrated")
