"""A session's spend, the figure its page shows, has its series (issue 32 #2) without a label per
session: the histogram zimmer_spot_session_spend_dollars{class, status} takes each session's spend
once as it ends (archived by the runtime or the Trash, or failed), against a running spot-gate,
NATS and Postgres."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from zimmer_common.contracts import spot as c
from zimmer_common.contracts.runtime import SessionStatusReport, SpendReport


def spent(spot: Any, status: str, cls: str = "spot") -> tuple[float, float]:
    """How many sessions of `cls` ended in `status`, and their spend summed."""
    sample = spot.service.metrics.registry.get_sample_value
    labels = {"class": cls, "status": status}
    return (sample("zimmer_spot_session_spend_dollars_count", labels) or 0.0,
            sample("zimmer_spot_session_spend_dollars_sum", labels) or 0.0)


async def test_each_session_s_spend_is_observed_once_when_it_ends(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    spender = (await spot.app.spawn(c.SpawnSession(genesis="api", start=False))).session
    assert spender.priority_class == "spot"
    await spot.spend(SpendReport(request_id="r-1", session_id=spender.id, harness="claude_code",
                                 model="claude-opus-4", output_tokens=100_000, at=spot.clock.now() - timedelta(minutes=5)))
    page = (await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=spender.id))).spend
    assert page is not None and page.dollars == pytest.approx(7.5)  # what the session's page shows
    assert spent(spot, "archived") == (0, 0)

    await spot.app.report_status(SessionStatusReport(session_id=spender.id, status="archived"))
    count, dollars = spent(spot, "archived")
    assert count == 1 and dollars == pytest.approx(page.dollars)

    # The Trash ends a session too; one that spent nothing is observed at $0.
    idle = (await spot.app.spawn(c.SpawnSession(genesis="api", start=False))).session
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=idle.id))
    count, dollars = spent(spot, "archived")
    assert count == 2 and dollars == pytest.approx(7.5)

    # Failed is its own series; archiving a failed session (already ended) is not counted again.
    crashed = (await spot.app.spawn(c.SpawnSession(genesis="api", start=False))).session
    await spot.app.report_status(SessionStatusReport(session_id=crashed.id, status="failed"))
    assert spent(spot, "failed")[0] == 1
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=crashed.id))
    assert spent(spot, "archived")[0] == 2 and spent(spot, "failed")[0] == 1
