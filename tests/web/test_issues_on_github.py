"""The Issues page's On GitHub column in headless Chromium (issue 27 #2; seed 000 "The Issues
view": "the queue in rank order joined to live GitHub issue state"): a queued row whose issue
closed reads "closed" with the age of the reading and the pull's reason to remove it; an open one
reads "open". The backlog's snapshot job reads a fake GitHub server."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from pageshots import accessibility_problems, screenshot
from test_issues_page import append, sign_in

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, stack_setup, world_in_stack  # noqa: F401 - stack_setup: the fixture

FLEET = {"Authorization": "Bearer test-fleet-key"}


async def test_a_closed_issues_queued_row_reads_closed_and_an_open_one_open(stack, stack_setup, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    world = world_in_stack(services, stack_setup)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for n in (1, 2, 3):
            world.gh.issue(REPO, n)
            await append(http, n, "small")
    await world.app.snapshot.run()
    world.gh.issues[(REPO, 2)].state = "CLOSED"
    await world.app.snapshot.run()  # a complete listing without #2: closed

    page = await browser.new_page()
    await sign_in(page, base, "/issues")
    closed = page.locator('#queued tr[data-key="zimmer#2"] td[data-github]')
    assert await closed.get_attribute("data-github") == "closed"
    words = await closed.inner_text()
    assert words.startswith("closed · ") and " ago" in words  # the age of the reading
    assert "a pull should remove it: issue_closed" in words
    assert "GitHub snapshot" in (await closed.get_attribute("title") or "")
    for n in (1, 3):
        still_open = page.locator(f'#queued tr[data-key="zimmer#{n}"] td[data-github]')
        assert await still_open.get_attribute("data-github") == "open"
        assert (await still_open.inner_text()).startswith("open · ")
        assert await still_open.locator("[data-leaves-as]").count() == 0
    assert await page.locator("#queued th", has_text="On GitHub").count() == 1
    banner = page.locator("#queued [data-queued-closed]")  # the count above the table, and its metric
    assert await banner.get_attribute("data-queued-closed") == "1"
    assert "1 queued row points at an issue GitHub shows closed" in await banner.inner_text()
    assert await accessibility_problems(page) == []
    await screenshot(page, "issues-on-github")


def test_the_cells_words() -> None:
    from datetime import UTC, datetime, timedelta

    from zimmer_common.contracts import backlog as c
    from zimmer_gateway.web.issues import on_github

    now = datetime(2026, 9, 12, 22, 1, tzinfo=UTC)
    item = c.ItemView.model_construct(github=c.IssueState(
        state="closed", read_at=now - timedelta(minutes=4), read_by="snapshot", leaves_as="issue_closed"))
    cell = on_github(item, now)
    assert cell["words"] == "closed · 4 min ago" and cell["flag"] == "a pull should remove it: issue_closed"
    assert cell["read"] == "read by the GitHub snapshot (every 10 minutes) at 2026-09-12 21:57:00 UTC"
    swept = c.ItemView.model_construct(github=c.IssueState(
        state="merged_pr", read_at=now - timedelta(hours=2), read_by="liveness"))
    assert on_github(swept, now)["words"] == "has a merged PR · 2 h ago" and on_github(swept, now)["flag"] is None
    unread = c.ItemView.model_construct(github=c.IssueState(state="unknown", read_at=None, read_by=None))
    assert on_github(unread, now)["words"] == "unknown" and on_github(unread, now)["read"] is None
    assert on_github(c.ItemView.model_construct(github=None), now)["words"] == "not read"
