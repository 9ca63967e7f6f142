"""The Issues page's GitHub side in headless Chromium (seed 000 "Reading the queue as a human"):
Stranded with each row's verdict, age and Hold form; Awaiting your decision naming how many rows
are held; "In GitHub, not on the queue"; the open-issue trend; a row whose issue the snapshot
shows closed left out (#173). The backlog's sweep and snapshot read a fake GitHub server."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from pageshots import accessibility_problems, notice, screenshot
from test_issues_page import sign_in

from zimmer_common.errors import ZimmerError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, stack_setup, world_in_stack  # noqa: F401 - stack_setup: the fixture

DAY = timedelta(days=1)
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def test_stranded_awaiting_not_on_the_queue_and_the_trend(stack, stack_setup, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    world = world_in_stack(services, stack_setup)
    gh = world.gh
    for n in (173, 200, 201, 202):
        gh.issue(REPO, n, title=f"Issue {n}")
        await world.left_queue(n, ago=(12 - n % 10) * DAY)
    gh.issue(REPO, 368, title="No row at all <i>escaped</i>")
    await world.sweep()
    await world.app.snapshot.run()
    await world.hold(world.ids["zimmer#202"], "pick #202 or #203: the maintainers; laid out in #204")
    gh.issues[(REPO, 173)].state = "CLOSED"  # closed after the pass: the page leaves it out
    gh.issue(REPO, 369, title="Opened since")
    await world.app.snapshot.run()

    page = await browser.new_page()
    await sign_in(page, base, "/issues")
    stranded = page.locator("#stranded tbody tr")
    assert await stranded.evaluate_all("rows => rows.map(r => r.dataset.key)") == ["zimmer#200", "zimmer#201"]
    assert await page.locator('[data-count="stranded"]').inner_text() == "2"
    summary = await page.locator("[data-stranded-summary]").inner_text()
    assert "1 more is held for a decision" in summary and "1 left out" in summary
    row = page.locator('#stranded tr[data-key="zimmer#200"]')
    assert await row.locator("[data-verdict]").get_attribute("data-verdict") == "no_pr"
    assert "no PR has ever referenced it" in await row.locator("[data-verdict]").inner_text()
    assert await row.locator("[data-age-days]").get_attribute("data-age-days") == "12"
    assert "1 row is held" in await page.locator("[data-held-summary]").inner_text()
    assert "pick #202 or #203" in await page.locator('#awaiting tr[data-key="zimmer#202"] [data-reason]').inner_text()
    assert await page.locator("#not-on-queue li").evaluate_all("li => li.map(x => x.dataset.issue)") == [
        f"{REPO}#368", f"{REPO}#369"]
    assert "<i>" in await page.locator("#not-on-queue").inner_text()  # escaped, never markup
    assert await page.locator('#trend polyline[data-repo="acme/zimmer"]').count() == 1
    assert "acme/zimmer" in await page.locator("#trend figcaption").inner_text()
    assert await accessibility_problems(page) == []
    await screenshot(page, "issues-github-side")

    # The Hold form round trip: a refusal in words (blank reason is refused by the browser itself,
    # so send one the service refuses), then a hold that moves the row.
    await row.get_by_label("Reason for holding").fill("rule on the declined PR: the owner, see #201")
    await row.get_by_role("button", name="Hold zimmer#200 for a decision").click()
    assert "Held zimmer#200 for a decision" in await notice(page)
    assert await page.locator('#awaiting tr[data-key="zimmer#200"]').count() == 1
    assert await page.locator('[data-count="stranded"]').inner_text() == "1"
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        index = (await http.get("/api/v1/work_backlog_items", params={"status": "awaiting_decision"})).json()
    assert {i["key"] for i in index["items"]} == {"zimmer#200", "zimmer#202"}
    assert [i["held_by"] for i in index["items"] if i["key"] == "zimmer#200"] == ["operator"]
    await page.locator('#stranded tr[data-key="zimmer#201"]').get_by_label("Reason for holding").fill("x")
    await world.hold(world.ids["zimmer#201"], "held meanwhile by an agent")  # the form is now stale
    await page.locator('#stranded tr[data-key="zimmer#201"]').get_by_role("button").click()
    assert "already held" in await page.locator("main").inner_text()


async def test_a_row_github_did_not_answer_for_offers_no_hold_and_says_why(stack, stack_setup, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 32 #7: Hold was offered on an `unknown` row, where it always fails, with a message
    saying the sweep had not read the row (it had: GitHub did not answer)."""
    from sqlalchemy import text

    services, base = stack
    world = world_in_stack(services, stack_setup)
    world.gh.issue(REPO, 210, title="Issue 210")
    await world.left_queue(210, ago=12 * DAY)
    await world.sweep()
    async with world.engine.begin() as conn:  # what the pass writes when GitHub does not answer for it
        await conn.execute(text("UPDATE backlog.work_backlog_items SET liveness_state = 'unknown' WHERE id = :id"),
                           {"id": world.ids["zimmer#210"]})
    page = await browser.new_page()
    await sign_in(page, base, "/issues")
    row = page.locator('#stranded tr[data-key="zimmer#210"]')
    assert await row.get_by_role("button", name="Hold zimmer#210 for a decision").count() == 0
    said = await row.locator("[data-no-hold]").inner_text()
    assert "GitHub could not be read at the last check" in said, said
    with pytest.raises(ZimmerError) as refused:  # and the service, asked anyway, says the same
        await world.hold(world.ids["zimmer#210"], "a decision owed")
    assert "could not be read at its last liveness check" in refused.value.message
