"""get_spot_policy lists every account of the pool (issue 32 #3) against real PostgreSQL + NATS:
status (needs_reauth included), each window as read and counted, the reading's age; each window
says when it was calibrated and whether any account recorded its reset; the metrics carry each
account's figures."""

from __future__ import annotations

from datetime import timedelta

import pytest

from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import QuotaReadingIn, SpendReport, WindowReadingIn


async def test_the_policy_view_lists_every_account_with_its_status_and_windows(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    now = spot.clock.now()
    await spot.app.record_reading(QuotaReadingIn(
        account="acct-b", status="needs_reauth", read_at=now - timedelta(hours=2),
        five_hour=WindowReadingIn(utilization=0.7, resets_at=now + timedelta(hours=1)),
        seven_day=WindowReadingIn(utilization=1.0, resets_at=now + timedelta(days=2))))
    await spot.app.record_reading(QuotaReadingIn(
        account="acct-a", status="active", read_at=now, serving=True,
        five_hour=WindowReadingIn(utilization=0.4, resets_at=now + timedelta(hours=3)),
        seven_day=WindowReadingIn(utilization=0.2)))
    await spot.app.record_reading(QuotaReadingIn(account="acct-c", status="quota_exceeded", read_at=now))
    view = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    assert [(a.account, a.status, a.serving) for a in view.accounts] == [
        ("acct-a", "active", True), ("acct-b", "needs_reauth", False), ("acct-c", "quota_exceeded", False)]
    a, b, c = view.accounts
    assert a.five_hour is not None and a.five_hour.utilization == pytest.approx(0.4)
    assert a.seven_day is not None and a.seven_day.resets_at is None
    assert (a.reading_age_seconds, a.stale, a.out_of_capacity) == (0.0, False, False)
    assert b.reading_age_seconds == 7200 and b.stale  # older than the sampler's 60 minutes
    assert b.five_hour is not None and b.five_hour.counted_as == 1.0  # its week is spent
    assert (b.out_of_capacity, b.back_at) == (True, now + timedelta(days=2))
    assert (c.five_hour, c.seven_day) == (None, None)  # a reading with no readable window
    assert view.reading_stale_after_minutes == 60
    five = next(w for w in view.windows if w.window == "five_hour")
    seven = next(w for w in view.windows if w.window == "seven_day")
    assert five.reset_recorded and seven.reset_recorded  # acct-b recorded its week's reset, acct-a did not
    assert (five.calibrated, five.calibrated_at) == (False, None)

    spot.app.metrics.observe(await spot.app.policy.get())
    sample = spot.service.metrics.registry.get_sample_value
    assert sample("zimmer_spot_account_status", {"account": "acct-b", "status": "needs_reauth"}) == 1
    assert sample("zimmer_spot_account_status", {"account": "acct-b", "status": "active"}) == 0
    assert sample("zimmer_spot_account_utilization", {"account": "acct-a", "window": "five_hour"}) == pytest.approx(0.4)
    assert sample("zimmer_spot_account_counted_utilization", {"account": "acct-b", "window": "five_hour"}) == 1.0
    assert sample("zimmer_spot_account_reading_age_seconds", {"account": "acct-b"}) == 7200
    assert sample("zimmer_spot_account_utilization", {"account": "acct-c", "window": "five_hour"}) is None


async def test_a_window_says_when_it_was_calibrated_and_whether_a_reset_was_recorded(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    now = spot.clock.now()
    await spot.readings((0.5, 0.25))
    for i in range(3):
        await spot.spend(SpendReport(request_id=f"r{i}", session_id=None, harness="claude_code",
                                     model="claude-opus-4", output_tokens=1_000_000, at=now - timedelta(minutes=30)))

    async def calibrated() -> bool:
        return (await spot.sql("SELECT count(*) AS n FROM spot_gate.window_calibration"))[0].n == 2

    await spot.run_job("quota_calibration", calibrated)
    [at] = (await spot.sql("SELECT calibrated_at FROM spot_gate.window_calibration WHERE window_name = 'five_hour'"))[0]
    view = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    five = next(w for w in view.windows if w.window == "five_hour")
    assert five.calibrated and five.calibrated_at == at and five.reset_recorded
    # A newer reading records no 5-hour reset: the minutes are then the window's whole length, and
    # the view says no reset was recorded rather than passing the length off as one.
    await spot.app.record_reading(QuotaReadingIn(
        account="acct-0", status="active", read_at=now, five_hour=WindowReadingIn(utilization=0.5),
        seven_day=WindowReadingIn(utilization=0.25, resets_at=now + timedelta(days=3))))
    view = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    five = next(w for w in view.windows if w.window == "five_hour")
    assert (five.reset_recorded, five.minutes_to_reset, five.calibrated_at) == (False, 300, at)
    spot.app.metrics.observe(view)
    sample = spot.service.metrics.registry.get_sample_value
    assert sample("zimmer_spot_window_calibrated_timestamp_seconds", {"window": "five_hour"}) == at.timestamp()
    assert sample("zimmer_spot_window_reset_seconds", {"window": "five_hour"}) is None  # none recorded
    assert sample("zimmer_spot_window_reset_seconds", {"window": "seven_day"}) == pytest.approx(3 * 86400)
