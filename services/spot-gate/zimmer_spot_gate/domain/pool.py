"""The account pool read as one: its average utilization and when it comes back (seed 004).

Rules from seed 004 "Read across the whole pool, not one account" (the pooled figures) and
"When the pool comes back" (the unblock banner and the Next 7-day reset note). Pure: `now` is
always a parameter, nothing here reads a clock or a database.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from zimmer_spot_gate.domain.model import WINDOW_LENGTH, AccountReading, Window, WindowReading


@dataclass(frozen=True)
class PooledWindow:
    window: Window
    utilization: float  # pool average, 0..1
    accounts_averaged: int  # accounts with a reading of this window (the denominator)
    accounts_in_pool: int  # every account in the pool, read or not
    mean_seconds_to_reset: float
    accounts_rolled_over: int = 0  # averaged as 0: their window reset after their last reading
    reset_known: bool = True  # some averaged account recorded a future reset (else the mean is the full length)


def _clamp(u: float) -> float:
    return min(1.0, max(0.0, u))


def _reading(r: AccountReading, window: Window) -> WindowReading | None:
    """The account's reading of `window`, or None when it has none it can use.

    A NaN utilization is not a measurement, so it counts as no reading of that window.
    """
    w = r.windows.get(window)
    return None if w is None or math.isnan(w.utilization) else w


def rolled_over(w: WindowReading, now: datetime) -> bool:
    """The window reset after this reading: what it measured is gone (seed 004: "a past
    timestamp describes a window that has already rolled over")."""
    return w.resets_at is not None and w.resets_at <= now


def _week_spent(r: AccountReading, now: datetime) -> bool:
    week = _reading(r, Window.SEVEN_DAY)
    return week is not None and week.spent and not rolled_over(week, now)


def pooled_value(r: AccountReading, window: Window, now: datetime) -> float | None:
    """This account's contribution to `window`'s average, or None when it contributes nothing.

    Seed 004 "Read across the whole pool": an account whose 7-day window is spent counts as
    100% in the 5-hour figure, because its 5-hour headroom cannot be served — otherwise a dead
    account's empty (or unread) 5-hour counter would read as room to spend. A window whose reset
    has passed since the reading counts as 0 until a new reading says otherwise: it rolled over,
    and holding spot work on the stale figure would keep it held until the next sample.
    """
    if window is Window.FIVE_HOUR and _week_spent(r, now):
        return 1.0
    w = _reading(r, window)
    if w is None:
        return None
    return 0.0 if rolled_over(w, now) else _clamp(w.utilization)


def pooled_windows(
    readings: Sequence[AccountReading], now: datetime, pool_size: int | None = None
) -> dict[Window, PooledWindow]:
    """Pool average per window (seed 004, "Read across the whole pool, not one account").

    Every account counts whatever its status (active, quota_exceeded, needs_reauth): a
    needs_reauth account's windows keep draining while it waits for a human, and dropping it
    would make the average jump each time an account left or rejoined the pool. An account with
    no reading of a window leaves that window's denominator. A window no account can read is
    absent from the result, so the gate falls open on no_snapshot.

    `mean_seconds_to_reset` averages (resets_at - now) over the averaged accounts, ignoring
    missing and past reset times (a past reset describes a window that already rolled over).
    When none is usable it is the full window length: the pacing curve divides what is left by
    the time left, so assuming the whole window remains gives the slowest, most conservative
    sustainable pace — never a division by zero, and never "resets any moment, spend it all".
    """
    if pool_size is not None and pool_size < len(readings):
        raise ValueError(f"pool_size {pool_size} is smaller than the {len(readings)} readings given")
    in_pool = len(readings) if pool_size is None else pool_size
    result: dict[Window, PooledWindow] = {}
    for window in Window:
        values: list[float] = []
        waits: list[float] = []
        rolled = 0
        for r in readings:
            value = pooled_value(r, window, now)
            if value is None:
                continue
            values.append(value)
            read = _reading(r, window)
            if read is not None and rolled_over(read, now) and not (window is Window.FIVE_HOUR and _week_spent(r, now)):
                rolled += 1
            # A week-spent account counted as 100% here still contributes its own 5-hour
            # reset time: the figure is about time left in *this* window.
            w = _reading(r, window)
            if w is not None and w.resets_at is not None and w.resets_at > now:
                waits.append((w.resets_at - now).total_seconds())
        if not values:
            continue
        mean_wait = sum(waits) / len(waits) if waits else WINDOW_LENGTH[window].total_seconds()
        result[window] = PooledWindow(
            window=window,
            utilization=_clamp(sum(values) / len(values)),
            accounts_averaged=len(values),
            accounts_in_pool=in_pool,
            mean_seconds_to_reset=mean_wait,
            accounts_rolled_over=rolled,
            reset_known=bool(waits),
        )
    return result


def _iso_utc(at: datetime) -> str:
    if at.tzinfo is None:  # naive datetimes in this codebase are UTC by convention
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def spent_windows(r: AccountReading, now: datetime) -> list[WindowReading] | None:
    """The windows this account is waiting on, or None when it read nothing at all.

    Seed 004 "When the pool comes back": a window is waited on when it is spent and its reset
    is not in the past — "a past timestamp describes a window that has already rolled over",
    so it is not something the pool waits for. An unread window is no evidence of being spent.
    """
    readable = [w for w in (_reading(r, window) for window in Window) if w is not None]
    if not readable:
        return None
    return [w for w in readable if w.spent and not (w.resets_at is not None and w.resets_at <= now)]


@dataclass(frozen=True)
class UnblockState:
    state: Literal["countdown", "not_blocked", "unknown", "no_readings"]
    at: datetime | None  # absolute instant (the browser ticks from it), only for countdown
    accounts_out: int
    accounts_read: int
    sentence: str


def unblock_state(readings: Sequence[AccountReading], now: datetime) -> UnblockState:
    """When work gets unblocked (seed 004, "When the pool comes back").

    An account comes back at the LATER of the resets it is actually waiting on (it serves only
    when both windows have room; a window with room contributes nothing). The pool comes back at
    the EARLIEST such account moment. One rule, not a 5-hour answer and a 7-day answer: measured
    separately, an account with an empty 5-hour window and a week returning in twenty minutes
    would be hidden behind a 5-hour rollover hours later.
    """
    read = 0
    out = 0
    room_now = False
    moments: list[datetime] = []
    for r in readings:
        waiting = spent_windows(r, now)
        if waiting is None:
            continue  # no reading at all: not part of the banner's question
        read += 1
        if not waiting:
            room_now = True
            continue
        out += 1
        resets = [w.resets_at for w in waiting if w.resets_at is not None]
        if len(resets) == len(waiting):  # a spent window with no reset time: moment unknown
            moments.append(max(resets))
    if read == 0:
        return UnblockState("no_readings", None, 0, 0, "No account has a quota reading yet.")
    if room_now:
        # No clock: ticking toward the next rollover would read as a wait that is not one.
        return UnblockState("not_blocked", None, out, read, "Work is not blocked.")
    if moments:
        at = min(moments)
        sentence = f"Work resumes at {_iso_utc(at)}; {out} of {read} accounts are out of capacity."
        return UnblockState("countdown", at, out, read, sentence)
    # A zeroed clock would read as "any moment now"; say that nothing recorded a reset instead.
    return UnblockState(
        "unknown", None, out, read,
        f"Nothing here says when work resumes: all {out} accounts are out and none recorded a reset time.",
    )


@dataclass(frozen=True)
class WeeklyReset:
    at: datetime | None  # soonest future reset among the week-spent accounts
    accounts_week_spent: int


def next_weekly_reset(readings: Sequence[AccountReading], now: datetime) -> WeeklyReset:
    """The Next 7-day reset note (seed 004, "When the pool comes back").

    Measured only over accounts whose week is spent — those are the ones a weekly rollover
    returns to service — and it is the detail, not the headline: an account whose week returns
    at noon but whose 5-hour window is spent until 2pm is not servable at noon. The count is
    reported separately because a spent window does not always carry a reset time; a past reset
    is not counted (that window already rolled over).
    """
    spent = 0
    resets: list[datetime] = []
    for r in readings:
        week = _reading(r, Window.SEVEN_DAY)
        if week is None or not week.spent:
            continue
        if week.resets_at is None:
            spent += 1
        elif week.resets_at > now:
            spent += 1
            resets.append(week.resets_at)
    return WeeklyReset(at=min(resets) if resets else None, accounts_week_spent=spent)
