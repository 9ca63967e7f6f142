"""The Sessions and Costs pages in headless Chromium against a running stack: the list and its
class/genesis filters, a held session's banner and "Make this session priority" starting it, the
Scheduling class and precedence forms, gate decisions; the spend totals as get_costs gives them."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pageshots import accessibility_problems, notice, screenshot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from pool_readings import held_spot_session  # the gateway tests' helper

from zimmer_common.contracts.runtime import INGEST_SPEND, SpendReport

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url


async def test_a_held_session_shows_its_banner_and_the_button_starts_it(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        session = await held_spot_session(http)
        other = await http.post("/api/v1/sessions", json={"genesis": "web_ui", "title": "typed by a human"})
        assert other.status_code == 201
        queued = await http.post(f"/api/v1/sessions/{session['id']}/turns", json={"kind": "follow_up",
                                                                                  "prompt": "and <i>this</i>"})
        assert queued.status_code == 202 and queued.json()["session"]["enqueued_messages"] == 1, queued.text
        messages = (await http.get(f"/api/v1/sessions/{session['id']}/enqueued_messages")).json()["messages"]
        assert [(m["turn_kind"], m["prompt"], m["delivered_at"]) for m in messages] == [
            ("follow_up", "and <i>this</i>", None)]
    page = await browser.new_page()
    await sign_in(page, base, "/sessions")
    listed = await page.locator("tr[data-session]").evaluate_all("rows => rows.map(r => r.dataset.session)")
    assert set(listed) == {str(session["id"]), str(other.json()["session"]["id"])}
    await page.get_by_label("Class", exact=True).select_option("spot")
    await page.get_by_role("button", name="Show").click()
    assert await page.locator("tr[data-session]").evaluate_all("rows => rows.map(r => r.dataset.session)") == [
        str(session["id"])]
    assert await accessibility_problems(page) == []
    await screenshot(page, "sessions")

    await page.get_by_role("link", name=str(session["id"]), exact=True).click()
    assert await page.get_by_role("heading", name="Held for quota headroom").count() == 1
    banner = await page.locator("[data-hold]").inner_text()
    assert "Reason: quota headroom (at_utilization_limit)" in banner  # in words, the code beside for the logs
    assert "The queued prompt is still coming." in banner
    assert await page.locator("#decisions tr[data-decision]").count() == 1
    waiting = await page.locator("#enqueued tr[data-message]").inner_text()
    assert "and <i>this</i>" in waiting and "waiting for the next turn boundary" in waiting
    assert await accessibility_problems(page) == []
    await screenshot(page, "session-held")
    await page.get_by_role("button", name="Make this session priority").click()
    assert await notice(page) == "Made this session priority."
    assert await page.locator("[data-hold]").count() == 0
    assert await page.locator("[data-class]").inner_text() == "priority (set on the session)"
    assert await page.locator("[data-status]").inner_text() == "running"  # promoted: started now

    await page.get_by_label("Precedence").fill("250")
    await page.get_by_role("button", name="Change precedence").click()
    assert await page.locator("[data-precedence]").inner_text() == "250"
    await page.get_by_label("Scheduling class").select_option("derive")
    await page.get_by_role("button", name="Change class").click()
    assert await page.locator("[data-class]").inner_text() == "spot (derived from its genesis)"
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        now = (await http.get(f"/api/v1/sessions/{session['id']}")).json()
    assert (now["precedence"], now["scheduling_class"], now["priority_class"]) == (250, None, "spot")


async def test_costs_show_get_costs_figures(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The spend totals as get_costs gives them, Claude and Codex apart (issue 25 #4), and how each
    model seen is priced: an unknown one "unknown model, priced as X" (#3)."""
    services, base = stack
    bus = services["gateway"].bus
    now = datetime.now(UTC)
    for i, (harness, model) in enumerate((("claude_code", "claude-opus-4"), ("codex", "gpt-5-codex"),
                                          ("claude_code", "default"))):
        spend = SpendReport(request_id=f"req-{i}", session_id=None, harness=harness, model=model,
                            output_tokens=1_000_000, at=now)
        await bus.publish_event(INGEST_SPEND, "spend", spend, event_id=f"spend-{i}")
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for _ in range(100):
            costs = (await http.get("/api/v1/costs")).json()
            if len(costs["models"]) == 3:
                break
            await asyncio.sleep(0.1)
    # 1M output tokens each, at list price: Opus 4 $75, gpt-5-codex $10, "default" the dearest ($75).
    assert (costs["spend_five_hour_claude_dollars"], costs["spend_five_hour_codex_dollars"]) == (150.0, 10.0)
    page = await browser.new_page()
    await sign_in(page, base, "/costs")
    assert await page.locator('[data-figure="spend_five_hour_dollars"]').inner_text() == "$160.00"
    assert await page.locator('[data-figure="spend_five_hour_claude_dollars"]').inner_text() == "$150.00"
    assert await page.locator('[data-figure="spend_five_hour_codex_dollars"]').inner_text() == "$10.00"
    assert await page.locator('[data-figure="spend_seven_day_dollars"]').inner_text() == \
        f"${costs['spend_seven_day_dollars']:,.2f}"
    assert await page.locator('[data-model="default"] [data-price-note]').inner_text() == \
        "unknown model, priced as claude-opus-4-1 (the dearest known price)"
    assert await page.locator('[data-model="gpt-5-codex"] [data-price-note]').inner_text() == "priced as gpt-5"
    assert "No burn rate yet" in await page.locator("#burn").inner_text()  # the recompute has not run
    assert await accessibility_problems(page) == []
    await screenshot(page, "costs")


async def test_a_paused_session_shows_its_banner_and_quotas_counts_it(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "What a pause does": the session page's "Paused mid-run for quota headroom" banner
    with "Make this session priority"; the spot gate card counts what the ceiling paused."""
    services, base = stack
    now = datetime.now(UTC)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        async def reading(utilization: float) -> None:
            r = await http.post("/api/v1/quota/readings", json={
                "account": "acct-1", "status": "active",
                "five_hour": {"utilization": utilization, "resets_at": (now + timedelta(hours=2)).isoformat()},
                "seven_day": {"utilization": 0.2, "resets_at": (now + timedelta(days=3)).isoformat()}})
            assert r.status_code == 202
            services["spot-gate"].app.gate.pool.invalidate()
        await reading(0.1)
        spawned = await http.post("/api/v1/sessions", json={"genesis": "api", "title": "spot work", "prompt": "go"})
        sid = spawned.json()["session"]["id"]
        assert spawned.json()["session"]["status"] == "running"
        await reading(0.97)
        report = await services["spot-gate"].app.ceiling.run()
        assert report.paused == [sid]
        await http.post(f"/api/v1/sessions/{sid}/status", json={"status": "needs_input"})
    page = await browser.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    assert await page.get_by_role("heading", name="Paused mid-run for quota headroom").count() == 1
    sentence = await page.locator("[data-pause-sentence]").inner_text()
    assert "5-hour" in sentence and "5 points more headroom" in sentence
    assert await page.locator("[data-status]").inner_text() == "waiting"
    assert await accessibility_problems(page) == []
    await screenshot(page, "session-paused")
    await page.goto(f"{base}/quotas")
    assert await page.locator('[data-figure="paused.at_utilization_limit"]').inner_text() == "1"
    assert await page.locator('[data-figure="paused.user_spot_queue"]').inner_text() == "0"
    await page.goto(f"{base}/sessions/{sid}")
    await page.get_by_role("button", name="Make this session priority").click()
    assert await notice(page) == "Made this session priority."
    await services["spot-gate"].app.ceiling.run()  # the next sweep resumes it, whatever the windows say
    await page.reload()
    assert await page.locator("[data-pause]").count() == 0
    assert await page.locator("[data-status]").inner_text() == "running"


async def test_the_web_restart_consumes_a_wall_clock_pause(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The API's restart refuses while the pause is ahead; the web Restart takes the session over."""
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = (await http.post("/api/v1/sessions", json={"genesis": "web_ui", "start": False})).json()["session"]["id"]
        until = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
        assert (await http.post(f"/api/v1/sessions/{sid}/pause_until", json={"until": until})).status_code == 200
        assert (await http.post(f"/api/v1/sessions/{sid}/restart")).status_code == 409
    page = await browser.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    assert await page.locator("[data-wake]").count() == 1
    await page.get_by_role("button", name="Restart").click()
    assert await notice(page) == "Restarted: its turn went to the gate."
    assert await page.locator("[data-wake]").count() == 0
    assert await page.locator("[data-status]").inner_text() == "running"
