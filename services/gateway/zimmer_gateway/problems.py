"""RFC 9457 problem documents for every error the gateway returns."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.paging import page_or_log

PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = "1"


def problem(status: int, detail: str, *, type_: str | None = None, title: str | None = None,
            instance: str | None = None, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {
        "type": type_ or "about:blank",
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    body.update(extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(ZimmerError)
    async def _zimmer(request: Request, exc: ZimmerError) -> JSONResponse:
        return zimmer_problem(exc, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request))
        return problem(exc.status_code, str(exc.detail), instance=request.url.path, headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()]
        return problem(422, "the request does not match the API contract", type_="urn:zimmer:error:invalid",
                       instance=request.url.path, code="invalid", errors=errors)

    @app.exception_handler(ValidationError)
    async def _contract(request: Request, exc: ValidationError) -> JSONResponse:
        # A route built a contract from its parameters or body and the contract refused them: the
        # same rules as the services', so the same answer (422 naming the field), never a 500.
        where = "query" if request.method in ("GET", "HEAD", "DELETE") else "body"
        errors = [{"loc": [where, *e.get("loc", ())], "msg": e.get("msg"), "type": e.get("type")}
                  for e in exc.errors(include_url=False, include_input=False)]
        return problem(422, "the request does not match the API contract", type_="urn:zimmer:error:invalid",
                       instance=request.url.path, code="invalid", errors=errors)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        service = getattr(request.app.state, "service", None)
        await page_or_log(service.page_error if service is not None else None, "Unhandled error in a request",
                          f"{request.method} {request.scope.get('route').path if request.scope.get('route') else '?'} "
                          f"raised {type(exc).__name__}; answered 500", ["http", type(exc).__name__],
                          snippet_source=exc, path=request.url.path)
        return problem(500, "internal error", type_="urn:zimmer:error:internal", instance=request.url.path,
                       code="internal")


def zimmer_problem(exc: ZimmerError, path: str) -> JSONResponse:
    """A refusal from a service (or the gateway's own bus) as a problem document. `unavailable`
    and `busy` name the dependency, say `retry_safe` and carry Retry-After: nothing was done."""
    headers = {"Retry-After": RETRY_AFTER_SECONDS} if exc.code in (ErrorCode.UNAVAILABLE, ErrorCode.BUSY) else None
    extra: dict[str, Any] = {}
    if exc.retry_safe:
        extra["retry_safe"] = True
    if "dependency" in exc.details:
        extra["dependency"] = exc.details["dependency"]
    return problem(exc.http_status, exc.message, type_=f"urn:zimmer:error:{exc.code.value}",
                   title=exc.code.value.replace("_", " "), instance=path, code=exc.code.value, details=exc.details,
                   headers=headers, **extra)


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers at this path (Starlette's 405 names only the first
    route's). Asked of the router through `matches`, method by method, so included routers and
    mounts answer for their own routes."""
    from starlette.routing import Match

    return [method for method in METHODS
            if any(route.matches({**request.scope, "method": method})[0] is Match.FULL
                   for route in request.app.router.routes)]
