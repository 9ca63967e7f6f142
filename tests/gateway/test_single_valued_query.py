"""A query parameter that takes one value, given twice, is a 422 naming it; a list parameter takes
many. Schemathesis found `GET /api/v1/triggers?name_contains=&name_contains=x` answered 200 with
one of the two silently chosen."""

from __future__ import annotations

import httpx
from problems import invalid_fields


async def test_a_scalar_given_twice_is_refused_and_a_list_takes_many(http: httpx.AsyncClient) -> None:
    twice = await http.get("/api/v1/triggers", params=[("name_contains", "a"), ("name_contains", "b")])
    assert invalid_fields(twice) == ["name_contains"]
    assert "given 2 times" in twice.json()["errors"][0]["msg"]
    assert (await http.get("/api/v1/work_backlog_items", params=[("limit", "5"), ("limit", "6")])).status_code == 422
    many = await http.get("/api/v1/sessions", params=[("status", "waiting"), ("status", "running")])
    assert many.status_code == 200, many.text
    assert (await http.get("/api/v1/triggers", params={"name_contains": "a"})).status_code == 200
