"""The gateway's HTTP metrics (issue 31 #3), read from its own `/metrics` after real requests:
httpx → gateway → NATS → services → PostgreSQL, all real. Each request is counted and timed under
its route template (the direct append too, and what the edge refuses), and a path no route
matches is `none`, never a label value of its own."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from zimmer_common.settings import Settings
from zimmer_gateway.app import create_app
from zimmer_gateway.http_metrics import REQUESTS, SECONDS, request_metrics
from zimmer_gateway.service import build

FLEET = {"Authorization": "Bearer test-fleet-key"}
APPEND = "/api/v1/work_backlog_items"
SESSION = "/api/v1/sessions/{session_id}"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def handlers(found: Samples) -> set[str]:
    return {dict(labels)["handler"] for name, labels in found if name.startswith("zimmer_http_")}


async def scrape(client: httpx.AsyncClient) -> Samples:
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    return samples(answer.text)


async def test_requests_are_counted_and_timed_by_route_template_and_status(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as client:
        before = await scrape(client)
        for n in (1, 2):
            appended = await client.post(APPEND, json={"key": f"zimmer#{n}", "estimated_cost": "small",
                                                       "issue_url": f"https://github.com/acme/zimmer/issues/{n}"})
            assert appended.status_code == 201, appended.text
        refused = await client.post(APPEND, json={}, headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 401  # refused by the edge, before the direct route
        for session_id in (424242, 434343):
            assert (await client.get(f"/api/v1/sessions/{session_id}")).status_code == 404
        for raw in ("/no/such/path/1", "/no/such/path/2", "/api/v1/nothing-here"):
            assert (await client.get(raw)).status_code == 404
        after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved(REQUESTS, handler=APPEND, method="POST", status="2xx") == 2
    assert moved(REQUESTS, handler=APPEND, method="POST", status="4xx") == 1
    assert moved(f"{SECONDS}_count", handler=APPEND, method="POST", status="2xx") == 2
    assert moved(f"{SECONDS}_bucket", handler=APPEND, method="POST", status="2xx", le="+Inf") == 2
    assert moved(f"{SECONDS}_sum", handler=APPEND, method="POST", status="2xx") > 0

    assert moved(REQUESTS, handler=SESSION, method="GET", status="4xx") == 2
    assert moved(f"{SECONDS}_count", handler=SESSION, method="GET", status="4xx") == 2
    assert moved(REQUESTS, handler="/metrics", method="GET", status="2xx") >= 1

    assert moved(REQUESTS, handler="none", method="GET", status="4xx") == 3
    assert moved(f"{SECONDS}_count", handler="none", method="GET", status="4xx") == 3
    seen = handlers(after)
    assert not {h for h in seen if "no/such" in h or "nothing-here" in h or "424242" in h}, seen
    assert all(h == "none" or h.startswith("/") for h in seen), seen

    # One /metrics, one registry: the service's own families are on the same page.
    assert value(after, "zimmer_service_start_time_seconds", service="gateway") > 0


def test_an_app_built_twice_on_one_service_and_apps_of_two_services_share_nothing() -> None:
    settings = Settings(api_key="k", operator_token="t", metrics_port=-1, http_port=0)
    first, second = build(settings), build(settings)  # build() makes an app each
    for service in (first, second):
        create_app(service)  # again, on the same registry: no "Duplicated timeseries"
        assert request_metrics(service.metrics.registry) is request_metrics(service.metrics.registry)
    assert request_metrics(first.metrics.registry) is not request_metrics(second.metrics.registry)
    text = generate_latest(first.metrics.registry).decode()
    assert f"# TYPE {SECONDS} histogram" in text and f"# TYPE {REQUESTS} counter" in text


def test_the_metrics_are_made_once_per_registry() -> None:
    registry: Any = CollectorRegistry()
    assert request_metrics(registry) is request_metrics(registry)
    names = {family.name for family in registry.collect()}
    assert names == {"zimmer_http_requests", SECONDS}


async def test_mounts_and_plain_routes_are_named_by_their_path(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as client:
        before = await scrape(client)
        await client.get("/static/no-such-file.css")
        await client.get("/static/another-missing.js")
        await client.post("/mcp", content=b"[]", headers={"Content-Type": "application/json",
                                                          "Accept": "application/json, text/event-stream"})
        assert (await client.get("/healthz/")).status_code == 307  # to /healthz: the redirect is no route's
        after = await scrape(client)

    def moved(**labels: str) -> float:
        return value(after, REQUESTS, **labels) - value(before, REQUESTS, **labels)

    assert moved(handler="/static", method="GET", status="4xx") == 2
    assert sum(moved(handler="/mcp", method="POST", status=s) for s in ("2xx", "4xx", "5xx")) == 1
    assert moved(handler="none", method="GET", status="3xx") == 1
    seen = handlers(after)
    assert not {h for h in seen if "missing" in h or "no-such" in h or h.endswith("/")}, seen
