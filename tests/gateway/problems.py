"""Reading the gateway's RFC 9457 problem documents in tests."""

from __future__ import annotations

from typing import Any

import httpx

PROBLEM = "application/problem+json"


def refused(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    return body


def invalid_fields(response: httpx.Response) -> list[str]:
    """The field(s) a 422 names: FastAPI's `errors[].loc` (without where it was: body, query,
    path, and without list indexes) or the service's `details.field`."""
    body = refused(response, 422)
    assert body["code"] == "invalid"
    if "errors" in body:
        return [".".join(p for p in e["loc"][1:] if isinstance(p, str)) for e in body["errors"]]
    return [body["details"]["field"]]
