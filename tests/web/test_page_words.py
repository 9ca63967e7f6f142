"""The pages' own wording, as pure functions: the In flight header split exactly as seed 000 words
it, the countdown's first paint, dollars never shown for an uncalibrated window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from zimmer_common.contracts import backlog as c
from zimmer_common.contracts import spot_policy as p
from zimmer_gateway.web.issues import in_flight_header
from zimmer_gateway.web.quotas import countdown, money, weekly_note


def test_the_in_flight_header_names_the_population_whenever_any_are_held() -> None:
    held = c.Counts(queued=3, in_flight=20, spot_held=14, parked=2, claimed=22)
    assert in_flight_header(held) == "6 an agent is still advancing, 14 held at the spot gate before a turn"
    assert in_flight_header(c.Counts(queued=3, in_flight=5, spot_held=0, parked=0, claimed=5)) == "5"


def test_the_countdown_first_paint_and_a_stale_deadline() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert countdown(now + timedelta(hours=1, minutes=2, seconds=3), now) == "01:02:03"
    assert countdown(now + timedelta(days=2, hours=3), now) == "2d 03:00:00"
    assert countdown(now - timedelta(minutes=5), now) == "00:00:00"  # stops at now, never counts up


def test_not_calibrated_is_never_dollars() -> None:
    def window(calibrated: bool) -> p.WindowPosture:
        return p.WindowPosture(window="five_hour", calibrated=calibrated, capacity_dollars=450.0 if calibrated else None,
                               utilization=0.5, accounts_averaged=1, reserve_percent=20, reserve_dollars=None,
                               spot_budget_dollars=None, spot_budget_left_dollars=None, spot_budget_left_fraction=0.3,
                               minutes_to_reset=10, sustainable_rate=0.1, fleet_burn=0.0)
    assert money(window(False), 0.0) == "not calibrated"
    assert money(window(True), 450.0) == "$450.00"


def test_the_next_weekly_reset_note_says_which_emptiness() -> None:
    def unblock(spent: int, at: datetime | None) -> p.UnblockView:
        return p.UnblockView(state="not_blocked", at=None, accounts_out=0, accounts_read=2, sentence="",
                             next_weekly_reset_at=at, accounts_week_spent=spent)
    assert weekly_note(unblock(0, None)) == "No account's week is spent, so no 7-day rollover is holding anything."
    assert weekly_note(unblock(2, None)) == "2 accounts with the week spent; none recorded when its week resets."
    assert weekly_note(unblock(1, datetime.now(UTC))) is None  # the page names the moment, as a local time


def test_the_sign_in_throttle_counts_failures_per_client_in_a_window() -> None:
    from zimmer_gateway.web.session import SignInThrottle

    now = [0.0]
    throttle = SignInThrottle(limit=3, window=60, max_clients=2, clock=lambda: now[0])
    for _ in range(3):
        assert throttle.retry_after("a") is None
        throttle.failed("a")
    assert throttle.retry_after("a") == 60 and throttle.retry_after("b") is None  # per client
    now[0] = 30
    assert throttle.retry_after("a") == 30
    now[0] = 60.5  # the first failures left the window
    assert throttle.retry_after("a") is None
    throttle.failed("b"), throttle.failed("c")  # bounded: "a", the oldest, is forgotten
    assert "a" not in throttle._failures
    throttle.succeeded("b")
    assert "b" not in throttle._failures
