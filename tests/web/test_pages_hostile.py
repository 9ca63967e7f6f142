"""The operator pages under hostile input, from outside (no browser needed): NUL and lone
surrogates in form fields, oversized forms, bursts of the same action, a missing or foreign
session. Every refusal says so with nothing done; nothing answers 500; nothing happens twice."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import httpx

OPERATOR = "test-operator-token"
FLEET = {"Authorization": "Bearer test-fleet-key"}


async def operator_client(base: str) -> tuple[httpx.AsyncClient, str]:
    """A client holding a signed-in session cookie, and the session's CSRF token."""
    http = httpx.AsyncClient(base_url=base)
    form = await http.get("/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    signed = await http.post("/signin", data={"csrf": csrf.group(1), "token": OPERATOR, "next": "/issues"})
    assert signed.status_code == 303 and "zimmer_session" in http.cookies
    page = await http.get("/issues")
    session_csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert session_csrf
    return http, session_csrf.group(1)


async def append(base: str, n: int) -> int:
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
        r = await api.post("/api/v1/work_backlog_items", json={
            "key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}", "estimated_cost": "small"})
        assert r.status_code == 201, r.text
        return int(r.json()["item"]["id"])


async def test_bad_strings_in_forms_are_refused_with_nothing_done(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    item = await append(base, 1)
    http, csrf = await operator_client(base)
    try:
        nul = await http.post(f"/issues/{item}/remove", data={"csrf": csrf, "reason": "dup\x00licate"})
        assert nul.status_code == 422 and "Nothing was done" in nul.text, nul.text[:500]
        surrogate = await http.post(f"/issues/{item}/remove", content=f"csrf={csrf}&reason=%ED%A0%80".encode(),
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert surrogate.status_code in (303, 422), surrogate.text[:300]  # decoded as U+FFFD or refused; never 500
        if surrogate.status_code == 303:
            item = await append(base, 2)
        huge = await http.post(f"/issues/{item}/remove", data={"csrf": csrf, "reason": "x" * 2_000_000})
        assert huge.status_code == 413
        long_reason = await http.post(f"/issues/{item}/remove", data={"csrf": csrf, "reason": "y" * 100_001})
        assert long_reason.status_code == 422 and "reason" in long_reason.text
        empty = await http.post(f"/issues/{item}/remove", data={"csrf": csrf, "reason": "   "})
        assert empty.status_code == 422
        for precedence in ("1e3", "0x10", "--1", "9" * 30, "2147483648"):
            r = await http.post(f"/issues/{item}/pin", data={"csrf": csrf, "precedence": precedence})
            assert r.status_code == 422, (precedence, r.status_code)
        settings = await http.post("/quotas/settings", data={"csrf": csrf, "reserve_five_hour_percent": "nan"})
        assert settings.status_code == 422
        unknown = await http.post("/quotas/genesis", data={"csrf": csrf, "action": "drop_tables", "genesis": "api"})
        assert unknown.status_code == 422
        missing = await http.post("/issues/999999/promote", data={"csrf": csrf})
        assert missing.status_code == 404 and "Nothing was done" in missing.text
    finally:
        await http.aclose()
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
        index = (await api.get("/api/v1/work_backlog_items")).json()
        assert index["counts"]["queued"] == 1 and not index["items"][0]["pinned"]


async def test_a_burst_of_promotes_starts_the_item_once(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    item = await append(base, 7)
    http, csrf = await operator_client(base)
    try:
        answers = await asyncio.gather(*(http.post(f"/issues/{item}/promote", data={"csrf": csrf})
                                         for _ in range(20)))
    finally:
        await http.aclose()
    statuses = Counter(r.status_code for r in answers)
    # On failure, say what the refusals said: all 409 would mean the one start itself was refused.
    said = {r.status_code: r.text.partition('class="error"')[2].partition("</p>")[0][:400]
            for r in answers if r.status_code != 303}  # the refusal's own words on the page
    assert statuses[303] == 1 and set(statuses) <= {303, 409}, (statuses, said)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as api:
        sessions = (await api.get("/api/v1/sessions")).json()
        started = (await api.get("/api/v1/work_backlog_items", params={"status": "started"})).json()["items"]
    assert sessions["total"] == 1 and [i["key"] for i in started] == ["zimmer#7"]


async def test_without_a_session_every_page_and_form_goes_to_sign_in(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:  # the fleet key is no session
        for path in ("/issues", "/quotas", "/costs", "/sessions", "/sessions/1", "/health"):
            r = await http.get(path, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"] == f"/signin?next={path}", path
        for path in ("/issues/1/promote", "/quotas/settings", "/sessions/1/priority", "/signout"):
            r = await http.post(path, data={"csrf": "x"}, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"].startswith("/signin"), path


async def test_a_service_down_is_said_on_its_pages_never_a_500(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    await services["spot-gate"].stop()  # its pages' RPCs now go unanswered
    http, _ = await operator_client(base)
    try:
        quotas = await http.get("/quotas")
        assert quotas.status_code == 503 and "Nothing was done" in quotas.text
        health = await http.get("/health")
        assert health.status_code == 200 and 'data-overall="degraded"' in health.text
        assert 'data-service="spot-gate"' in health.text and "down: unavailable" in health.text
        issues = await http.get("/issues")  # the backlog still answers: its page still renders
        assert issues.status_code == 200
    finally:
        await http.aclose()


async def test_guessing_the_operator_token_is_throttled(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _, base = stack
    async with httpx.AsyncClient(base_url=base) as http:
        page = await http.get("/signin")
        for guess in range(10):  # each answer renews the form's token, as a browser would use it
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf
            page = await http.post("/signin", data={"csrf": csrf.group(1), "token": f"guess-{guess}"})
            assert page.status_code == 401
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf
        right = await http.post("/signin", data={"csrf": csrf.group(1), "token": OPERATOR})
        assert right.status_code == 429 and int(right.headers["Retry-After"]) >= 1  # not even the right one now
        assert "zimmer_session" not in right.cookies
