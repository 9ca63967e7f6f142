"""Seed 004 "Read across the whole pool, not one account" and "When the pool comes back"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.model import WINDOW_LENGTH, AccountReading, AccountStatus, Window, WindowReading
from zimmer_spot_gate.domain.pool import next_weekly_reset, pooled_windows, unblock_state

NOW = datetime(2026, 8, 20, 10, 0, tzinfo=UTC)
FIVE, WEEK = Window.FIVE_HOUR, Window.SEVEN_DAY


def acct(name: str, five: float | None = None, week: float | None = None, *, five_reset: datetime | None = None,
         week_reset: datetime | None = None, status: AccountStatus = AccountStatus.ACTIVE) -> AccountReading:
    windows = {}
    if five is not None:
        windows[FIVE] = WindowReading(five, five_reset)
    if week is not None:
        windows[WEEK] = WindowReading(week, week_reset)
    return AccountReading(name, status, NOW, windows)


def h(hours: float) -> datetime:
    return NOW + timedelta(hours=hours)


# ---- pooled_windows -------------------------------------------------------------------------

def test_one_account_at_cap_does_not_stop_the_pool():
    # Deciding on a single account stopped the fleet while the rest sat idle; the pool averages.
    pool = pooled_windows([acct("a", 1.0, 0.5), acct("b", 0.1, 0.1), acct("c", 0.1, 0.1)], NOW)
    assert pool[FIVE].utilization == pytest.approx(0.4)
    assert pool[WEEK].utilization == pytest.approx(0.7 / 3)


@pytest.mark.parametrize("status", list(AccountStatus))
def test_every_status_counts(status):
    pool = pooled_windows([acct("a", 0.2, 0.2), acct("b", 0.6, 0.4, status=status)], NOW)
    assert pool[FIVE].accounts_averaged == 2
    assert pool[FIVE].utilization == pytest.approx(0.4)


def test_an_account_falling_into_needs_reauth_does_not_move_the_average():
    # Leaving it out would make the average jump each time an account fell out or came back.
    before = pooled_windows([acct("a", 0.2, 0.3), acct("b", 0.8, 0.5)], NOW)
    after = pooled_windows([acct("a", 0.2, 0.3), acct("b", 0.8, 0.5, status=AccountStatus.NEEDS_REAUTH)], NOW)
    assert before == after


def test_week_spent_account_counts_as_full_in_the_five_hour_figure():
    # Its 5-hour headroom cannot be served: a dead account's empty counter is not room to spend.
    pool = pooled_windows([acct("dead", 0.0, 1.0), acct("b", 0.2, 0.2)], NOW)
    assert pool[FIVE].utilization == pytest.approx(0.6)
    assert pool[WEEK].utilization == pytest.approx(0.6)


def test_week_spent_account_with_no_five_hour_reading_still_counts_full():
    pool = pooled_windows([acct("dead", None, 1.0), acct("b", 0.2, 0.2)], NOW)
    assert pool[FIVE].accounts_averaged == 2
    assert pool[FIVE].utilization == pytest.approx(0.6)


def test_week_over_one_is_spent_and_clamped():
    pool = pooled_windows([acct("a", 0.1, 1.3)], NOW)
    assert pool[WEEK].utilization == 1.0 and pool[FIVE].utilization == 1.0


def test_unread_account_leaves_the_denominator_and_the_decision_says_how_many():
    pool = pooled_windows([acct("a", 0.4, 0.2), acct("never"), acct("c", 0.8, None)], NOW, pool_size=4)
    assert pool[FIVE].utilization == pytest.approx(0.6)
    assert (pool[FIVE].accounts_averaged, pool[FIVE].accounts_in_pool) == (2, 4)
    assert (pool[WEEK].accounts_averaged, pool[WEEK].accounts_in_pool) == (1, 4)


def test_pool_size_defaults_to_readings_and_must_cover_them():
    assert pooled_windows([acct("a", 0.1), acct("b")], NOW)[FIVE].accounts_in_pool == 2
    with pytest.raises(ValueError):
        pooled_windows([acct("a", 0.1), acct("b")], NOW, pool_size=1)


def test_nothing_readable_means_no_window_so_the_gate_falls_open_on_no_snapshot():
    assert pooled_windows([], NOW) == {}
    assert pooled_windows([acct("a"), acct("b")], NOW) == {}


def test_a_window_nobody_reads_is_absent_while_the_other_is_present():
    pool = pooled_windows([acct("a", 0.3, None)], NOW)
    assert set(pool) == {FIVE}


def test_nan_utilization_is_no_reading():
    pool = pooled_windows([acct("a", float("nan"), 0.5), acct("b", 0.4, 0.5)], NOW)
    assert pool[FIVE].accounts_averaged == 1 and pool[FIVE].utilization == pytest.approx(0.4)


def test_negative_utilization_is_clamped_to_zero():
    assert pooled_windows([acct("a", -0.5, 0.0)], NOW)[FIVE].utilization == 0.0


def test_mean_seconds_to_reset_ignores_missing_and_past_resets():
    pool = pooled_windows([acct("a", 0.1, five_reset=h(1)), acct("b", 0.1, five_reset=h(3)),
                           acct("c", 0.1, five_reset=h(-1)), acct("d", 0.1)], NOW)
    assert pool[FIVE].mean_seconds_to_reset == pytest.approx(2 * 3600)


@pytest.mark.parametrize("window", list(Window))
def test_mean_seconds_to_reset_falls_back_to_the_full_window(window):
    # Conservative: the slowest sustainable pace, never a division by zero.
    pool = pooled_windows([acct("a", 0.5, 0.5, five_reset=h(-1))], NOW)
    assert pool[window].mean_seconds_to_reset == WINDOW_LENGTH[window].total_seconds()


utilizations = st.floats(min_value=-0.5, max_value=1.5, allow_nan=False)
maybe_util = st.one_of(st.none(), utilizations)
accounts = st.lists(st.tuples(maybe_util, maybe_util, st.sampled_from(list(AccountStatus))), max_size=8)


def build(rows):
    return [acct(f"a{i}", f, w, status=s) for i, (f, w, s) in enumerate(rows)]


@given(accounts)
def test_pooled_utilization_is_within_unit_interval(rows):
    for pw in pooled_windows(build(rows), NOW).values():
        assert 0.0 <= pw.utilization <= 1.0
        assert 1 <= pw.accounts_averaged <= pw.accounts_in_pool


@given(accounts)
def test_adding_an_unread_account_changes_nothing_but_the_pool_size(rows):
    base = pooled_windows(build(rows), NOW)
    more = pooled_windows(build(rows) + [acct("unread")], NOW)
    assert set(base) == set(more)
    for w in base:
        assert more[w].utilization == base[w].utilization
        assert more[w].accounts_averaged == base[w].accounts_averaged


@given(accounts, st.data())
def test_raising_one_accounts_utilization_never_lowers_the_pool(rows, data):
    if not rows:
        return
    i = data.draw(st.integers(0, len(rows) - 1))
    f, w, s = rows[i]
    bump = data.draw(st.floats(min_value=0, max_value=1))
    raised = list(rows)
    raised[i] = (None if f is None else f + bump, None if w is None else w + bump, s)
    base, up = pooled_windows(build(rows), NOW), pooled_windows(build(raised), NOW)
    for window in base:
        assert up[window].utilization >= base[window].utilization - 1e-12


@given(accounts, st.randoms())
def test_order_of_accounts_does_not_matter(rows, rnd):
    shuffled = build(rows)
    rnd.shuffle(shuffled)
    a, b = pooled_windows(build(rows), NOW), pooled_windows(shuffled, NOW)
    assert set(a) == set(b)
    for w in a:
        assert a[w].utilization == pytest.approx(b[w].utilization)


# ---- unblock_state ----------------------------------------------------------------------------

def test_account_comes_back_at_the_later_of_the_resets_it_waits_on():
    state = unblock_state([acct("a", 1.0, 1.0, five_reset=h(2), week_reset=h(5))], NOW)
    assert (state.state, state.at) == ("countdown", h(5))


def test_a_window_with_room_contributes_nothing():
    # Empty 5-hour window, week spent: back when the week is, whatever its 5-hour window does.
    state = unblock_state([acct("a", 0.0, 1.0, five_reset=h(4), week_reset=h(1))], NOW)
    assert state.at == h(1)


def test_over_five_hour_cap_with_week_left_comes_back_at_the_five_hour_roll():
    state = unblock_state([acct("a", 1.0, 0.3, five_reset=h(2), week_reset=h(90))], NOW)
    assert state.at == h(2)


def test_weekly_relief_twenty_minutes_out_is_not_hidden_behind_a_later_five_hour_roll():
    state = unblock_state([acct("week", 0.0, 1.0, week_reset=NOW + timedelta(minutes=20)),
                           acct("five", 1.0, 0.4, five_reset=h(3))], NOW)
    assert state.at == NOW + timedelta(minutes=20)


def test_pool_moment_is_the_earliest_account_and_the_banner_counts_who_is_out():
    state = unblock_state([acct("a", 1.0, 0.2, five_reset=h(3)), acct("b", 1.0, 0.2, five_reset=h(1)),
                           acct("c", 0.2, 1.0, week_reset=h(2))], NOW)
    assert (state.state, state.at, state.accounts_out, state.accounts_read) == ("countdown", h(1), 3, 3)
    assert "2026-08-20T11:00:00Z" in state.sentence and "3 of 3" in state.sentence


def test_one_account_with_room_means_not_blocked_and_no_clock():
    state = unblock_state([acct("a", 1.0, 0.2, five_reset=h(1)), acct("b", 0.5, 0.5)], NOW)
    assert (state.state, state.at, state.accounts_out, state.accounts_read) == ("not_blocked", None, 1, 2)
    assert state.sentence == "Work is not blocked."


def test_all_out_and_no_reset_recorded_is_unknown_not_a_zeroed_clock():
    state = unblock_state([acct("a", 1.0, 0.2), acct("b", 0.1, 1.0)], NOW)
    assert (state.state, state.at, state.accounts_out) == ("unknown", None, 2)
    assert state.sentence.startswith("Nothing here says when work resumes")


def test_account_with_a_spent_window_missing_its_reset_has_an_unknown_moment():
    # Waiting on both windows, one of unknown length: its own moment is unknown, the others count.
    state = unblock_state([acct("a", 1.0, 1.0, five_reset=h(1)), acct("b", 1.0, 0.1, five_reset=h(4))], NOW)
    assert (state.state, state.at) == ("countdown", h(4))
    assert unblock_state([acct("a", 1.0, 1.0, five_reset=h(1))], NOW).state == "unknown"


def test_no_readings():
    for readings in ([], [acct("a"), acct("b")]):
        state = unblock_state(readings, NOW)
        assert (state.state, state.at, state.accounts_read) == ("no_readings", None, 0)
        assert state.sentence


def test_unread_accounts_are_not_counted_as_read_or_out():
    state = unblock_state([acct("never"), acct("a", 1.0, 0.1, five_reset=h(1))], NOW)
    assert (state.state, state.accounts_out, state.accounts_read) == ("countdown", 1, 1)


def test_a_past_reset_is_not_waited_on():
    # A past timestamp describes a window that already rolled over: that account has room now.
    assert unblock_state([acct("a", 1.0, 0.1, five_reset=h(-0.1))], NOW).state == "not_blocked"
    assert unblock_state([acct("a", 1.0, 1.0, five_reset=h(2), week_reset=h(-1))], NOW).at == h(2)


def test_a_reset_exactly_now_has_already_happened():
    assert unblock_state([acct("a", 1.0, 0.1, five_reset=NOW)], NOW).state == "not_blocked"


def test_countdown_instant_is_absolute_utc_even_from_another_zone():
    other = timezone(timedelta(hours=2))
    state = unblock_state([acct("a", 1.0, 0.1, five_reset=datetime(2026, 8, 20, 14, 30, tzinfo=other))], NOW)
    assert state.at == datetime(2026, 8, 20, 12, 30, tzinfo=UTC)
    assert "2026-08-20T12:30:00Z" in state.sentence


@given(st.lists(st.tuples(st.floats(0, 1.2), st.floats(0, 1.2), st.one_of(st.none(), st.integers(-300, 300)),
                          st.one_of(st.none(), st.integers(-300, 300))), max_size=6))
def test_countdown_is_never_in_the_past_and_only_when_everyone_is_out(rows):
    readings = [acct(f"a{i}", f, w, five_reset=None if fr is None else NOW + timedelta(minutes=fr),
                     week_reset=None if wr is None else NOW + timedelta(minutes=wr))
                for i, (f, w, fr, wr) in enumerate(rows)]
    state = unblock_state(readings, NOW)
    assert state.accounts_read == len(readings)
    if state.state == "countdown":
        assert state.at > NOW and state.accounts_out == state.accounts_read
    else:
        assert state.at is None


# ---- next_weekly_reset ------------------------------------------------------------------------

NOON, TWO_PM = datetime(2026, 8, 20, 12, 0, tzinfo=UTC), datetime(2026, 8, 20, 14, 0, tzinfo=UTC)


def test_week_back_at_noon_but_five_hour_spent_until_two_is_back_at_two():
    readings = [acct("a", 1.0, 1.0, five_reset=TWO_PM, week_reset=NOON)]
    assert unblock_state(readings, NOW).at == TWO_PM
    assert next_weekly_reset(readings, NOW).at == NOON


def test_weekly_note_is_measured_only_over_week_spent_accounts():
    readings = [acct("a", 0.2, 0.9, week_reset=h(1)), acct("b", 0.1, 1.0, week_reset=h(30)),
                acct("c", 0.1, 1.0, week_reset=h(20))]
    assert next_weekly_reset(readings, NOW) == next_weekly_reset(readings[1:], NOW)
    assert next_weekly_reset(readings, NOW).at == h(20)
    assert next_weekly_reset(readings, NOW).accounts_week_spent == 2


def test_no_account_weekly_blocked_names_no_rollover():
    reset = next_weekly_reset([acct("a", 1.0, 0.5, week_reset=h(5)), acct("b")], NOW)
    assert (reset.at, reset.accounts_week_spent) == (None, 0)


def test_spent_weeks_without_reset_times_are_the_count_alone():
    reset = next_weekly_reset([acct("a", 0.1, 1.0), acct("b", 0.1, 1.0)], NOW)
    assert (reset.at, reset.accounts_week_spent) == (None, 2)


def test_spent_weeks_are_counted_separately_from_the_soonest_reset():
    reset = next_weekly_reset([acct("a", 0.1, 1.0), acct("b", 0.1, 1.0, week_reset=h(8))], NOW)
    assert (reset.at, reset.accounts_week_spent) == (h(8), 2)


def test_weekly_note_ignores_a_reset_that_already_passed():
    reset = next_weekly_reset([acct("a", 0.1, 1.0, week_reset=h(-2)), acct("b", 0.1, 1.0, week_reset=h(9))], NOW)
    assert (reset.at, reset.accounts_week_spent) == (h(9), 1)
