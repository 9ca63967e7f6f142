"""Work started, parked and routed from the pages (issue 32 #2, seed 004), in headless Chromium at
1280 and 375 px against a running stack: each control does what it says (the effect read back over
REST), a refusal re-renders its form with what was typed and the refusal beside the field, and
nothing is done by a refused form."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pageshots import VIEWPORTS, accessibility_problems, notice, screenshot

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}
WIDTHS = pytest.mark.parametrize("viewport", list(VIEWPORTS))


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url


async def opened(browser: Any, base: str, path: str, viewport: str, script: bool = True) -> Any:
    context = await browser.new_context(viewport=VIEWPORTS[viewport], java_script_enabled=script)
    page = await context.new_page()
    await sign_in(page, base, path)
    return page


async def sessions_with_prompt(http: httpx.AsyncClient, prompt: str) -> list[dict[str, Any]]:
    listed = (await http.get("/api/v1/sessions", params={"limit": 500})).json()["sessions"]
    return [s for s in listed if s["prompt"] == prompt]


@WIDTHS
async def test_the_new_session_form_starts_a_session_with_its_class_and_precedence(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    prompt = f"Sweep the flaky tests ({viewport})\nand report back"
    page = await opened(browser, base, "/sessions", viewport)
    assert await accessibility_problems(page) == []
    await page.get_by_label("Prompt").fill(prompt)
    await page.get_by_label("Scheduling class").select_option("spot")
    await page.get_by_label("Precedence").fill("4321")
    if viewport == "desktop":
        await screenshot(page, "new-session-form")
    await page.get_by_role("button", name="Start session").click()
    await page.wait_for_url(re.compile(r"/sessions/\d+\?done=created"))
    assert "Started this session from the new-session form" in await notice(page)
    sid = int(page.url.split("/sessions/")[1].split("?")[0])
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        made = (await http.get(f"/api/v1/sessions/{sid}")).json()
    assert (made["genesis"], made["scheduling_class"], made["priority_class"], made["precedence"], made["prompt"],
            made["title"]) == ("web_ui", "spot", "spot", 4321, prompt, f"Sweep the flaky tests ({viewport})")
    assert made["ever_started"] or made["spot_hold_reason"] or made["status"] != "waiting"  # its first turn was asked

    # Derive (the default) stores no class: the session follows web_ui.
    await page.goto(f"{base}/sessions")
    await page.get_by_label("Prompt").fill("derived")
    await page.get_by_label("Title").fill("a derived one")
    await page.get_by_role("button", name="Start session").click()
    await page.wait_for_url(re.compile(r"/sessions/\d+\?done=created"))
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        derived = (await sessions_with_prompt(http, "derived"))[0]
    assert (derived["title"], derived["scheduling_class"], derived["priority_class"], derived["precedence"]) == (
        "a derived one", None, "priority", 0)


@WIDTHS
async def test_a_refused_new_session_keeps_what_was_typed_and_starts_nothing(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    prompt = f"Refactor the <b>pager</b> ({viewport})"
    page = await opened(browser, base, "/sessions", viewport)
    await page.get_by_label("Prompt").fill(prompt)
    await page.get_by_label("Title").fill("kept title")
    await page.get_by_label("Scheduling class").select_option("priority")
    await page.get_by_label("Precedence").fill("99999999999")
    await page.get_by_role("button", name="Start session").click()
    await page.wait_for_selector("[data-field-error=new]")
    assert page.url == f"{base}/sessions/new"
    said = await page.locator("[data-field-error=new]").inner_text()
    assert "Precedence must be at most 2,147,483,647." in said and "Nothing was done." in said, said
    assert await page.get_by_label("Prompt").input_value() == prompt
    assert await page.get_by_label("Title").input_value() == "kept title"
    assert await page.get_by_label("Scheduling class").input_value() == "priority"
    field = page.get_by_label("Precedence")
    assert (await field.input_value(), await field.get_attribute("aria-invalid")) == ("99999999999", "true")
    assert await accessibility_problems(page) == []
    if viewport == "375px":
        await screenshot(page, "new-session-refused")
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        assert await sessions_with_prompt(http, prompt) == []
        # Corrected, the same form (its key kept) starts exactly one session, however often it is posted.
        await field.fill("12")
        posted = await page.locator("form[data-new-session]").evaluate(
            "f => Object.fromEntries(new FormData(f).entries())")
        await page.get_by_role("button", name="Start session").click()
        await page.wait_for_url(re.compile(r"/sessions/\d+\?done=created"))
        again = await page.request.post(f"{base}/sessions/new", form=posted, max_redirects=0)  # posted twice
        assert (again.status, again.headers["location"]) == (303, page.url.removeprefix(base))
        made = await sessions_with_prompt(http, prompt)
        assert [(s["precedence"], s["scheduling_class"]) for s in made] == [(12, "priority")]


async def test_the_new_session_form_needs_its_csrf_token(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base) as http:
        anonymous = await http.post("/sessions/new", data={"prompt": "x", "csrf": "x"})
        assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/signin")
        form = await http.get("/signin")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token
        await http.post("/signin", data={"csrf": token.group(1), "token": OPERATOR, "next": "/sessions"})
        forged = await http.post("/sessions/new", data={"prompt": "forged one", "csrf": "forged"})
        assert forged.status_code == 403, forged.text
        async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
            assert await sessions_with_prompt(api, "forged one") == []


async def spawned(http: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    r = await http.post("/api/v1/sessions", json=fields)
    assert r.status_code == 201, r.text
    return r.json()["session"]  # type: ignore[no-any-return]  # JSON


@WIDTHS
async def test_pause_until_a_time_on_the_session_page_stops_the_turn_and_sleeps_until_then(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004's Pause Until with a time, from the session page: the form's time is UTC (said on
    its label); a time gone by is refused beside the field, what was typed kept, nothing paused."""
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        s = await spawned(http, genesis="web_ui", title="sleep on it")
        assert (await http.post(f"/api/v1/sessions/{s['id']}/status", json={"status": "running"})).status_code == 200
        page = await opened(browser, base, f"/sessions/{s['id']}", viewport)
        await page.get_by_label("Until (UTC)").fill("2020-01-01T00:00")
        await page.get_by_label("Wake with").fill("carry on")
        await page.get_by_role("button", name="Pause Until", exact=True).click()
        await page.wait_for_selector("[data-field-error=pause_until]")
        assert "must be in the future" in await page.locator("[data-field-error=pause_until]").inner_text()
        assert await page.get_by_label("Until (UTC)").input_value() == "2020-01-01T00:00"
        assert await page.get_by_label("Wake with").input_value() == "carry on"
        assert (await http.get(f"/api/v1/sessions/{s['id']}")).json()["paused_until"] is None  # nothing was done

        until = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=3)
        await page.get_by_label("Until (UTC)").fill(until.strftime("%Y-%m-%dT%H:%M"))
        await page.get_by_role("button", name="Pause Until", exact=True).click()
        assert "Paused until the time given" in await notice(page)
        after = (await http.get(f"/api/v1/sessions/{s['id']}")).json()
        assert datetime.fromisoformat(after["paused_until"]) == until  # its turn's stop went to the runtime
        assert await page.locator("[data-wake]").count() == 1  # the page's Paused until banner
        assert await accessibility_problems(page) == []


@WIDTHS
async def test_pause_until_spot_queue_in_the_session_header_parks_a_running_priority_session(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        s = await spawned(http, genesis="web_ui", title="a long sweep", precedence=77)
        r = await http.post(f"/api/v1/sessions/{s['id']}/status", json={"status": "running"})
        assert r.status_code == 200 and r.json()["priority_class"] == "priority", r.text
        page = await opened(browser, base, f"/sessions/{s['id']}", viewport)
        assert await accessibility_problems(page) == []
        await page.get_by_label("Resume with").fill("Pick up where you left off:\nthe flaky tests")
        await page.get_by_role("button", name="Pause Until → Spot Queue").click()
        assert "Parked in the spot queue" in await notice(page)
        after = (await http.get(f"/api/v1/sessions/{s['id']}")).json()
        assert (after["paused_by"], after["spot_pause_reason"], after["scheduling_class"], after["priority_class"],
                after["precedence"]) == ("spot_quota", "user_spot_queue", "spot", "spot", 77), after
        assert "the operator's session page" in after["spot_pause_detail"]
        assert await page.locator("[data-pause=user_spot_queue]").count() == 1  # the banner says a person parked it
        assert await page.locator("form#spot_queue").count() == 0  # parked already: not offered again
        if viewport == "desktop":  # screenshot() takes both widths
            await screenshot(page, "session-parked")


@WIDTHS
async def test_a_refused_park_keeps_the_resume_with_text(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        s = await spawned(http, genesis="schedule", title="trashed meanwhile", start=False)
        # Without script: a live page would take the form away as soon as the session is trashed.
        page = await opened(browser, base, f"/sessions/{s['id']}", viewport, script=False)
        assert (await http.post(f"/api/v1/sessions/{s['id']}/archive")).status_code == 200  # from elsewhere, meanwhile
        await page.get_by_label("Resume with").fill("kept <i>as typed</i>")
        await page.get_by_role("button", name="Pause Until → Spot Queue").click()
        await page.wait_for_selector("[data-field-error=spot_queue]")
        said = await page.locator("[data-field-error=spot_queue]").inner_text()
        assert "archived" in said and "Nothing was done." in said, said
        assert await page.get_by_label("Resume with").input_value() == "kept <i>as typed</i>"
        after = (await http.get(f"/api/v1/sessions/{s['id']}")).json()
        assert (after["status"], after["paused_by"]) == ("archived", None)


@WIDTHS
async def test_pause_until_spot_queue_in_the_ranked_menu(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        s = await spawned(http, genesis="web_ui", title="watched by nobody", start=False)
        gone = await spawned(http, genesis="web_ui", title="trashed meanwhile", start=False)
        page = await opened(browser, base, "/ranked", viewport)
        row = page.locator(f"li[data-session='{s['id']}']")
        await row.locator("summary").click()
        await row.get_by_role("button", name=f"Pause Until → Spot Queue: session {s['id']}").click()
        assert f"Parked session {s['id']} in the spot queue" in await notice(page)
        after = (await http.get(f"/api/v1/sessions/{s['id']}")).json()
        assert (after["paused_by"], after["spot_pause_reason"], after["priority_class"]) == (
            "spot_quota", "user_spot_queue", "spot"), after
        assert await page.locator(f"#spot li[data-session='{s['id']}'] [data-wait]").count() == 1  # now in the queue
        assert await page.locator(f"li[data-session='{s['id']}'] form[data-spot-queue]").count() == 0  # not offered again
        assert await accessibility_problems(page) == []
        if viewport == "desktop":  # screenshot() takes both widths
            await screenshot(page, "ranked-parked")

        # Without script (with it, the live page takes a trashed row away at once): the row's form,
        # posted after the session was trashed elsewhere, is refused and the page says why.
        page = await opened(browser, base, "/ranked", viewport, script=False)
        row = page.locator(f"li[data-session='{gone['id']}']")
        assert (await http.post(f"/api/v1/sessions/{gone['id']}/archive")).status_code == 200
        await row.locator("summary").click()
        await row.get_by_role("button", name=f"Pause Until → Spot Queue: session {gone['id']}").click()
        error = page.locator("p[data-refused][role=alert]:not([hidden])")  # its row has left the queue: the page says it
        await error.wait_for()
        assert "archived" in await error.inner_text() and "Nothing was done." in await error.inner_text()
        assert (await http.get(f"/api/v1/sessions/{gone['id']}")).json()["paused_by"] is None


@WIDTHS
async def test_the_hierarchy_panel_shows_parent_children_and_each_node_s_genesis_and_class(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        root = await spawned(http, genesis="schedule", title="nightly sweep", start=False)
        middle = await spawned(http, parent_session_id=root["id"], title="one repo", start=False)
        spot_child = await spawned(http, parent_session_id=middle["id"], title="one test", start=False)
        outlier = await spawned(http, parent_session_id=middle["id"], title="a human waits", scheduling_class="priority",
                                start=False)
        unrelated = await spawned(http, genesis="web_ui", title="unrelated", start=False)
    page = await opened(browser, base, f"/sessions/{middle['id']}", viewport)
    panel = page.locator("[data-hierarchy]")
    assert await page.get_by_role("heading", name="Session hierarchy").count() == 1

    async def pills(relation: str) -> list[tuple[str, str]]:
        found = await panel.locator(f"li[data-relation={relation}]").evaluate_all(
            "nodes => nodes.map(n => [n.dataset.node, n.querySelector('[data-genesis-class]').textContent])")
        return [(node, said) for node, said in found]

    assert await pills("parent") == [(str(root["id"]), "schedule · spot")]
    assert await pills("self") == [(str(middle["id"]), "schedule · spot")]
    assert sorted(await pills("child")) == sorted([(str(spot_child["id"]), "schedule · spot"),
                                                   (str(outlier["id"]), "schedule · priority")])
    assert str(unrelated["id"]) not in await panel.inner_text()
    assert await panel.locator(f"li[data-node='{root['id']}'] [data-root]").count() == 1
    assert "2 child sessions." in await panel.locator("[data-children-count]").inner_text()
    assert await accessibility_problems(page) == []
    if viewport == "desktop":  # screenshot() takes both widths
        await screenshot(page, "session-hierarchy")
    await panel.get_by_role("link", name=f"Session {outlier['id']}", exact=True).click()
    await page.wait_for_url(f"{base}/sessions/{outlier['id']}")
    assert await pills("parent") == [(str(middle["id"]), "schedule · spot")]
    assert [n for n, _ in await pills("ancestor")] == [str(root["id"])]
    assert "No child session" in await panel.locator("[data-children-count]").inner_text()


async def trigger(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    listed = (await http.get("/api/v1/triggers", params={"name_contains": name})).json()["triggers"]
    return next(t for t in listed if t["name"] == name)  # type: ignore[no-any-return]  # JSON


@WIDTHS
async def test_trigger_pages_show_the_class_badge_and_the_edit_form_sets_class_and_precedence(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for body in ({"kind": "schedule", "name": "nightly sweep", "prompt": "sweep"},
                     {"kind": "slack", "name": "noisy channel", "scheduling_class": "spot", "precedence": 40}):
            assert (await http.post("/api/v1/triggers", json=body)).status_code == 201
        nightly = await trigger(http, "nightly sweep")
        page = await opened(browser, base, "/triggers", viewport)
        badges = await page.locator("tr[data-trigger]").evaluate_all(
            "rows => rows.map(r => [r.querySelector('a').textContent, r.querySelector('[data-class-badge]').textContent])")
        assert badges == [["nightly sweep", "spot (derived)"], ["noisy channel", "spot"]]
        assert await accessibility_problems(page) == []
        if viewport == "desktop":
            await screenshot(page, "triggers")
        await page.get_by_role("link", name="nightly sweep").click()
        await page.wait_for_url(f"{base}/triggers/{nightly['id']}")
        assert await accessibility_problems(page) == []

        # Refused: what was typed stays, nothing changes.
        await page.get_by_label("Name").fill("nightly sweep, renamed")
        await page.get_by_label("Scheduling class").select_option("priority")
        await page.get_by_label("Precedence").fill("nine hundred")
        await page.get_by_role("button", name="Save trigger").click()
        await page.wait_for_selector("[data-field-error=edit]")
        assert "is not a whole number" in await page.locator("[data-field-error=edit]").inner_text()
        assert (await page.get_by_label("Name").input_value(), await page.get_by_label("Scheduling class").input_value(),
                await page.get_by_label("Precedence").input_value()) == ("nightly sweep, renamed", "priority",
                                                                         "nine hundred")
        assert await page.get_by_label("Precedence").get_attribute("aria-invalid") == "true"
        assert await trigger(http, "nightly sweep") == nightly
        if viewport == "375px":
            await screenshot(page, "trigger-refused")

        await page.get_by_label("Precedence").fill("900")
        await page.get_by_role("button", name="Save trigger").click()
        assert "Sessions it fires from now on" in await notice(page)
        saved = await trigger(http, "nightly sweep, renamed")
        assert (saved["scheduling_class"], saved["precedence"], saved["prompt"], saved["enabled"]) == (
            "priority", 900, "sweep", True)
        fired = await http.post(f"/api/v1/triggers/{nightly['id']}/fire", json={})
        assert fired.status_code == 201, fired.text
        made = fired.json()["session"]
        assert (made["genesis"], made["priority_class"], made["precedence"]) == ("schedule", "priority", 900)

        # Back to derive with no precedence: both cleared.
        await page.get_by_label("Scheduling class").select_option("derive")
        await page.get_by_label("Precedence").fill("")
        await page.get_by_role("button", name="Save trigger").click()
        assert "Sessions it fires from now on" in await notice(page)
        cleared = await trigger(http, "nightly sweep, renamed")
        assert (cleared["scheduling_class"], cleared["precedence"]) == (None, None)


async def test_invoke_on_a_trigger_s_page_starts_a_web_ui_session_once(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004's genesis table: the Invoke button on a trigger is web_ui (a person asked in the web
    app); the same invoke over REST is api. The form's drawn key: submitted twice, one session."""
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        assert (await http.post("/api/v1/triggers", json={"kind": "schedule", "name": "by hand", "prompt": "look",
                                                          "precedence": 7})).status_code == 201
        made = await trigger(http, "by hand")
        page = await opened(browser, base, f"/triggers/{made['id']}", "desktop")
        form = page.locator("form[data-invoke]")
        posted = await form.evaluate("f => Object.fromEntries(new FormData(f))")
        await page.get_by_role("button", name="Invoke").click()
        assert "by invoking its trigger" in await notice(page)
        session_id = int(page.url.split("/sessions/")[1].split("?")[0])
        session = (await http.get(f"/api/v1/sessions/{session_id}")).json()
        assert (session["genesis"], session["trigger_id"], session["precedence"]) == ("web_ui", made["id"], 7)
        again = await page.request.post(f"{base}/triggers/{made['id']}/invoke", form=posted, max_redirects=0)
        assert again.status == 303 and again.headers["location"].startswith(f"/sessions/{session_id}?")  # the same one
        by_api = await http.post(f"/api/v1/triggers/{made['id']}/invoke", json={})
        assert by_api.status_code == 201 and by_api.json()["session"]["genesis"] == "api", by_api.text
        assert await accessibility_problems(page) == []


@WIDTHS
async def test_the_quick_router_on_ranked_runs_as_spot_at_the_top_of_the_queue_only_when_ticked(stack, browser, viewport) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        queued = await spawned(http, genesis="schedule", title="automated", precedence=500, start=False)
        page = await opened(browser, base, "/ranked", viewport)
        assert await page.get_by_label("Run as spot").is_checked() is False  # unticked by default
        assert await accessibility_problems(page) == []
        await page.get_by_label("Prompt", exact=True).fill("a long unattended sweep")
        await page.get_by_label("Run as spot").check()
        if viewport == "desktop":
            await screenshot(page, "quick-router")
        await page.get_by_role("button", name="Submit", exact=True).click()
        assert "as spot, at the top of the spot queue" in await notice(page)
        made = (await sessions_with_prompt(http, "a long unattended sweep"))[0]
        assert (made["genesis"], made["scheduling_class"], made["priority_class"]) == ("web_ui", "spot", "spot")
        assert made["precedence"] > queued["precedence"]
        assert await page.locator("#spot li[data-session]").first.get_attribute("data-session") == str(made["id"])
        assert await page.get_by_label("Run as spot").is_checked() is False  # cleared once submitted

        # Unticked: no class at all (it derives from web_ui), and Submit & Open goes to it.
        await page.get_by_label("Prompt", exact=True).fill("a question I wait on")
        await page.get_by_role("button", name="Submit & Open").click()
        await page.wait_for_url(re.compile(r"/sessions/\d+\?done=routed"))
        assert "from the Quick Router" in await notice(page)
        asked = (await sessions_with_prompt(http, "a question I wait on"))[0]
        assert page.url.startswith(f"{base}/sessions/{asked['id']}?")
        assert (asked["genesis"], asked["scheduling_class"], asked["priority_class"], asked["precedence"]) == (
            "web_ui", None, "priority", 0)

        # Refused (a prompt past the contract's 100,000 characters): the prompt and the tick are kept.
        await page.goto(f"{base}/ranked")
        long_prompt = "x" * 100_001
        await page.get_by_label("Prompt", exact=True).fill(long_prompt)
        await page.get_by_label("Run as spot").check()
        await page.get_by_role("button", name="Submit", exact=True).click()
        await page.wait_for_selector("[data-field-error=quick]")
        said = await page.locator("[data-field-error=quick]").inner_text()
        assert "Prompt is too long: at most 100,000 characters" in said, said
        assert await page.get_by_label("Prompt", exact=True).input_value() == long_prompt
        assert await page.get_by_label("Run as spot").is_checked()
        assert await sessions_with_prompt(http, long_prompt) == []


async def test_trigger_pages_are_the_operator_s_and_a_missing_trigger_is_a_page_back_to_triggers(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as fleet:
        assert (await fleet.post("/api/v1/triggers", json={"kind": "schedule", "name": "t"})).status_code == 201
        for path in ("/triggers", "/triggers/1"):  # the fleet key opens no page
            r = await fleet.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/signin"), (path, r.status_code)
    async with httpx.AsyncClient(base_url=base) as http:
        form = await http.get("/signin")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token
        await http.post("/signin", data={"csrf": token.group(1), "token": OPERATOR, "next": "/triggers"})
        missing = await http.get("/triggers/424242", headers={"Accept": "text/html"})
        assert missing.status_code == 404 and "trigger 424242 does not exist" in missing.text
        assert 'href="/triggers"' in missing.text and "Back to Triggers" in missing.text, missing.text
        forged = await http.post("/triggers/1", data={"csrf": "forged", "name": "renamed", "scheduling_class": "spot"})
        assert forged.status_code == 403
        async with httpx.AsyncClient(base_url=base, headers=FLEET) as fleet:
            assert (await trigger(fleet, "t"))["scheduling_class"] is None


async def test_one_drawn_form_starts_one_session_per_prompt(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A form posted twice starts one session; two prompts sent with one drawn key (two tabs given
    one live render) start two, never the first one's session for the second."""
    _, base = stack
    async with httpx.AsyncClient(base_url=base) as http:
        form = await http.get("/signin")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token
        await http.post("/signin", data={"csrf": token.group(1), "token": OPERATOR, "next": "/ranked"})
        page = (await http.get("/ranked")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', page)
        assert csrf and key
        answers = []
        for prompt in ("first tab", "second tab", "first tab"):
            r = await http.post("/ranked/quick", data={"csrf": csrf.group(1), "idempotency_key": key.group(1),
                                                       "prompt": prompt, "open": "yes"})
            assert r.status_code == 303, r.text
            answers.append(r.headers["location"])
    assert answers[0] == answers[2] != answers[1], answers
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
        assert len(await sessions_with_prompt(api, "first tab")) == 1
        assert len(await sessions_with_prompt(api, "second tab")) == 1
