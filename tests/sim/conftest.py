"""The simulated fleet's tests: the in-process `stack` (tests/conftest.py) reading a fake GitHub,
and a runtime client on the stack's NATS, as `zimmer sim` has them."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from zimmer_runtime import RuntimeClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import GithubForTheStack

REPOS = ["acme/api", "acme/web"]  # GithubWorld's default repositories


@pytest.fixture
def stack_setup(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """The stack's backlog reads a fake GitHub (yielded) that gates the world's repositories."""
    with GithubForTheStack(monkeypatch) as gh:
        monkeypatch.setenv("ZIMMER_GATED_REPOS", ",".join(REPOS))
        yield gh


@pytest.fixture
async def runtime(nats_url: str) -> AsyncIterator[RuntimeClient]:
    client = await RuntimeClient.connect(nats_url, name="zimmer-sim-test", registry=CollectorRegistry())
    try:
        yield client
    finally:
        await client.close(grace=2.0)
