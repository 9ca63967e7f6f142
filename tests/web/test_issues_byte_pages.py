"""The Issues page in headless Chromium when its rows are large (issue 27 #13) and its forms'
limits (issue 27 #7). Rows whose payloads together pass one bus message used to make `/issues` a
413; now each section shows the rows that fit and a "Next page" link, and following the links
shows every row exactly once. The Remove and Hold inputs take exactly what the contract takes."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import httpx
from next_pages import rows_following
from sqlalchemy import text
from test_issues_page import sign_in

from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.fields import LONG_TEXT_MAX
from zimmer_common.contracts.limits import max_length

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, stack_setup, world_in_stack  # noqa: F401 - stack_setup: the fixture

FLEET = {"Authorization": "Bearer test-fleet-key"}
BIG = 60_000  # characters of payload per row
QUEUED = 12  # 720 KB of payloads: past one answer's byte budget
STRANDED = 6


async def test_large_rows_page_by_bytes_and_the_forms_take_the_contracts_limits(stack, stack_setup, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET, timeout=30) as http:
        for n in range(1, QUEUED + 1):
            r = await http.post("/api/v1/work_backlog_items", json={
                "key": f"zimmer#{n}", "issue_url": f"https://github.com/{REPO}/issues/{n}", "estimated_cost": "small",
                "payload": {"note": "x" * BIG}})
            assert r.status_code == 201, r.text
    world = world_in_stack(services, stack_setup)
    for n in range(100, 100 + STRANDED):
        world.gh.issue(REPO, n, title=f"Issue {n}")
        item_id = await world.left_queue(n, ago=timedelta(days=30 - n % 100))
        async with world.engine.begin() as conn:
            await conn.execute(text("UPDATE backlog.work_backlog_items SET payload = jsonb_build_object('note', "
                                    "repeat('y', :n)) WHERE id = :id"), {"n": BIG, "id": item_id})
    await world.sweep()

    page = await browser.new_page()
    await sign_in(page, base, "/issues")
    assert (await page.title()) and await page.locator("#queued tbody tr").count() < QUEUED  # cut, not refused
    queued, queued_pages = await rows_following(page, "#queued tbody tr", "key", "queued")
    assert queued == [f"zimmer#{n}" for n in range(1, QUEUED + 1)] and queued_pages > 1

    await page.goto(f"{base}/issues")
    stranded, stranded_pages = await rows_following(page, "#stranded tbody tr", "key", "stranded")
    assert stranded == [f"zimmer#{n}" for n in range(100, 100 + STRANDED)] and stranded_pages > 1
    assert await page.locator("[data-page=stranded]").count() == 1  # "Showing …–… of 6"

    await page.goto(f"{base}/issues")
    assert max_length(c.RemoveItem, "reason") == max_length(c.HoldItem, "reason") == LONG_TEXT_MAX
    for form in ("remove", "hold"):
        limits = set(await page.locator(f'input[id^="{form}-"]').evaluate_all("els => els.map(e => e.maxLength)"))
        assert limits == {LONG_TEXT_MAX}, (form, limits)  # was 100,000 while the contract took 2,000
