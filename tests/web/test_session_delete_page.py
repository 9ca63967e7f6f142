"""The session page's warnings and its Delete control (issue 16), in headless Chromium against a
running stack; and the Delete form from outside, without its CSRF token or its confirmation."""

from __future__ import annotations

import re
from typing import Any

import httpx
from pageshots import accessibility_problems, notice

from zimmer_common.contracts import clones as k

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def sign_in(page: Any, base: str, path: str) -> None:
    await page.goto(f"{base}{path}")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url.startswith(f"{base}{path}"), page.url


async def spawn(http: httpx.AsyncClient) -> int:
    r = await http.post("/api/v1/sessions", json={"genesis": "schedule", "title": "to delete", "start": False})
    assert r.status_code == 201, r.text
    return int(r.json()["session"]["id"])


async def test_the_page_shows_warnings_and_delete_takes_the_session(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A refusal logs at .error and writes a durable warning to the session: the operator sees it
    where they look. Deleting one is a different door from the Trash: the row goes immediately."""
    services, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        sid = await spawn(http)
        await services["gateway"].bus.request(k.RECORD_SESSION_WARNING, k.SessionWarningIn(
            session_id=sid, kind="clone_reap_refused", message="session 7 took the clone back <b>live</b>",
            source="sweeper/orphan_clone_sweep"))
        page = await browser.new_page()
        await sign_in(page, base, f"/sessions/{sid}")
        warning = page.locator("[data-warnings] [data-warning=clone_reap_refused]")
        assert "session 7 took the clone back <b>live</b>" in await warning.inner_text()  # escaped, not markup
        assert await accessibility_problems(page) == []

        await page.get_by_role("button", name="Delete this session").click()  # the box is not ticked
        assert page.url.startswith(f"{base}/sessions/{sid}")  # the browser refused the form itself
        assert (await http.get(f"/api/v1/sessions/{sid}")).status_code == 200
        await page.get_by_label(f"Delete session {sid} for good").check()
        await page.get_by_role("button", name="Delete this session").click()
        await page.wait_for_url(f"{base}/sessions?done=deleted")
        assert "Deleted the session" in await notice(page)
        assert (await http.get(f"/api/v1/sessions/{sid}")).status_code == 404


async def test_the_delete_form_needs_its_csrf_token_and_its_confirmation(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
        sid = await spawn(api)
    async with httpx.AsyncClient(base_url=base) as http:
        form = await http.get("/signin")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert token
        await http.post("/signin", data={"csrf": token.group(1), "token": OPERATOR, "next": f"/sessions/{sid}"})
        page = await http.get(f"/sessions/{sid}")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        foreign = await http.post(f"/sessions/{sid}/delete", data={"csrf": "forged", "confirm": "yes"})
        unconfirmed = await http.post(f"/sessions/{sid}/delete", data={"csrf": csrf.group(1)})
        assert (foreign.status_code, unconfirmed.status_code) == (403, 422), (foreign.text, unconfirmed.text)
        assert "Tick the box" in unconfirmed.text and "the Trash panel on the session" in unconfirmed.text
        async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
            assert (await api.get(f"/api/v1/sessions/{sid}")).status_code == 200  # nothing was done
        done = await http.post(f"/sessions/{sid}/delete", data={"csrf": csrf.group(1), "confirm": "yes"})
        assert (done.status_code, done.headers["location"]) == (303, "/sessions?done=deleted")
        again = await http.post(f"/sessions/{sid}/delete", data={"csrf": csrf.group(1), "confirm": "yes"})
        assert again.status_code == 404, again.text


async def test_the_trash_the_delete_refusal_points_to_is_on_the_page_and_restores_as_it_was(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 32 #2 and #7: the Delete refusal pointed to an Archive control the page lacked. The
    session page has the Trash: archived, then restored with its held turn (the Undo's rule)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))
    from pool_readings import held_spot_session  # the gateway tests' helper

    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        held = await held_spot_session(http)
        page = await browser.new_page()
        await sign_in(page, base, f"/sessions/{held['id']}")
        await page.get_by_role("button", name=f"Trash session {held['id']}").click()
        assert "Moved to the Trash" in await notice(page)
        assert await page.locator("[data-trash-state]").get_attribute("data-trash-state") == "archived"
        assert (await http.get(f"/api/v1/sessions/{held['id']}")).json()["status"] == "archived"
        assert await accessibility_problems(page) == []
        await page.get_by_role("button", name=f"Restore session {held['id']} from the Trash").click()
        assert "Restored from the Trash" in await notice(page)
        back = (await http.get(f"/api/v1/sessions/{held['id']}")).json()
        assert (back["status"], back["spot_hold_reason"], back["held_turn_kind"]) == (
            "waiting", held["spot_hold_reason"], held["held_turn_kind"])
        assert await page.locator("[data-hold]").count() == 1  # the hold's banner is back with it
    assert await page.get_by_role("heading", name="Trash", exact=True).count() == 1  # what the Delete refusal names
