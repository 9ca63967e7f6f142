"""What every operator page shares: one layout, one navigation, one way to render, the signed-in
check and the CSRF check on forms; and sign-in, sign-out and `/`.

A page module (health.py, issues.py, …) is a router whose routes call `signed_in` first, fetch
through the same RPCs REST uses, and `render` a template extending `layout.html` whose panels use
the `panel` macro. `NAVIGATION` lists the pages in order; adding one there puts it in every
page's navigation. The gateway holds no copy of a rule: a form posts, the route makes the same
RPC the REST route makes, and a refusal is shown as the service worded it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from zimmer_common import __version__, deadline
from zimmer_common.bus import Bus
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.auth import Realm, realm_of
from zimmer_gateway.web import session as web_session
from zimmer_gateway.web import words
from zimmer_gateway.web.live import live_family
from zimmer_gateway.web.session import OperatorSession

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def utc(at: datetime | None) -> str:
    """A moment as the markup shows it before the browser rewrites it to local time."""
    return words.utc_text(at) if at else "—"


age = words.duration  # a wait or an execution as the pages say it: "45 s", "41 min", "2 h 5 min", "3 d 4 h"

TEMPLATES.env.filters["utc"] = utc
TEMPLATES.env.filters["age"] = age
TEMPLATES.env.filters["duration"] = words.duration
TEMPLATES.env.filters["cadence"] = words.cron_words
TEMPLATES.env.filters["with_times"] = words.with_times
TEMPLATES.env.globals["wait_pill"] = words.wait_pill
TEMPLATES.env.globals["hold_words"] = words.HOLD_WORDS
TEMPLATES.env.globals["time_element"] = words.time_element
TEMPLATES.env.globals["issue_links"] = words.issue_links
TEMPLATES.env.filters["repository"] = words.repository_of
STATIC = Path(__file__).parent / "static"  # our own small scripts (no build step, no CDN)
NAVIGATION: list[tuple[str, str]] = [
    ("Issues", "/issues"), ("Ranked", "/ranked"), ("Quotas", "/quotas"), ("Costs", "/costs"), ("Sessions", "/sessions"),
    ("Triggers", "/triggers"), ("Health", "/health")]
HOME = "/issues"


class NotSignedIn(Exception):
    """Raised by `signed_in`; the app answers it with a redirect to the sign-in form."""

    def __init__(self, path: str):
        self.path = path


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    if "session" not in context:  # a page that checked it already keeps it on the request
        context["session"] = getattr(request.state, "operator", None) or \
            web_session.read_session(request, request.app.state.settings)
    # The queue-recovery banner's status, left by its ASGI layer (web/recovery_banner.py) on page GETs.
    context.setdefault("queue_recovery", getattr(request.state, "queue_recovery", None))
    # A page read with GET that answered 200 refreshes itself (web/live.py); a refusal re-rendered
    # with what was typed never does (a re-fetch would lose it). "As of" is when it was rendered.
    context.setdefault("live", live_family(request.url.path) if status_code == 200 and request.method == "GET" else None)
    context.setdefault("as_of", datetime.now(UTC))
    response = TEMPLATES.TemplateResponse(
        request, template, {"navigation": NAVIGATION, "version": __version__, **context}, status_code=status_code)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = "default-src 'self'; style-src 'self' 'unsafe-inline'; form-action 'self'"
    return response


def signed_in(request: Request) -> OperatorSession:
    session = web_session.read_session(request, request.app.state.settings)
    if session is None:  # back to the same address after signing in, its query (a filter, a page) kept
        raise NotSignedIn(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    request.state.operator = session  # read once: render() uses it
    return session


async def checked_form(request: Request) -> FormData:
    """The posted form of a signed-in operator whose CSRF token matches; else a refusal is raised
    (before anything runs)."""
    session = signed_in(request)
    form = await request.form()
    if not web_session.csrf_matches(session, str(form.get("csrf") or "")):
        raise ZimmerError(ErrorCode.FORBIDDEN, "This form did not come from this site's page (its CSRF token does "
                          "not match).")
    return form


@contextmanager
def as_operator() -> Iterator[None]:
    """Page actions are the operator's: their idempotency keys and records say so."""
    with deadline.as_caller(Realm.OPERATOR.value):
        yield


def bus_of(service: Service) -> Bus:
    if service.bus is None:
        raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
    return service.bus


def to_signin(path: str) -> Response:
    return RedirectResponse(f"/signin?next={quote(path)}", status_code=303)


def back_to(path: str, done: str, **about: str) -> Response:
    """After a form: back to the page (a GET, so a reload repeats nothing), naming what was done
    from the page's fixed vocabulary (never free text in a URL a page would echo)."""
    return RedirectResponse(f"{path}?{urlencode({'done': done, **about})}", status_code=303)


def safe_next(value: str | None) -> str:
    """Only a path on this site (never `//host` or a scheme): an open redirect is a phishing aid."""
    return value if value and value.startswith("/") and not value.startswith("//") and "\\" not in value else HOME


Ping = Callable[[Service], Awaitable[dict[str, Any]]]


def create_signin(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    settings = service.settings

    @router.get("/")
    async def home() -> Response:
        return RedirectResponse(HOME, status_code=303)

    def signin_page(request: Request, next_path: str | None, error: str | None, status: int) -> Response:
        token = web_session.new_token()
        response = render(request, "signin.html", status_code=status, title="Sign in", error=error, csrf=token,
                          next=safe_next(next_path), configured=bool(settings.operator_token.get_secret_value()))
        web_session.remember_signin_token(response, request, settings, token)
        return response

    @router.get("/signin")
    async def signin_form(request: Request, next: str | None = None) -> Response:  # noqa: A002 - the query's name
        if web_session.read_session(request, settings) is not None:
            return RedirectResponse(safe_next(next), status_code=303)
        return signin_page(request, next, None, 200)

    throttle = web_session.SignInThrottle()

    @router.post("/signin")
    async def signin(request: Request) -> Response:
        form = await request.form()
        next_path = str(form.get("next") or "")
        client = request.client.host if request.client else "unknown"
        wait = throttle.retry_after(client)
        if wait is not None:  # the token is not even looked at
            response = signin_page(request, next_path, f"Too many failed sign-ins from here; try again in "
                                   f"{wait:.0f} seconds.", 429)
            response.headers["Retry-After"] = str(int(wait) + 1)
            return response
        if not web_session.signin_token_matches(request, settings, str(form.get("csrf") or "")):
            return signin_page(request, next_path, "The sign-in form expired or did not come from this site; "
                               "it has been renewed: sign in again.", 403)
        realm = realm_of(settings, str(form.get("token") or "").strip())
        if realm is not Realm.OPERATOR:
            throttle.failed(client)
        if realm is Realm.FLEET:
            return signin_page(request, next_path, "That is the fleet's API key: it reaches the agent API, never "
                               "the operator pages. Sign in with the operator token.", 403)
        if realm is not Realm.OPERATOR:
            return signin_page(request, next_path, "That is not the operator token.", 401)
        throttle.succeeded(client)
        response = RedirectResponse(safe_next(next_path), status_code=303)
        web_session.open_session(response, request, settings)
        return response

    @router.post("/signout")
    async def signout(request: Request) -> Response:
        try:
            await checked_form(request)
        except ZimmerError as exc:
            return refusal(request, exc)
        response = RedirectResponse("/signin", status_code=303)
        web_session.close_session(response)
        return response

    return router


def refusal(request: Request, exc: ZimmerError, names: dict[int, str] | None = None) -> Response:
    """A refused action or an unreadable page, worded as the service worded it (backlog rows named
    by their keys, never their internal ids); nothing was done. Back goes to the page it came from."""
    back = words.origin(request.url.path)
    return render(request, "refused.html", status_code=exc.http_status, title="Not done",
                  reason=words.with_times(words.name_rows(exc.message, names or {})), code=exc.code.value,
                  back=back, back_title=page_title(back))


def page_title(path: str) -> str:
    """What the navigation calls the page at `path` ("Session 5" for a session's page)."""
    if path.startswith("/sessions/"):
        return f"Session {path.rsplit('/', 1)[-1]}"
    return next((title for title, p in NAVIGATION if p == path), "the pages")


@dataclass(frozen=True)
class FormRefusal:
    """A refused form, for the page that re-renders it (issue 32 #6): which form (`form`, the id the
    template gives it), the field at fault (None: the form as a whole), the refusal in the
    operator's words, and what was typed, put back in the fields."""

    form: str
    field: str | None
    message: str
    values: dict[str, str] = field(default_factory=dict)

    def about(self, form: str, name: str | None = None) -> bool:
        """Whether this refusal is the one for `form` (and for its field `name`, when given)."""
        return self.form == form and (name is None or self.field in (name, None))


def form_refusal(form_id: str, form: FormData | None, error: ZimmerError, names: dict[int, str] | None = None) -> FormRefusal:
    """The refusal `perform` raised, for the re-rendered form `form_id`: the field the error names,
    its words (rows named by their keys), what was typed (never the CSRF token)."""
    typed = {k: str(v) for k, v in (form or {}).items() if k != "csrf" and isinstance(v, str)}
    return FormRefusal(form_id, error.details.get("field"), words.name_rows(error.message, names or {}), typed)


class Refused(Exception):
    """What `perform` hands back instead of an answer: the refusal page to return, the refusal
    itself (a script asking for JSON gets its words and status instead of the page), and the form
    as it was posted (a page re-rendering the form puts back what was typed)."""

    def __init__(self, response: Response, error: ZimmerError, form: FormData | None = None):
        self.response = response
        self.error = error
        self.form = form


async def perform(request: Request, service: Service, rpc: Any, build: Callable[[FormData], Any],
                  labels: dict[str, str] | None = None) -> Any:
    """A page's form: check it (signed in, CSRF), build the contract request from it, make the
    same RPC REST makes, as the operator. Returns the answer; raises `Refused` carrying the page
    that says why not (as the service worded it; nothing was done). A contract's limit is said in
    words naming the field by its label on the page (`labels`: field → label), else by its name."""
    form: FormData | None = None
    try:
        form = await checked_form(request)
        with as_operator():
            return await bus_of(service).request(rpc, build(form))
    except ZimmerError as exc:
        raise Refused(refusal(request, exc), exc, form) from None
    except ValidationError as exc:  # the contract's own limits, named by field, in words
        first = exc.errors()[0]
        name = ".".join(str(x) for x in first["loc"]) or "form"
        label = (labels or {}).get(name) or name.replace("_", " ").capitalize()
        error = ZimmerError(ErrorCode.INVALID, words.field_words(first, label), {"field": name})
        raise Refused(refusal(request, error), error, form) from None


def whole_number(form: FormData, name: str) -> int | None:
    """A form's integer field; empty is None."""
    raw = str(form.get(name) or "").strip()
    if not raw:
        return None
    if not raw.removeprefix("-").isdigit() or len(raw) > 20:
        raise ZimmerError(ErrorCode.INVALID, f"{name.replace('_', ' ').capitalize()}: “{raw[:40]}” is not a whole "
                          "number.", {"field": name})
    return int(raw)


def decimal_number(form: FormData, name: str) -> float | None:
    """A form's number field; empty is None; NaN and infinities are not numbers."""
    raw = str(form.get(name) or "").strip()
    try:
        value = float(raw) if raw else None
    except ValueError:
        value = float("nan")
    if value is not None and not math.isfinite(value):
        raise ZimmerError(ErrorCode.INVALID, f"{name.replace('_', ' ').capitalize()}: “{raw[:40]}” is not a number.",
                          {"field": name})
    return value
