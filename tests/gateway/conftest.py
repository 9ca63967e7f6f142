"""Fixtures for the gateway's REST tests (the in-process `stack` is in tests/conftest.py)."""

from __future__ import annotations

import httpx
import pytest

FLEET = {"Authorization": "Bearer test-fleet-key"}


@pytest.fixture
async def http(stack):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """An HTTP client on the gateway, with the fleet key."""
    _services, url = stack
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as client:
        yield client
