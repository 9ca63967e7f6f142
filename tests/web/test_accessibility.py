"""The accessibility pass (issue 32, "Done when"): every operator page, at 1280 px here and at 375
px in test_accessibility_phone.py, each on a stack of its own filled with representative data
(sessions running, held, paused mid-run, parked, paused until; backlog rows queued, in flight and
parked; an alert; quota readings; spend), passes the three checks of a11y_checks.py: no serious or
critical axe-core violation; a name on every control and one h1 with no skipped level; keyboard
only, every control reached in DOM order from the skip link with a visible focus indicator and no
trap. Screenshots of each page at its width.

The pages are listed from the gateway's own routes: every GET route that answers HTML is visited,
so a page added later is covered without touching this file (a route with a path parameter this
file cannot fill fails, naming it). Beside them: sign-in (and its refusal), a bad address (422
and 404), a bad filter, a refused action and a refused form kept as typed."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from a11y_checks import page_problems
from pageshots import SCREENSHOTS, VIEWPORTS
from starlette.routing import Route
from test_issues_page import OPERATOR, append
from test_session_dead_ends import waiting_sessions

from zimmer_common.contracts.runtime import INGEST_SPEND, SpendReport
from zimmer_gateway.web.recovery_banner import NOT_PAGES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import REPO, world_in_stack
from liveness_world import stack_setup as stack_setup  # the fixture: the stack reads a fake GitHub

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR_KEY = {"Authorization": f"Bearer {OPERATOR}"}


async def filled(services: dict[str, Any], base: str, gh: Any) -> dict[str, int]:
    """Backlog rows queued, in flight, parked, stranded and awaiting a decision, and an issue not on
    the queue (a fake GitHub); sessions paused mid-run, parked, paused until and held (with their
    quota readings); an alert; spend on a session. Returns session ids by kind."""
    for n in range(1, 6):
        gh.issue(REPO, n, title=f"Issue {n}")
    async with httpx.AsyncClient(base_url=base, headers=FLEET, timeout=30) as http:
        items = [await append(http, n, cost) for n, cost in enumerate(("small", "medium", "large", "small", "small"), 1)]
        async with httpx.AsyncClient(base_url=base, headers=OPERATOR_KEY, timeout=30) as op:
            started = [(await op.post(f"/api/v1/work_backlog_items/{i['id']}/start_now")).json()["session_id"]
                       for i in items[:2]]
        r = await http.post(f"/api/v1/sessions/{started[1]}/status", json={"status": "needs_input"})
        assert r.status_code in (200, 202), r.text
        made = {"running": started[0], "backlog_parked": started[1], **await waiting_sessions(services, base)}
        bus = services["gateway"].bus
        await bus.publish_event(INGEST_SPEND, "spend", SpendReport(
            request_id="a11y-spend", session_id=made["running"], harness="claude_code", model="claude-opus-4",
            output_tokens=100_000, at=datetime.now(UTC)), event_id="a11y-spend")
    world = world_in_stack(services, gh)
    for n in (200, 201, 202):
        gh.issue(REPO, n, title=f"Issue {n}")
        await world.left_queue(n, ago=timedelta(days=12 - n % 10))
    gh.issue(REPO, 368, title="No row at all")
    await world.sweep()
    await world.app.snapshot.run()
    await world.hold(world.ids["zimmer#202"], "pick #202 or #203: the maintainers; laid out in #204")
    await services["backlog"].pager.report(title="Disk nearly full", fingerprint=["disk", "host-a"],
                                           message="3 GB left on host-a", condition_key="disk:host-a",
                                           snippet_source=RuntimeError("df says 97% used"))
    return made


def get_routes(routes: list[Any], prefix: str = "") -> list[str]:
    """The path of every GET route, through included routers (FastAPI wraps each include)."""
    paths = []
    for route in routes:
        if isinstance(route, Route) and "GET" in (route.methods or ()):
            paths.append(prefix + route.path)
        elif hasattr(route, "original_router"):  # FastAPI's _IncludedRouter
            paths += get_routes(route.original_router.routes, prefix + route.include_context.prefix)
    return paths


async def triggers(base: str) -> list[str]:
    """A schedule trigger and a GitHub label one, its class derived and priority (the trigger pages)."""
    made = []
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:
        for body in ({"kind": "schedule", "name": "nightly sweep", "prompt": "sweep"},
                     {"kind": "github_label", "name": "on a label", "prompt": "review", "scheduling_class": "priority"}):
            r = await http.post("/api/v1/triggers", json=body)
            assert r.status_code == 201, r.text
            made.append(str(r.json()["id"]))
    return made


def page_routes(app: Any, values: dict[str, list[str]]) -> list[str]:
    """Each GET route outside the API, MCP, static files and probes, its path parameters filled
    from `values` (a session route once for each kind of session made)."""
    paths: list[str] = []
    for path in get_routes(app.routes):
        if path == "/" or path.startswith(NOT_PAGES) or re.search(r"\.\w+$", path):
            continue  # home redirects; the API, MCP, static files and probes; a download (transcript.zip)
        params = re.findall(r"{(\w+)(?::\w+)?}", path)
        unknown = [p for p in params if p not in values]
        assert not unknown, f"the page route {path} has a parameter this test cannot fill: {unknown}; " \
            "give `values` in page_routes one"
        if not params:
            paths.append(path)
        else:
            assert len(params) == 1, path
            paths += [re.sub(r"{\w+(:\w+)?}", v, path) for v in values[params[0]]]
    return paths


async def html_pages(base: str, cookies: list[dict[str, Any]], paths: list[str]) -> list[str]:
    """The paths that answer a page (text/html) to a client accepting anything: JSON for a script, a
    download or a stream is not one (nor its refusal, problem JSON when HTML was not asked for)."""
    jar = {c["name"]: c["value"] for c in cookies}
    pages = []
    async with httpx.AsyncClient(base_url=base, cookies=jar, timeout=30) as http:
        for path in paths:
            async with http.stream("GET", path) as r:
                if r.headers.get("content-type", "").startswith("text/html"):
                    assert r.status_code < 400, f"the page {path} answered {r.status_code}"
                    pages.append(path)
    return pages


# The ⋮ menus open one at a time (ranked.js): fold_problems opens each from the keyboard instead.
OPEN_THE_FOLDS = """() => {
  const folded = [...document.querySelectorAll('details:not([open]):not(.menu)')];
  folded.forEach(d => d.open = true);
  return folded.length;
}"""


async def checked(page: Any, name: str, label: str, found: dict[str, list[str]]) -> None:
    """The three checks on the page (each fold opened from the keyboard), its screenshot; then, if
    it folds anything (long sections, a snippet), the keyboard and names again with the folds open."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"a11y-{name}-{label}.png"), full_page=True)
    problems = await page_problems(page)
    if await page.evaluate(OPEN_THE_FOLDS):
        problems += [f"(folds open) {p}" for p in await page_problems(page, axe=False)]
    if problems:
        found[f"{name} at {label}"] = problems


def shot_name(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"


async def test_every_page_passes_the_accessibility_pass_at_1280_px(stack, stack_setup, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """1280 px here; 375 px in test_accessibility_phone.py, on a stack of its own: the two widths
    are each minutes of walking every control, so two files let two workers take them at once."""
    await accessibility_pass(stack, stack_setup, browser, "desktop")


async def accessibility_pass(stack: Any, gh: Any, browser: Any, label: str) -> None:
    """Every page at the width VIEWPORTS calls `label`, on a stack filled by `filled`."""
    services, base = stack
    sessions = await filled(services, base, gh)
    values = {"session_id": [str(sid) for sid in sessions.values()], "trigger_id": await triggers(base)}
    paths = page_routes(services["gateway"].http_server.config.app, values)
    found: dict[str, list[str]] = {}
    context = await browser.new_context(viewport=VIEWPORTS[label], bypass_csp=True)  # axe is injected
    page = await context.new_page()
    await page.goto(f"{base}/issues")  # to sign-in
    await checked(page, "signin", label, found)
    await page.get_by_label("Operator token").fill("not the token")
    await page.get_by_role("button", name="Sign in").click()
    await checked(page, "signin-refused", label, found)
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{base}/issues")
    for section in ("queued", "in-flight", "parked", "stranded", "awaiting", "not-on-queue"):
        assert await page.locator(f"#{section} tbody tr, #{section} li").count(), f"{section} is empty"
    pages = await html_pages(base, await context.cookies(), paths)
    for path in pages:
        await page.goto(f"{base}{path}")
        await checked(page, shot_name(path), label, found)
    for path in ("/ranked?filter=all", "/sessions/abc", "/no-such-page", "/ranked?filter=bogus"):
        await page.goto(f"{base}{path}")
        await checked(page, shot_name(path), label, found)
    # A refused action (a forged CSRF token) and a refused form, the page again as typed.
    sid = sessions["until"]
    await page.goto(f"{base}/sessions/{sid}")
    await page.locator("#trash input[name=csrf]").evaluate("i => i.value = 'forged'")
    await page.get_by_role("button", name=f"Trash session {sid}").click()
    await page.locator("[data-refused]").wait_for()
    await checked(page, "refused", label, found)
    await page.goto(f"{base}/sessions/{sid}")
    await page.get_by_label("Precedence").fill("99999999999")
    await page.get_by_role("button", name="Change precedence").click()
    await page.locator('[data-field-error="precedence"]').wait_for()
    await checked(page, "session-refused-form", label, found)
    # Queue recovery mode: its banner on every page, its panels on Health.
    await page.goto(f"{base}/health")
    await page.get_by_label("Why").fill("a trigger is stampeding")
    await page.get_by_label("Minutes until it lifts by itself").fill("45")
    await page.get_by_role("button", name="Enter queue recovery mode").click()
    await page.locator("[data-queue-recovery]").wait_for()
    await checked(page, "health-recovery-mode", label, found)
    await page.goto(f"{base}/issues")
    await checked(page, "issues-recovery-mode", label, found)
    async with httpx.AsyncClient(base_url=base, headers=FLEET) as http:  # it ends as it began
        assert (await http.post("/api/v1/health/exit_queue_recovery_mode")).json()["active"] is False
    await context.close()
    for must in ("/issues", "/ranked", "/quotas", "/costs", "/sessions", "/health", f"/sessions/{sessions['held']}"):
        assert must in pages, f"{must} is not among the pages walked: {pages}"
    assert found == {}, "\n".join(f"{where}:\n  " + "\n  ".join(problems) for where, problems in found.items())
