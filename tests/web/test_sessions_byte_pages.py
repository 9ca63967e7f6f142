"""The session pages in headless Chromium when their rows are large (issue 27 #13): a dozen
sessions with 90,000-character prompts, or a dozen enqueued messages as large, pass one bus
message. The Sessions list used to be a 413 refusal; now it shows the sessions that fit and an
"Older" link, and following it shows every session exactly once. The Ranked page and its live
status pills ask for every row and get them all, page after page; a session page shows the
enqueued messages that fit and an "Older messages" link."""

from __future__ import annotations

import httpx
from next_pages import rows_following
from test_issues_page import sign_in
from test_sessions_and_costs_pages import held_spot_session

FLEET = {"Authorization": "Bearer test-fleet-key"}
ROWS = 12
BIG = 90_000  # characters of each prompt: 12 of them are 1.08 MB, past one bus message


async def test_large_sessions_page_by_bytes_on_every_page_that_lists_them(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET, timeout=30) as http:
        made = []
        for n in range(1, ROWS + 1):
            r = await http.post("/api/v1/sessions", json={"start": False, "genesis": "api", "title": f"large {n}",
                                                           "prompt": "x" * BIG})
            assert r.status_code == 201, r.text
            made.append(r.json()["session"]["id"])

    page = await browser.new_page()
    await sign_in(page, base, "/sessions")
    assert 1 <= await page.locator("tr[data-session]").count() < ROWS  # cut, not refused
    assert await page.locator("[data-total]").get_attribute("data-total") == str(ROWS)
    found, pages = await rows_following(page, "tr[data-session]", "session", "sessions")
    ids = [int(i) for i in found]
    assert ids == list(reversed(made)) and pages > 1  # every session once, newest first

    shown = await page.goto(f"{base}/ranked")
    assert shown is not None and shown.status == 200, shown and shown.status
    spot = [int(x) for x in await page.locator('ol[data-section="spot"] > li').evaluate_all(
        "rows => rows.map(r => r.dataset.session)")]
    assert sorted(spot) == sorted(made)  # the whole queue, read page after page
    pills = await page.request.get(f"{base}/ranked/statuses?ids={','.join(map(str, made))}")
    assert pills.status == 200 and set(await pills.json()) == {str(i) for i in made}, await pills.text()


async def test_large_enqueued_messages_page_by_bytes_on_the_session_page(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET, timeout=30) as http:
        session = await held_spot_session(http)
        for _ in range(ROWS):
            r = await http.post(f"/api/v1/sessions/{session['id']}/turns", json={"kind": "follow_up",
                                                                                 "prompt": "y" * BIG})
            assert r.status_code == 202 and r.json()["outcome"] == "queued", r.text
        every = (await http.get(f"/api/v1/sessions/{session['id']}/enqueued_messages", params={"limit": 2})).json()

    page = await browser.new_page()
    await sign_in(page, base, f"/sessions/{session['id']}")
    assert 1 <= await page.locator("tr[data-message]").count() < ROWS  # cut, not refused
    found, pages = await rows_following(page, "tr[data-message]", "message", "enqueued")
    ids = [int(i) for i in found]
    assert len(ids) == ROWS and ids == sorted(set(ids), reverse=True) and pages > 1  # each once, newest first
    assert ids[:2] == [m["id"] for m in every["messages"]]
    assert await page.locator("[data-precedence]").count() == 1  # still the whole session page
