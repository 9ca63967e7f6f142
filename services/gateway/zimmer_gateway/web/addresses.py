"""An address that is not a page (issue 32 #6): `/sessions/abc`, `/ranked?filter=bogus` or a
mistyped path, asked for by a browser, answers a page in words with a 4xx status and a way back,
never the API's problem JSON. The API, MCP and scripts (anything not asking for HTML) keep their
problem documents: the handlers `problems.py` installed answer them, unchanged."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from zimmer_gateway.web import words
from zimmer_gateway.web.pages import page_title, render
from zimmer_gateway.web.recovery_banner import NOT_PAGES

Handler = Callable[[Request, Any], Awaitable[Response]]


def wants_a_page(request: Request) -> bool:
    """A browser asking for a page: HTML accepted, and not an API, MCP, static or probe path."""
    return request.url.path not in ("/", "") and not request.url.path.startswith(NOT_PAGES) \
        and "text/html" in request.headers.get("accept", "")


def address_page(request: Request, status: int, sentence: str) -> Response:
    back = words.origin(request.url.path)
    return render(request, "not_a_page.html", status_code=status, title="Not a page here", sentence=sentence,
                  back=back, back_title=page_title(back))


def install_page_errors(app: FastAPI) -> None:
    """Wrap the problem handlers for the two ways an address fails: its parameters do not match
    (FastAPI's RequestValidationError) and no route has it (404/405)."""
    invalid: Handler = app.exception_handlers[RequestValidationError]
    http: Handler = app.exception_handlers[StarletteHTTPException]

    async def bad_parameters(request: Request, exc: RequestValidationError) -> Response:
        if not wants_a_page(request):
            return await invalid(request, exc)
        errors = list(exc.errors())
        first = next((e for e in errors if e.get("loc", ("",))[0] == "path"), errors[0] if errors else {})
        in_path = bool(first) and first.get("loc", ("",))[0] == "path"
        return address_page(request, 404 if in_path else 400, words.address_words(first))

    async def no_route(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code not in (404, 405) or not wants_a_page(request):
            return await http(request, exc)
        return address_page(request, exc.status_code, f"Nothing is at {request.url.path[:200]} here: "
                            "use the navigation above, or go back to the page you came from.")

    app.add_exception_handler(RequestValidationError, bad_parameters)
    app.add_exception_handler(StarletteHTTPException, no_route)
