"""RFC 9457 problem documents for every error the gateway returns."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from zimmer_common.errors import ZimmerError

PROBLEM_JSON = "application/problem+json"


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
        return problem(exc.http_status, exc.message, type_=f"urn:zimmer:error:{exc.code.value}",
                       title=exc.code.value.replace("_", " "), instance=request.url.path, code=exc.code.value,
                       details=exc.details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), instance=request.url.path,
                       headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()]
        return problem(422, "the request does not match the API contract", type_="urn:zimmer:error:invalid",
                       instance=request.url.path, code="invalid", errors=errors)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        return problem(500, "internal error", type_="urn:zimmer:error:internal", instance=request.url.path,
                       code="internal")
