"""The health report's surfaces on a running stack (issue 15): `GET /api/v1/health` and MCP
`get_system_health` (health group, prose above the JSON) answer the same report, computed live
by the alerts service; with the alerts service stopped the gateway still answers, critical, and
says why; the alerts service's metrics carry the numbers the report shows."""

from __future__ import annotations

import json

import httpx
from mcp_client import mcp_session
from prometheus_client import generate_latest


async def test_the_report_on_rest_and_mcp(stack, http: httpx.AsyncClient) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    r = await http.get("/api/v1/health")
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["overall_status"] in ("ok", "warning")
    assert report["queue"]["readable"] is True
    lanes = {lane["lane"] for lane in report["queue"]["lanes"]}
    assert {"events", "ingest", "maintenance"} <= lanes  # the services' consumers, read from JetStream
    assert report["summary"].startswith(f"Overall: {report['overall_status']}")
    assert "Workers:" in report["summary"] and "Cron freshness" in report["summary"]
    assert (await httpx.AsyncClient(base_url=url).get("/api/v1/health")).status_code == 401  # no credential

    async with mcp_session(url, groups="health") as session:
        result = await session.call_tool("get_system_health", {})
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]  # the tool answers text
    prose, _, payload = text.partition("\n\n{")
    assert prose.startswith("Overall: ") and "Queue:" in prose
    assert json.loads("{" + payload)["queue"]["readable"] is True
    assert result.structured_content["overall_status"] in ("ok", "warning")
    async with mcp_session(url) as session:  # not in core: the health group is asked for
        assert "get_system_health" not in {t.name for t in (await session.list_tools()).tools}


async def test_the_gateway_answers_critical_when_the_alerts_service_is_down(stack, http) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    await services["alerts"].stop()
    r = await http.get("/api/v1/health")
    assert r.status_code == 200
    report = r.json()
    assert report["overall_status"] == "critical"
    assert report["verdict"]["code"] == "report_unavailable"
    assert report["queue"]["readable"] is False and report["cron"]["readable"] is False
    assert "alerts service did not answer" in report["summary"]


async def test_the_numbers_shown_are_metrics(stack, http) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    assert (await http.get("/api/v1/health")).status_code == 200
    exposed = generate_latest(services["alerts"].metrics.registry).decode()
    for name in ("zimmer_health_overall_status", "zimmer_queue_claimed", "zimmer_cron_keys", "zimmer_workers_active",
                 "zimmer_workers_registered", "zimmer_health_report_seconds"):
        assert name in exposed, name


async def test_a_burst_of_reports_all_answer_readable(stack, http) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    import asyncio

    answers = await asyncio.gather(*(http.get("/api/v1/health") for _ in range(30)))
    assert [r.status_code for r in answers] == [200] * 30
    assert all(r.json()["queue"]["readable"] for r in answers), [r.json()["summary"] for r in answers][:3]
    assert (await http.get("/api/v1/health", params={"x": "\x00"})).status_code == 422  # the edge refuses NUL anywhere
