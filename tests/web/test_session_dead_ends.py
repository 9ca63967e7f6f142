"""A session's page and the lists of sessions without dead ends (issue 32 #6), in headless
Chromium against a running stack: the session page shows its prompt, goal, backlog item, spend,
clone and transcript; why a session waits (held and why, parked, paused mid-run, paused until) is
a pill wherever its status shows; moments read in the reader's zone with UTC on hover, and in UTC
(said so) without script; a refused form comes back as it was typed, the refusal beside it, and
Back goes to the session it came from."""

from __future__ import annotations

import asyncio
import io
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pageshots import accessibility_problems, screenshot
from test_issues_page import append, sign_in

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
from pool_readings import readings  # the gateway tests' helper

from zimmer_common import objects
from zimmer_common.contracts.clones import INGEST_CLONE, CloneReport
from zimmer_common.contracts.disk import TRANSCRIPT_BUCKET, session_transcript_object
from zimmer_common.contracts.runtime import INGEST_SPEND, SpendReport

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
ZIP = b"PK\x05\x06" + b"\0" * 18  # an empty zip: what the archive stored


async def test_the_session_page_shows_its_work(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    bus = services["gateway"].bus
    now = datetime.now(UTC)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        item = await append(http, 7, "small")
        async with httpx.AsyncClient(base_url=base, headers=OPERATOR) as op:
            sid = (await op.post(f"/api/v1/work_backlog_items/{item['id']}/start_now")).json()["session_id"]
        for i, at in enumerate((now - timedelta(hours=2, minutes=18), now)):  # $75 each at list price
            await bus.publish_event(INGEST_SPEND, "spend", SpendReport(
                request_id=f"work-{i}", session_id=sid, harness="claude_code", model="claude-opus-4",
                output_tokens=1_000_000, at=at), event_id=f"work-{i}")
        await bus.publish_event(INGEST_CLONE, "clone", CloneReport(
            session_id=sid, clone_path=f"/srv/clones/zimmer-main-{sid}", host="host-a"), event_id=f"clone-{sid}")
        store = await objects.open_bucket(bus.js, TRANSCRIPT_BUCKET)
        await objects.put_file(store, session_transcript_object(sid), io.BytesIO(ZIP))
        for _ in range(100):
            view = (await http.get(f"/api/v1/sessions/{sid}")).json()
            if view["spend"] and view["spend"]["reports"] == 2 and view["clone_path"]:
                break
            await asyncio.sleep(0.1)
    page = await browser.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    work = page.locator("#work")
    assert await work.locator("[data-goal]").inner_text() == view["goal"] and view["goal"]
    assert view["prompt"] and "https://github.com/acme/zimmer/issues/7" in view["prompt"]
    assert await work.locator("[data-prompt]").inner_text() == view["prompt"]
    spend = await work.locator("[data-spend]").inner_text()
    assert spend.startswith("$150.00 at list price, 2 reports") and "over 2 h 18 min" in spend, spend
    assert await work.locator("[data-clone]").inner_text() == f"/srv/clones/zimmer-main-{sid} on host-a"
    transcript = work.locator("[data-transcript] a")
    async with page.expect_download() as download:
        await transcript.click()
    assert Path(await (await download.value).path()).read_bytes() == ZIP
    assert "22 Bytes" in await work.locator("[data-transcript]").inner_text()
    assert await accessibility_problems(page) == []
    await screenshot(page, "session-its-work")
    await work.get_by_role("link", name="zimmer#7").click()  # the backlog row it was started from
    await page.wait_for_url(f"{base}/issues#item-{item['id']}")
    assert await page.locator(f"#in-flight tr#item-{item['id']}").count() == 1


async def waiting_sessions(services: dict[str, Any], base: str) -> dict[str, int]:
    """One spot session each: paused mid-run by the ceiling, parked in the spot queue, paused until
    tomorrow, held at the gate."""
    made = {}
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        await readings(services, 0.1)
        for name in ("paused", "parked"):
            r = await http.post("/api/v1/sessions", json={"genesis": "api", "title": name, "prompt": "go"})
            assert r.json()["session"]["status"] == "running", r.text
            made[name] = r.json()["session"]["id"]
        r = await http.post(f"/api/v1/sessions/{made['parked']}/pause_into_spot_queue", json={})
        assert r.status_code == 200, r.text
        made["until"] = (await http.post("/api/v1/sessions", json={
            "genesis": "api", "title": "until", "start": False})).json()["session"]["id"]
        until = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        assert (await http.post(f"/api/v1/sessions/{made['until']}/pause_until", json={"until": until})).status_code == 200
        await readings(services, 0.97)
        services["spot-gate"].app.gate.pool.invalidate()
        assert (await services["spot-gate"].app.ceiling.run()).paused == [made["paused"]]
        r = await http.post("/api/v1/sessions", json={"genesis": "api", "title": "held", "prompt": "go"})
        assert r.json()["turn"]["outcome"] == "held", r.text
        made["held"] = r.json()["session"]["id"]
    return made


PILLS = {"paused": ("paused", "paused mid-run for quota headroom"), "parked": ("parked", "parked in the spot queue"),
         "until": ("paused_until", "paused until"), "held": ("held", "held: quota headroom")}


async def test_why_a_session_waits_is_a_pill_wherever_its_status_shows(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    made = await waiting_sessions(services, base)
    page = await browser.new_page()
    await sign_in(page, base, "/sessions")
    for name, sid in made.items():
        kind, words = PILLS[name]
        pill = page.locator(f'tr[data-session="{sid}"] [data-wait]')
        assert (await pill.get_attribute("data-wait"), (await pill.inner_text()).startswith(words)) == (kind, True), name
    await screenshot(page, "sessions-pills")
    await page.goto(f"{base}/ranked?filter=all")
    for name, sid in made.items():
        kind, words = PILLS[name]
        pill = page.locator(f'li[data-session="{sid}"] [data-wait]')
        assert await pill.get_attribute("data-wait") == kind and (await pill.inner_text()).startswith(words), name
    # The live pills follow: the held session made priority starts, and its pill goes on the next poll.
    async with httpx.AsyncClient(base_url=base, headers=OPERATOR) as op:
        r = await op.patch(f"/api/v1/sessions/{made['held']}", json={"scheduling_class": "priority"})
        assert r.status_code == 200, r.text
    await page.evaluate("window.rankedRefresh()")
    await page.wait_for_function(f"!document.querySelector('li[data-session=\"{made['held']}\"] [data-wait]')")
    assert await page.locator(f'li[data-session="{made["held"]}"] [data-status]').inner_text() == "running"
    assert await accessibility_problems(page) == []
    await screenshot(page, "ranked-pills")
    for name in ("paused", "parked", "until"):
        await page.goto(f"{base}/sessions/{made[name]}")
        kind, words = PILLS[name]
        assert await page.locator("#session [data-wait]").get_attribute("data-wait") == kind
    assert await page.locator("#session [data-wait] time").count() == 1  # paused until: when
    await screenshot(page, "session-paused-until-pill")


async def test_moments_read_in_the_readers_zone_and_in_utc_without_script(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]["id"]
        until = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
        assert (await http.post(f"/api/v1/sessions/{sid}/pause_until", json={"until": until.isoformat()})).status_code == 200
    context = await browser.new_context(timezone_id="America/New_York", locale="en-US")
    page = await context.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    times = page.locator("main time")
    assert await times.count() >= 3
    for at in await times.evaluate_all("ts => ts.map(t => [t.dateTime, t.title, t.textContent])"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", at[0]), at  # the instant, in UTC
        assert at[1].endswith(" UTC") and at[2].endswith("(America/New_York)"), at  # local; UTC on hover
    wake = page.locator("#wake-heading time")
    assert await wake.get_attribute("title") == "2031-01-02 03:04:05 UTC"
    assert await wake.inner_text() == "Jan 1, 2031, 10:04 PM (America/New_York)"  # one zone on the screen
    await screenshot(page, "session-local-times")
    await context.close()
    bare = await browser.new_context(java_script_enabled=False)
    page = await bare.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    assert await page.locator("#wake-heading time").inner_text() == "2031-01-02 03:04:05 UTC"  # said as UTC
    await bare.close()


async def test_a_refused_session_form_comes_back_as_typed_and_back_goes_to_the_session(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]["id"]
    page = await browser.new_page()
    await sign_in(page, base, f"/sessions/{sid}")
    await page.get_by_label("Precedence").fill("99999999999")
    async with page.expect_response(lambda r: r.url.endswith("/precedence") and r.request.method == "POST") as answer:
        await page.get_by_role("button", name="Change precedence").click()
    assert (await answer.value).status == 422
    field = page.get_by_label("Precedence")
    assert await field.input_value() == "99999999999" and await field.get_attribute("aria-invalid") == "true"
    assert await page.locator('[data-field-error="precedence"]').inner_text() == \
        "Precedence must be at most 2,147,483,647. Nothing was done."
    assert await page.get_by_role("heading", level=1).inner_text() == f"Session {sid}"
    assert await accessibility_problems(page) == []
    await screenshot(page, "session-refused-precedence")

    # Delete unticked (a script could send it): the page again, the refusal beside the box.
    await page.goto(f"{base}/sessions/{sid}")
    await page.locator("input[name=confirm]").evaluate("box => box.required = false")
    await page.get_by_role("button", name="Delete this session").click()
    assert "Tick the box to confirm" in await page.locator('[data-field-error="delete"]').inner_text()
    assert await page.locator("input[name=confirm]").get_attribute("aria-invalid") == "true"

    # A form whose CSRF token is not this session's is refused before anything runs; Back goes to
    # the session page it was posted from, not to Issues.
    await page.goto(f"{base}/sessions/{sid}")
    await page.locator("#trash input[name=csrf]").evaluate("i => i.value = 'forged'")
    await page.get_by_role("button", name=f"Trash session {sid}").click()
    back = page.locator("[data-back]")
    assert await back.inner_text() == f"Back to Session {sid}"
    await back.click()
    await page.wait_for_url(f"{base}/sessions/{sid}")


async def test_without_script_a_refused_ranked_edit_comes_back_on_its_filter_as_typed(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = (await http.post("/api/v1/sessions", json={"genesis": "api", "start": False})).json()["session"]["id"]
    context = await browser.new_context(java_script_enabled=False)
    page = await context.new_page()
    await sign_in(page, base, "/ranked?filter=all")
    field = page.get_by_label(f"Precedence of session {sid}")
    await field.fill("99999999999")
    async with page.expect_response(lambda r: r.url.split("?")[0].endswith("/precedence")) as answer:
        await field.press("Enter")
    assert (await answer.value).status == 422
    field = page.get_by_label(f"Precedence of session {sid}")
    assert await field.input_value() == "99999999999" and await field.get_attribute("aria-invalid") == "true"
    assert await page.locator(f'[data-field-error="precedence-{sid}"]').inner_text() == \
        "Precedence must be at most 2,147,483,647. Nothing was done."
    assert await page.locator('[data-filter="all"]').get_attribute("aria-current") == "page"  # the filter it was on
    await screenshot(page, "ranked-refused-without-script")
    await field.fill("70")
    await field.press("Enter")
    await page.wait_for_url("**/ranked?*filter=all*")
    assert await page.get_by_label(f"Precedence of session {sid}").input_value() == "70"
    await context.close()
