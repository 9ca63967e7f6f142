"""The runtime's reports arrive over JetStream ingest and are applied once each."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from zimmer_common.contracts import spot as c
from zimmer_common.contracts.runtime import (
    INGEST_QUOTA_READING,
    INGEST_SESSION_STATUS,
    INGEST_SPEND,
    QuotaReadingIn,
    SessionStatusReport,
    SpendReport,
    WindowReadingIn,
)
from zimmer_common.settings import ConfigurationError
from zimmer_spot_gate.config import SpotSettings


async def eventually(check, within: float = 15.0) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not applied in time"
        await asyncio.sleep(0.05)


async def test_status_readings_and_spend_arrive_over_ingest(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    s = (await spot.app.spawn(c.SpawnSession(genesis="api"))).session  # running
    now = datetime.now(UTC)
    await spot.bus.publish_event(INGEST_SESSION_STATUS, "session_status",
                                 SessionStatusReport(session_id=s.id, status="needs_input"), event_id="status-1")
    await spot.bus.publish_event(INGEST_QUOTA_READING, "quota_reading", QuotaReadingIn(
        account="acct-x", status="needs_reauth", read_at=now, five_hour=WindowReadingIn(utilization=0.4)),
        event_id="reading-1")
    spend = SpendReport(request_id="req-1", session_id=s.id, harness="claude_code", model="claude-opus-4",
                        output_tokens=1_000_000, at=now)
    await spot.bus.publish_event(INGEST_SPEND, "spend", spend, event_id="spend-1")
    await spot.bus.publish_event(INGEST_SPEND, "spend", spend, event_id="spend-1-again")  # same request_id

    async def applied() -> bool:
        rows = await spot.sql("SELECT (SELECT status FROM spot_gate.sessions WHERE id = :i) AS status, "
                              "(SELECT count(*) FROM spot_gate.quota_readings) AS readings, "
                              "(SELECT count(*) FROM spot_gate.spend_ledger) AS spends", i=s.id)
        return (rows[0].status, rows[0].readings, rows[0].spends) == ("needs_input", 1, 1)

    await eventually(applied)
    await asyncio.sleep(0.5)
    assert await applied()  # and nothing applied twice
    rows = await spot.sql("SELECT dollars FROM spot_gate.spend_ledger")
    assert rows[0].dollars == pytest.approx(75.0)  # 1M output tokens of Opus at list price


async def test_spend_of_an_unknown_model_is_priced_dearest_never_dropped(spot, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 8 #7: unknown models are not free. Spend for a model the price table does not know
    (priced at spawn, since removed) is counted at the most expensive known price and logged at
    WARNING; dropping it would make the gate treat that session as costless."""
    await spot.bus.publish_event(INGEST_SPEND, "spend", SpendReport(
        request_id="req-x", harness="mystery", model="mystery-model-9", output_tokens=1_000_000), event_id="spend-x")

    async def recorded() -> bool:
        return bool(await spot.sql("SELECT 1 FROM spot_gate.spend_ledger WHERE request_id = 'req-x'"))

    await eventually(recorded)
    rows = await spot.sql("SELECT dollars FROM spot_gate.spend_ledger")
    assert rows[0].dollars == pytest.approx(75.0)  # the dearest output price in the table: Opus's $75/M
    assert any("no price" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)


def test_price_table_overrides_from_config(monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    monkeypatch.setenv("ZIMMER_SPOT_PRICES", '{"claude-opus-4-5": {"input": 5, "output": 25, "cache_write": 6.25, '
                                             '"cache_read": 0.5}}')
    table = SpotSettings().price_table()
    assert table["claude-opus-4-5"].output == 25 and "claude-opus-4" in table
    monkeypatch.setenv("ZIMMER_SPOT_PRICES", '{"claude-opus-4-5": {"input": 5}}')
    with pytest.raises(ConfigurationError, match="ZIMMER_SPOT_PRICES"):
        SpotSettings().price_table()
