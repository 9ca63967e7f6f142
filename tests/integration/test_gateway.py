"""The gateway's HTTP surface: probes, credentials, RFC 9457 problems, metrics, OpenAPI."""

from __future__ import annotations

import asyncio

import httpx

FLEET = {"Authorization": "Bearer test-fleet-key"}
OPERATOR = {"Authorization": "Bearer test-operator-token"}
PROBLEM = "application/problem+json"




async def test_probes(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        assert (await http.get("/healthz")).json() == {"status": "alive"}
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert set(ready.json()["services"]) == {"backlog", "spot-gate", "sweeper", "alerts"}

        await services["sweeper"].stop()
        not_ready = await http.get("/readyz")
        assert not_ready.status_code == 503
        assert not_ready.headers["content-type"] == PROBLEM
        body = not_ready.json()
        assert body["missing"] == ["sweeper"] and "sweeper" in body["detail"] and body["status"] == 503
        assert (body["code"], body["retry_safe"], body["dependency"]) == ("unavailable", True, "sweeper")
        assert body["services"]["sweeper"]["error"] == "unavailable"


async def test_credentials_and_problem_documents(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        missing = await http.get("/api/v1/ping")
        assert missing.status_code == 401 and missing.headers["content-type"] == PROBLEM
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert missing.json()["title"] == "Unauthorized"

        wrong = await http.get("/api/v1/ping", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401

        fleet = await http.get("/api/v1/ping", headers=FLEET)
        assert fleet.status_code == 200 and fleet.json()["realm"] == "fleet"
        assert (await http.get("/api/v1/ping", headers=OPERATOR)).json()["realm"] == "operator"

        forbidden = await http.get("/api/v1/services", headers=FLEET)
        assert forbidden.status_code == 403 and forbidden.headers["content-type"] == PROBLEM

        listing = await http.get("/api/v1/services", headers=OPERATOR)
        assert listing.status_code == 200
        assert all(s["up"] for s in listing.json()["services"].values())

        invalid = await http.get("/api/v1/services", headers=OPERATOR, params={"timeout": "soon"})
        assert invalid.status_code == 422 and invalid.headers["content-type"] == PROBLEM
        assert invalid.json()["code"] == "invalid" and invalid.json()["errors"][0]["loc"] == ["query", "timeout"]

        not_found = await http.get("/api/v1/nothing-here", headers=FLEET)
        assert not_found.status_code == 404 and not_found.headers["content-type"] == PROBLEM
        assert not_found.json()["instance"] == "/api/v1/nothing-here"


async def test_metrics_and_openapi(stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    gateway = services["gateway"]
    assert gateway.runner is not None
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        await gateway.runner.enqueue("readiness_probe")
        for _ in range(100):
            metrics = (await http.get("/metrics")).text
            if 'zimmer_gateway_peer_up{peer="alerts"} 1.0' in metrics:
                break
            await asyncio.sleep(0.1)
        assert 'zimmer_gateway_peer_up{peer="backlog"} 1.0' in metrics
        assert 'zimmer_service_info{instance="' in metrics
        docs = await http.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        spec = (await http.get("/openapi.json")).json()
        assert {"/healthz", "/readyz", "/api/v1/ping", "/api/v1/services", "/metrics"} <= set(spec["paths"])
