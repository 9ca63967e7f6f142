"""Session logs on the operator pages, in headless Chromium against a running stack: the session
page's Timeline (newest first, verbose only when asked for, older lines a page at a time, hostile
text shown as text) and the Health page's Log Retention panel (catalog readings, not counted in
the overall status); and the REST and MCP-facing routes' refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
from pageshots import accessibility_problems, screenshot

from zimmer_common.budget import SweepBudget
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.logs import INGEST_LOGS, LOG_LINE, LogLineIn

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path.split('#')[0]}"), page.url


async def publish(services: dict[str, Any], session_id: int, lines: list[tuple[str, str]], prefix: str) -> None:
    now = datetime.now(UTC)
    await services["sweeper"].bus.publish_many([
        (INGEST_LOGS, EventEnvelope(id=f"{prefix}-{i}", type=LOG_LINE, version=1, source="runtime", occurred_at=now,
                                    data=LogLineIn(session_id=session_id, level=level, message=text, at=now)  # type: ignore[arg-type]  # the level is one of the literals
                                    .model_dump(mode="json")).model_dump_json().encode(), f"{prefix}-{i}")
        for i, (level, text) in enumerate(lines)])


async def spawn(http: httpx.AsyncClient, body: dict[str, Any]) -> int:
    """A session, as a client makes one: a 503 is retry-safe and retried (a stack just started can
    answer one while its services finish connecting); anything else but 201 fails, saying what it was."""
    import asyncio
    for _ in range(5):
        spawned = await http.post("/api/v1/sessions", json=body)
        if spawned.status_code != 503:
            break
        await asyncio.sleep(0.5)
    assert spawned.status_code == 201, spawned.text
    return int(spawned.json()["session"]["id"])


async def wait_for_lines(http: httpx.AsyncClient, session_id: int, count: int) -> None:
    import asyncio
    for _ in range(200):
        r = await http.get(f"/api/v1/sessions/{session_id}/logs", params={"level": ["verbose", "info", "error"],
                                                                          "limit": 1000})
        if r.status_code == 200 and len(r.json()["lines"]) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} lines never arrived")


async def test_the_session_page_shows_its_timeline_newest_first(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = await spawn(http, {"genesis": "web_ui", "title": "logging", "start": False})
        lines = [("info", f"step {i}") for i in range(130)] + [("verbose", "raw stdout <b>bold?</b>"),
                                                               ("error", "<script>alert(1)</script> failed")]
        await publish(services, sid, lines, f"s{sid}")
        await wait_for_lines(http, sid, 132)
        r = await http.get(f"/api/v1/sessions/{sid}/logs", params={"limit": 2, "order": "desc"})
        assert [x["message"] for x in r.json()["lines"]] == ["<script>alert(1)</script> failed", "step 129"]
    page = await browser.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    rows = page.locator("#timeline tr[data-line]")
    assert await rows.count() == 100
    assert await rows.first.get_attribute("data-level") == "error"
    assert await rows.first.locator("pre").inner_text() == "<script>alert(1)</script> failed"  # text, never markup
    assert await page.locator("#timeline tr[data-level=verbose]").count() == 0  # hidden by default
    await page.get_by_role("link", name="Older lines").click()
    assert await rows.count() == 31 and await rows.last.locator("pre").inner_text() == "step 0"
    assert await page.get_by_role("link", name="Older lines").count() == 0
    await page.goto(f"{base}/sessions/{sid}")
    await page.get_by_label("verbose").check()
    await page.get_by_label("info").uncheck()
    await page.get_by_label("error").uncheck()
    await page.get_by_label("warning").uncheck()
    await page.get_by_role("button", name="Show").last.click()
    assert [await r.locator("pre").inner_text() for r in await rows.all()] == ["raw stdout <b>bold?</b>"]
    assert await accessibility_problems(page) == []
    await screenshot(page, "session-timeline")
    await page.goto(f"{base}/sessions/{sid}?cursor=not-a-cursor")
    assert "cannot be read now" in await page.locator("[data-timeline-problem]").inner_text()
    assert await page.locator("[data-status]").inner_text() in {"waiting", "needs_input"}  # the rest of the page stands


async def test_the_health_page_shows_log_retention_outside_the_overall_status(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = await spawn(http, {"genesis": "web_ui", "title": "logging", "start": False})
        await publish(services, sid, [("verbose", f"v{i}") for i in range(40)] + [("info", "i")], "h")
        await wait_for_lines(http, sid, 41)
        await services["sweeper"].app.retention.run(SweepBudget(90))
        reading = (await http.get("/api/v1/health/log_retention")).json()
        assert reading["status"] == "ok" and reading["counts_in_overall"] is False
        assert reading["oldest_log_at"] is not None and reading["last_run_at"] is not None
    page = await browser.new_page()
    await sign_in(page, base, "/health")
    panel = page.locator("#log-retention")
    assert await panel.locator("[data-retention-status]").get_attribute("data-retention-status") == "ok"
    assert "Not counted in the overall status" in await panel.inner_text()
    assert "0 partitions dropped" in await panel.locator("[data-last-run]").inner_text()
    assert "old; kept 7 days" in await panel.locator("[data-oldest-verbose]").inner_text()
    assert await page.locator("[data-overall]").get_attribute("data-overall") == "ok"
    assert await accessibility_problems(page) == []
    await screenshot(page, "health-log-retention")


async def test_the_timeline_route_refuses_what_it_cannot_answer(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        assert (await http.get("/api/v1/sessions/999999/logs")).status_code == 404
        sid = await spawn(http, {"genesis": "api", "start": False})
        for params in ({"level": "debug"}, {"limit": 0}, {"limit": 1001}, {"order": "sideways"},
                       {"cursor": "x" * 201}):
            r = await http.get(f"/api/v1/sessions/{sid}/logs", params=params)
            assert r.status_code == 422, (params, r.text)
        r = await http.get(f"/api/v1/sessions/{sid}/logs", params={"cursor": "bm90LWEtY3Vyc29y"})
        assert r.status_code == 422 and r.json()["details"]["field"] == "cursor"  # decodes, but is not ours
        r = await http.get(f"/api/v1/sessions/{sid}/logs")
        assert r.status_code == 200 and r.json()["lines"] == [] and r.json()["levels"] == ["info", "warning", "error"]
    async with httpx.AsyncClient(base_url=base) as anonymous:
        assert (await anonymous.get(f"/api/v1/sessions/{sid}/logs")).status_code == 401
        assert (await anonymous.get("/api/v1/health/log_retention")).status_code == 401
