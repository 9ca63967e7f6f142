"""The charts' history over REST on a running stack (issue 32 #4): `GET /api/v1/spot_policy/history`,
`/api/v1/costs/history` and `/api/v1/health/history` answer the shapes the OpenAPI document states,
from the history spot-gate and alerts keep, and bad input is a 422 naming the parameter (401
without a credential), never a 500."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from problems import invalid_fields, refused

from zimmer_common.contracts.charts import SERIES_MAX_POINTS
from zimmer_common.contracts.runtime import INGEST_SPEND, SpendReport
from zimmer_common.history import STEPS


@pytest.fixture
def stack_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZIMMER_HEALTH_CHECK_SECONDS", "0.5")  # the health monitor records lanes within a second


async def until_points(http: httpx.AsyncClient, path: str, params: dict[str, Any], key: str) -> dict[str, Any]:
    for _ in range(100):
        r = await http.get(path, params=params)
        assert r.status_code == 200, r.text
        if r.json()[key]:
            return r.json()
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} never had {key}: {r.text}")


async def test_the_pool_history_from_the_minute_recorded(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    now = datetime.now(UTC)
    r = await http.post("/api/v1/quota/readings", json={
        "account": "acct-1", "status": "active",
        "five_hour": {"utilization": 0.42, "resets_at": (now + timedelta(hours=2)).isoformat()},
        "seven_day": {"utilization": 0.3, "resets_at": (now + timedelta(days=3)).isoformat()}})
    assert r.status_code == 202, r.text
    empty = (await http.get("/api/v1/spot_policy/history", params={"window": "five_hour"})).json()
    assert empty["points"] == [] and empty["step_minutes"] == 1 and empty["window"] == "five_hour"
    await services["spot-gate"].runner.enqueue("record_pool_history")
    answer = await until_points(http, "/api/v1/spot_policy/history", {"window": "five_hour"}, "points")
    [point] = answer["points"]
    assert point["utilization"] == pytest.approx(0.42) and point["reserve"] == pytest.approx(0.2)
    assert point["spot_budget"] == pytest.approx(0.8) and point["pacing"] == pytest.approx(0.8 * 3 / 5, abs=0.01)
    assert set(point) == {"at", "samples", "utilization", "pacing", "reserve", "spot_budget", "capacity_dollars",
                          "running", "held", "paused", "holds", "pauses", "resumes"}
    since = datetime.fromisoformat(answer["since"])
    assert since <= datetime.fromisoformat(point["at"]) < datetime.fromisoformat(answer["until"])
    week = (await http.get("/api/v1/spot_policy/history", params={"window": "seven_day", "step_minutes": 60})).json()
    assert week["step_minutes"] == 60 and len(week["points"]) == 1 and week["points"][0]["utilization"] == 0.3


async def test_costs_history_per_model(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    bus = services["gateway"].bus
    for i, model in enumerate(["claude-opus-4", "claude-opus-4", "claude-sonnet-4"]):
        await bus.publish_event(INGEST_SPEND, "spend", SpendReport(
            request_id=f"r{i}", session_id=None, harness="claude_code", model=model, output_tokens=50_000,
            at=datetime.now(UTC) - timedelta(minutes=5 * i)), event_id=f"spend-{i}")
    answer = await until_points(http, "/api/v1/costs/history", {"step_minutes": 60}, "models")
    assert answer["step_minutes"] == 60
    assert [m["model"] for m in answer["models"]][0] == "claude-opus-4"
    for m in answer["models"]:
        assert m["spends_against"] == "claude" and m["dollars"] > 0
        assert all(p["dollars_per_minute"] == pytest.approx(p["dollars"] / 60) for p in m["points"])


async def test_health_history_per_lane_with_thresholds(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    answer = await until_points(http, "/api/v1/health/history", {}, "lanes")
    # 24 hours of every lane in one answer: the smallest step whose points fit one answer.
    def fits(step: int) -> bool:
        return len(answer["lanes"]) * (24 * 60 // step + 1) <= SERIES_MAX_POINTS

    smaller = [s for s in STEPS if s < answer["step_minutes"]]
    assert fits(answer["step_minutes"]) and not any(fits(s) for s in smaller), answer["step_minutes"]
    lanes = {lane["lane"]: lane["points"] for lane in answer["lanes"]}
    assert {"events", "ingest"} <= set(lanes)
    point = lanes["events"][0]
    assert set(point) == {"at", "samples", "ready", "claimed", "oldest_ready_age_seconds", "depth_threshold",
                          "stall_age_seconds"}
    assert point["depth_threshold"] > 0 and point["stall_age_seconds"] > 0
    one = (await http.get("/api/v1/health/history", params={"lane": "ingest"})).json()
    assert [lane["lane"] for lane in one["lanes"]] == ["ingest"] and one["step_minutes"] == 1


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/api/v1/spot_policy/history", {}, "window"),
    ("/api/v1/spot_policy/history", {"window": "one_day"}, "window"),
    ("/api/v1/spot_policy/history", {"window": "five_hour", "step_minutes": 7}, "step_minutes"),
    ("/api/v1/spot_policy/history", {"window": "five_hour", "step_minutes": "abc"}, "step_minutes"),
    ("/api/v1/spot_policy/history", {"window": "five_hour", "since": "yesterday"}, "since"),
    ("/api/v1/spot_policy/history", {"window": "five_hour", "since": "2026-12-01T10:00:00"}, "since"),  # no offset
    ("/api/v1/spot_policy/history", {"window": "five_hour", "since": "2026-12-02T00:00:00Z",
                                     "until": "2026-12-01T00:00:00Z"}, "since"),
    ("/api/v1/spot_policy/history", {"window": "seven_day", "step_minutes": 1}, "step_minutes"),  # too many points
    ("/api/v1/costs/history", {"since": "2026-12-01T00:00:00Z", "until": "2026-12-01T00:00:00Z"}, "since"),
    ("/api/v1/costs/history", {"step_minutes": 0}, "step_minutes"),
    ("/api/v1/health/history", {"step_minutes": 1, "since": (datetime.now(UTC) - timedelta(days=80)).isoformat()},
     "step_minutes"),
    ("/api/v1/health/history", {"lane": ""}, "lane"),
])
async def test_bad_input_is_a_422_naming_the_parameter(stack, http: httpx.AsyncClient, path: str,  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
                                                        params: dict[str, Any], field: str) -> None:
    r = await http.get(path, params=params)
    fields = invalid_fields(r)
    assert any(f == field or f.startswith(field) or f == "" for f in fields), (fields, r.text)


async def test_no_credential_is_a_401_and_a_repeated_parameter_a_422(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url) as anonymous:
        refused(await anonymous.get("/api/v1/health/history"), 401)
        refused(await anonymous.get("/api/v1/spot_policy/history?window=five_hour"), 401)
    assert invalid_fields(await http.get("/api/v1/spot_policy/history?window=five_hour&window=seven_day")) == ["window"]
