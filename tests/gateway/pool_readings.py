"""A quota reading recorded straight into an in-process spot-gate, as the ingest consumer does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn


async def readings(services: dict[str, Any], utilization: float) -> None:
    """acct-0 reads `utilization` of its 5-hour window (resetting in 2 hours) and 20% of its week."""
    now = datetime.now(UTC)
    await services["spot-gate"].app.record_reading(QuotaReadingIn(
        account="acct-0", status="active", read_at=now,
        five_hour=WindowReadingIn(utilization=utilization, resets_at=now + timedelta(hours=2)),
        seven_day=WindowReadingIn(utilization=0.2, resets_at=now + timedelta(days=3))))
