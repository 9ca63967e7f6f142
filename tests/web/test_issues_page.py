"""The Issues page in headless Chromium against a running stack: the queue in rank order with its
bands, precedences and pins, the counts as the REST index gives them, and a round trip through
every operator form (promote, pin, unpin, remove), each doing what the REST route does."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from pageshots import accessibility_problems, notice, screenshot

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}
COSTS = ["small", "medium", "large", "small"]


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url


async def append(http: httpx.AsyncClient, n: int, cost: str) -> dict[str, Any]:
    r = await http.post("/api/v1/work_backlog_items", json={
        "key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}", "estimated_cost": cost,
        "title": f"Issue {n} <b>not bold</b>"})
    assert r.status_code == 201, r.text
    return r.json()["item"]


async def rows(page: Any) -> list[tuple[str, int]]:
    keys = await page.locator("#queued tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.key, parseInt(r.querySelector('[data-precedence]').textContent)])")
    return [(k, p) for k, p in keys]


async def test_the_queue_in_rank_order_with_the_rest_indexs_counts(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for n, cost in enumerate(COSTS, 1):
            await append(http, n, cost)
        index = (await http.get("/api/v1/work_backlog_items")).json()
    page = await browser.new_page()
    await sign_in(page, base, "/issues")
    ranked = await rows(page)
    assert [k for k, _ in ranked] == [i["key"] for i in index["items"]]  # the REST index's order
    assert [p for _, p in ranked] == sorted((p for _, p in ranked), reverse=True)
    assert ranked[0] == ("zimmer#1", 6000) and ranked[1] == ("zimmer#4", 5990)  # small first, FIFO within
    for kind in ("queued", "parked"):
        assert await page.locator(f'[data-count="{kind}"]').inner_text() == str(index["counts"][kind])
    assert await page.locator('[data-count="in_flight"]').get_attribute("data-in-flight") == \
        str(index["counts"]["in_flight"])
    assert "<b>" in await page.locator('tr[data-key="zimmer#1"] .title').inner_text()  # escaped, never markup
    for later in ("Stranded", "Awaiting your decision", "In GitHub, not on the queue"):
        assert await page.get_by_role("heading", name=later).count() == 1
    assert await accessibility_problems(page) == []
    await screenshot(page, "issues")


async def test_every_operator_form_round_trips(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for n, cost in enumerate(COSTS, 1):
            await append(http, n, cost)
    page = await browser.new_page()
    await sign_in(page, base, "/issues")

    row = page.locator('tr[data-key="zimmer#3"]')  # large, at 1000: pin it above everything
    await row.get_by_label("Pin at precedence").fill("9000")
    await row.get_by_role("button", name="Pin zimmer#3").click()
    assert await notice(page) == "Pinned zimmer#3."
    assert (await rows(page))[0] == ("zimmer#3", 9000)
    assert await page.locator('tr[data-key="zimmer#3"] [data-pinned]').count() == 1

    await page.locator('tr[data-key="zimmer#3"]').get_by_role("button", name="Unpin zimmer#3").click()
    assert "Unpinned zimmer#3" in await notice(page)
    assert dict(await rows(page))["zimmer#3"] == 1000  # back into its band

    bad = page.locator('tr[data-key="zimmer#2"]')
    await bad.get_by_label("Pin at precedence").fill("ten")
    await bad.get_by_role("button", name="Pin zimmer#2").click()  # the browser refuses to send it
    assert await notice(page) == "Unpinned zimmer#3; it moved back into its band if " \
                                 "it was outside it."
    # The server refuses it too, naming the field, with nothing done; and a precedence past int32.
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    cookie = {c["name"]: c["value"] for c in await page.context.cookies()}["zimmer_session"]
    item_id = await bad.get_attribute("data-id")
    async with httpx.AsyncClient(base_url=base, cookies={"zimmer_session": cookie}) as http:
        for value, why in (("ten", "not a whole number"), ("99999999999", "precedence")):
            r = await http.post(f"/issues/{item_id}/pin", data={"csrf": csrf, "precedence": value})
            assert r.status_code == 422 and why in r.text and "Nothing was done" in r.text, r.text
        forged = await http.post(f"/issues/{item_id}/pin", data={"csrf": "forged", "precedence": "1"})
        assert forged.status_code == 403 and "CSRF" in forged.text
    await page.goto(f"{base}/issues")
    assert await page.locator('tr[data-key="zimmer#2"] [data-pinned]').count() == 0

    row = page.locator('tr[data-key="zimmer#2"]')
    await row.get_by_label("Reason for removing").fill("duplicate of zimmer#1, judged by hand")
    await row.get_by_role("button", name="Remove zimmer#2").click()
    assert await notice(page) == "Removed zimmer#2."
    assert "zimmer#2" not in dict(await rows(page))

    await page.locator('tr[data-key="zimmer#4"]').get_by_role("button", name="Promote zimmer#4").click()
    assert "Started zimmer#4 now as a priority session" in await notice(page)
    assert "zimmer#4" not in dict(await rows(page))
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        removed = (await http.get("/api/v1/work_backlog_items", params={"status": "removed"})).json()["items"]
        assert [(i["key"], i["removed_by"], i["removal_reason"]) for i in removed] == [
            ("zimmer#2", "operator", "duplicate of zimmer#1, judged by hand")]
        started = (await http.get("/api/v1/work_backlog_items", params={"status": "started"})).json()["items"]
        assert [i["key"] for i in started] == ["zimmer#4"] and started[0]["started_session_id"]
    for _ in range(100):  # the in-flight section follows spot-gate's session events (10 s at most)
        await page.goto(f"{base}/issues")
        if await page.locator('#in-flight tr[data-key="zimmer#4"]').count():
            break
        await asyncio.sleep(0.1)
    assert await page.locator('#in-flight tr[data-key="zimmer#4"]').count() == 1
    await screenshot(page, "issues-after-actions")


async def test_forms_need_the_session_and_its_csrf_token(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        item = await append(http, 1, "small")
        # The fleet key is no session: the page form sends it to sign in, and nothing is removed.
        r = await http.post(f"/issues/{item['id']}/remove", data={"reason": "x", "csrf": "x"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin")
        assert (await http.get("/api/v1/work_backlog_items")).json()["counts"]["queued"] == 1
