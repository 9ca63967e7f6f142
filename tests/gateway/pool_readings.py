"""Quota readings for the gateway and page tests: one recorded straight into an in-process spot-gate
(as the ingest consumer does), and a spot session held because the only account's window is spent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn


async def readings(services: dict[str, Any], utilization: float) -> None:
    """acct-0 reads `utilization` of its 5-hour window (resetting in 2 hours) and 20% of its week."""
    now = datetime.now(UTC)
    await services["spot-gate"].app.record_reading(QuotaReadingIn(
        account="acct-0", status="active", read_at=now,
        five_hour=WindowReadingIn(utilization=utilization, resets_at=now + timedelta(hours=2)),
        seven_day=WindowReadingIn(utilization=0.2, resets_at=now + timedelta(days=3))))


async def held_spot_session(http: httpx.AsyncClient) -> dict[str, Any]:
    """A spot session the gate holds: the only account's 5-hour window is spent."""
    now = datetime.now(UTC)
    r = await http.post("/api/v1/quota/readings", json={
        "account": "acct-1", "status": "active",
        "five_hour": {"utilization": 1.0, "resets_at": (now + timedelta(hours=2)).isoformat()},
        "seven_day": {"utilization": 0.5, "resets_at": (now + timedelta(days=3)).isoformat()}})
    assert r.status_code == 202
    spawned = await http.post("/api/v1/sessions", json={"genesis": "api", "title": "spot work", "prompt": "do it"})
    assert spawned.status_code == 201 and spawned.json()["turn"]["outcome"] == "held", spawned.text
    return spawned.json()["session"]
