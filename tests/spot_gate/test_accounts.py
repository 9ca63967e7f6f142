"""Each account of the pool as the Quotas page lists it (issue 32 #3): every account, read or not,
whatever its status; each window as read and as the pool average counts it; when an out account
serves again; how old its reading is and whether it is stale."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from zimmer_spot_gate.domain.accounts import STALE_AFTER, AccountEntry, account_states
from zimmer_spot_gate.domain.model import AccountReading, AccountStatus, Window, WindowReading

NOW = datetime(2026, 8, 20, 10, 0, tzinfo=UTC)
FIVE, WEEK = Window.FIVE_HOUR, Window.SEVEN_DAY


def h(hours: float) -> datetime:
    return NOW + timedelta(hours=hours)


def reading(name: str, five: WindowReading | None, week: WindowReading | None, *, age: timedelta = timedelta(0),
            status: AccountStatus = AccountStatus.ACTIVE) -> AccountReading:
    windows = {w: r for w, r in ((FIVE, five), (WEEK, week)) if r is not None}
    return AccountReading(name, status, NOW - age, windows)


def test_every_account_is_listed_read_or_not_and_needs_reauth_keeps_its_status() -> None:
    entries = [AccountEntry("b", AccountStatus.NEEDS_REAUTH), AccountEntry("a", AccountStatus.ACTIVE, serving=True),
               AccountEntry("c", AccountStatus.ACTIVE)]
    readings = [reading("a", WindowReading(0.4, h(2)), WindowReading(0.2, h(50))),
                reading("b", WindowReading(0.9, h(1)), WindowReading(0.5, h(70)), status=AccountStatus.NEEDS_REAUTH)]
    states = account_states(entries, readings, NOW)
    assert [(s.account, s.status, s.serving) for s in states] == [
        ("a", AccountStatus.ACTIVE, True), ("b", AccountStatus.NEEDS_REAUTH, False), ("c", AccountStatus.ACTIVE, False)]
    never = states[2]
    assert (never.read_at, never.age_seconds, never.stale, dict(never.windows)) == (None, None, False, {})
    b = states[1]
    assert b.windows[FIVE].utilization == 0.9 and b.windows[FIVE].counted_as == 0.9  # it counts, whatever its status
    assert not b.out_of_capacity and b.back_at is None


def test_windows_as_read_and_as_counted() -> None:
    week_spent = reading("spent", WindowReading(0.1, h(1)), WindowReading(1.0, h(30)))
    over = reading("over", WindowReading(1.3, h(2)), WindowReading(0.5, h(40)))
    rolled = reading("rolled", WindowReading(0.95, h(-1)), WindowReading(0.5, h(40)))
    unreadable = reading("nan", WindowReading(math.nan, h(1)), None)
    by = {s.account: s for s in account_states([], [week_spent, over, rolled, unreadable], NOW)}
    # Seed 004: an account whose week is spent counts as 100% in the 5-hour figure.
    assert by["spent"].windows[FIVE].counted_as == 1.0 and by["spent"].windows[FIVE].utilization == 0.1
    assert by["over"].windows[FIVE].utilization == 1.3 and by["over"].windows[FIVE].counted_as == 1.0
    assert by["rolled"].windows[FIVE].rolled_over and by["rolled"].windows[FIVE].counted_as == 0.0
    assert dict(by["nan"].windows) == {}  # NaN is not a measurement


def test_an_out_account_comes_back_at_the_later_of_the_resets_it_waits_on() -> None:
    both = reading("both", WindowReading(1.0, h(2)), WindowReading(1.0, h(30)))
    five_only = reading("five", WindowReading(1.0, h(2)), WindowReading(0.3, h(30)))
    unknown = reading("unknown", WindowReading(1.0, None), WindowReading(0.3, h(30)))
    by = {s.account: s for s in account_states([], [both, five_only, unknown], NOW)}
    assert (by["both"].out_of_capacity, by["both"].back_at) == (True, h(30))
    assert (by["five"].out_of_capacity, by["five"].back_at) == (True, h(2))  # a window with room adds nothing
    assert (by["unknown"].out_of_capacity, by["unknown"].back_at) == (True, None)  # no reset recorded: unknown


def test_a_reading_older_than_the_samplers_staleness_is_stale() -> None:
    fresh = reading("fresh", WindowReading(0.1, h(1)), None, age=STALE_AFTER - timedelta(seconds=1))
    stale = reading("stale", WindowReading(0.1, h(1)), None, age=STALE_AFTER)
    by = {s.account: s for s in account_states([], [fresh, stale], NOW)}
    assert not by["fresh"].stale and by["stale"].stale
    assert by["stale"].age_seconds == STALE_AFTER.total_seconds()
