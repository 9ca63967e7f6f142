"""Each account of the pool as the Quotas page lists it (seed 004, "Read across the whole pool,
not one account"; issue 32 #3): its status, each window as read and as the pool average counts
it, when it comes back, and how old its reading is.

The pooled figures hide the accounts behind them: a `needs_reauth` account still counts in the
average (its windows keep draining while it waits for a human), so without this list nothing
on the page says that one account cannot serve. Pure: `now` is a parameter, nothing here reads
a clock or a database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from zimmer_spot_gate.domain.model import AccountReading, AccountStatus, Window
from zimmer_spot_gate.domain.pool import pooled_value, rolled_over, spent_windows
from zimmer_spot_gate.domain.pricing import SPARE_MAX_STALENESS

# A reading this old is stale: the usage sampler re-reads a non-serving account once its newest
# reading is this old (seed 003, ClaudeUsageSamplerJob), so an older one means a sample failed.
STALE_AFTER = SPARE_MAX_STALENESS


@dataclass(frozen=True)
class AccountWindow:
    utilization: float  # as read: above 1 is past the window's cap
    resets_at: datetime | None  # None: the reading recorded no reset time
    rolled_over: bool  # the reset passed since this reading: the average counts 0 until read again
    counted_as: float  # what the pool average counts for this account, 0..1


@dataclass(frozen=True)
class AccountEntry:
    """An account of the pool, read or not: its status is the newest one reported."""

    account: str
    status: AccountStatus
    serving: bool = False


@dataclass(frozen=True)
class AccountState:
    account: str
    status: AccountStatus
    serving: bool
    read_at: datetime | None  # None: never read, so it is left out of every average
    age_seconds: float | None
    stale: bool  # read, but longer ago than STALE_AFTER
    windows: Mapping[Window, AccountWindow] = field(default_factory=dict)
    out_of_capacity: bool = False  # a window it waits on is spent
    back_at: datetime | None = None  # the later of the resets it waits on; None when not out or unknown


def _back_at(r: AccountReading, now: datetime) -> tuple[bool, datetime | None]:
    """Seed 004 "When the pool comes back", for one account: out when a window it waits on is
    spent; back at the later of those resets, unknown (None) when one of them recorded none."""
    waiting = spent_windows(r, now)
    if not waiting:
        return False, None
    resets = [w.resets_at for w in waiting if w.resets_at is not None]
    return True, max(resets) if len(resets) == len(waiting) else None


def account_states(entries: Sequence[AccountEntry], readings: Sequence[AccountReading], now: datetime,
                   stale_after: timedelta = STALE_AFTER) -> list[AccountState]:
    """Every account of the pool in name order, with its newest reading (if any) read the way
    the pool average reads it. An account with a reading but no entry (not expected: a reading
    upserts its account) is listed from the reading alone."""
    newest = {r.account: r for r in readings}
    known = {e.account: e for e in entries}
    for r in readings:
        known.setdefault(r.account, AccountEntry(r.account, r.status))
    states = []
    for name in sorted(known):
        entry, r = known[name], newest.get(name)
        if r is None:
            states.append(AccountState(name, entry.status, entry.serving, None, None, False))
            continue
        windows = {}
        for window, w in r.windows.items():
            if math.isnan(w.utilization):
                continue  # not a measurement: the pool reads it as no reading of that window
            counted = pooled_value(r, window, now)
            windows[window] = AccountWindow(w.utilization, w.resets_at, rolled_over(w, now),
                                            0.0 if counted is None else counted)
        age = max(0.0, (now - r.read_at).total_seconds())
        out, back = _back_at(r, now)
        states.append(AccountState(name, entry.status, entry.serving, r.read_at, age,
                                   age >= stale_after.total_seconds(), windows, out, back))
    return states
