"""The operator pages: sign-in, sign-out and the pages, one layout and one way to render a panel.

A page is a route that renders `page.html`-derived templates with `render(...)`; the navigation
lists `PAGES` (add a page there and it appears in every page's navigation). Pages call the same
service operations as REST; the gateway holds no copy of a rule.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.templating import Jinja2Templates
from starlette.responses import RedirectResponse, Response

from zimmer_common import __version__
from zimmer_common.contracts.ops import PingReply
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.auth import Realm, realm_of
from zimmer_gateway.web import session as web_session

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
PAGES: list[tuple[str, str]] = [("Health", "/health")]  # (title, path): the navigation, in order
Ping = Callable[[Service], Awaitable[dict[str, PingReply | ZimmerError]]]


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    context.setdefault("session", web_session.read_session(request, request.app.state.settings))
    response = TEMPLATES.TemplateResponse(request, template, {"pages": PAGES, "version": __version__, **context},
                                          status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = "default-src 'self'; style-src 'self' 'unsafe-inline'"
    return response


def _to_signin(request: Request) -> Response:
    return RedirectResponse(f"/signin?next={quote(request.url.path)}", status_code=303)


def _safe_next(value: str | None) -> str:
    """Only a path on this site (never `//host` or a scheme): an open redirect is a phishing aid."""
    return value if value and value.startswith("/") and not value.startswith("//") and "\\" not in value else "/health"


def create_pages(service: Service, ping: Ping) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    settings = service.settings

    @router.get("/")
    async def home() -> Response:
        return RedirectResponse("/health", status_code=303)

    @router.get("/signin")
    async def signin_form(request: Request, next: str | None = None) -> Response:  # noqa: A002 - the query's name
        if web_session.read_session(request, settings) is not None:
            return RedirectResponse(_safe_next(next), status_code=303)
        return _signin_page(request, next, None, 200)

    def _signin_page(request: Request, next_path: str | None, error: str | None, status: int) -> Response:
        token = web_session.new_token()
        response = render(request, "signin.html", status_code=status, title="Sign in", error=error, csrf=token,
                          next=_safe_next(next_path), configured=bool(settings.operator_token.get_secret_value()))
        web_session.remember_signin_token(response, request, settings, token)
        return response

    @router.post("/signin")
    async def signin(request: Request) -> Response:
        form = await request.form()
        next_path = str(form.get("next") or "")
        if not web_session.signin_token_matches(request, settings, str(form.get("csrf") or "")):
            return _signin_page(request, next_path, "The sign-in form expired or did not come from this site; "
                                "it has been renewed: sign in again.", 403)
        realm = realm_of(settings, str(form.get("token") or "").strip())
        if realm is Realm.FLEET:
            return _signin_page(request, next_path, "That is the fleet's API key: it reaches the agent API, never "
                                "the operator pages. Sign in with the operator token.", 403)
        if realm is not Realm.OPERATOR:
            return _signin_page(request, next_path, "That is not the operator token.", 401)
        response = RedirectResponse(_safe_next(next_path), status_code=303)
        web_session.open_session(response, request, settings)
        return response

    @router.post("/signout")
    async def signout(request: Request) -> Response:
        current = web_session.read_session(request, settings)
        form = await request.form()
        if current is not None and not web_session.csrf_matches(current, str(form.get("csrf") or "")):
            return render(request, "refused.html", status_code=403,
                          reason="This form did not come from this site's page (its CSRF token does not match).")
        response = RedirectResponse("/signin", status_code=303)
        web_session.close_session(response)
        return response

    @router.get("/health")
    async def health(request: Request) -> Response:
        if web_session.read_session(request, settings) is None:
            return _to_signin(request)
        answers = await ping(service)
        rows = [_service_row(name, answer) for name, answer in answers.items()]
        rows.insert(0, {"name": "gateway", "up": True, "ready": service.ready, "version": __version__,
                        "instance_id": settings.instance_id, "uptime": _duration(service.uptime),
                        "database": None, "problem": None})
        overall = "ok" if all(r["up"] and r["ready"] for r in rows) else "degraded"
        return render(request, "health.html", title="Health", overall=overall, rows=rows)

    return router


def _service_row(name: str, answer: PingReply | ZimmerError) -> dict[str, Any]:
    if isinstance(answer, ZimmerError):
        return {"name": name, "up": False, "ready": False, "version": None, "instance_id": None, "uptime": None,
                "database": None, "problem": f"{answer.code.value}: {answer.message}"}
    return {"name": name, "up": True, "ready": answer.ready, "version": answer.version,
            "instance_id": answer.instance_id, "uptime": _duration(answer.uptime_seconds),
            "database": answer.database, "problem": None}


def _duration(seconds: float) -> str:
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    parts = [f"{days}d"] * bool(days) + [f"{hours}h"] * bool(hours or days) + [f"{minutes}m", f"{s}s"]
    return " ".join(parts)
