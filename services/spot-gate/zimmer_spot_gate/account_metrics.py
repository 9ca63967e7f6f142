"""Spot-gate metrics for each account of the pool: a series for every number the Quotas page's
account table shows (issue 32 #3). A figure the account has none of (a window it did not read, a
reset it did not record) has no series rather than a made-up value, and an account that leaves
the view takes its series with it."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Gauge

from zimmer_common.contracts.spot_policy import AccountView, AccountWindowView, PolicyView

STATUSES = ("active", "quota_exceeded", "needs_reauth")
WINDOWS = ("five_hour", "seven_day")


class AccountMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.utilization = Gauge("zimmer_spot_account_utilization", "Each account's newest reading of each window "
                                 "(0-1 of the window; above 1 is past its cap)", ["account", "window"], registry=r)
        self.counted = Gauge("zimmer_spot_account_counted_utilization", "What the pool average counts for each "
                             "account and window (0-1: clamped, 0 once rolled over, 1 in the 5-hour figure when the "
                             "week is spent)", ["account", "window"], registry=r)
        self.reset = Gauge("zimmer_spot_account_reset_seconds", "Seconds until each account's window resets (absent "
                           "when the reading recorded no reset, or the reset has passed)", ["account", "window"],
                           registry=r)
        self.age = Gauge("zimmer_spot_account_reading_age_seconds", "How old each account's newest quota reading is "
                         "(absent when never read)", ["account"], registry=r)
        self.status = Gauge("zimmer_spot_account_status", "1 for each account's status last reported "
                            "(active, quota_exceeded, needs_reauth), 0 for the others", ["account", "status"],
                            registry=r)
        self.back = Gauge("zimmer_spot_account_back_seconds", "Seconds until an out-of-capacity account can serve "
                          "again (absent when it is not out, or a spent window recorded no reset)", ["account"],
                          registry=r)
        self._seen: set[str] = set()

    def observe(self, view: PolicyView, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        current = {a.account for a in view.accounts}
        for gone in self._seen - current:
            self._forget(gone)
        self._seen = current
        for a in view.accounts:
            self._account(a, now)

    def _account(self, a: AccountView, now: datetime) -> None:
        for status in STATUSES:
            self.status.labels(a.account, status).set(1 if a.status == status else 0)
        _set(self.age, (a.account,), a.reading_age_seconds)
        _set(self.back, (a.account,), _seconds_until(a.back_at, now))
        for name, w in (("five_hour", a.five_hour), ("seven_day", a.seven_day)):
            self._window(a.account, name, w, now)

    def _window(self, account: str, window: str, w: AccountWindowView | None, now: datetime) -> None:
        labels = (account, window)
        _set(self.utilization, labels, w.utilization if w else None)
        _set(self.counted, labels, w.counted_as if w else None)
        _set(self.reset, labels, _seconds_until(w.resets_at, now) if w else None)

    def _forget(self, account: str) -> None:
        for status in STATUSES:
            _set(self.status, (account, status), None)
        _set(self.age, (account,), None)
        _set(self.back, (account,), None)
        for window in WINDOWS:
            for gauge in (self.utilization, self.counted, self.reset):
                _set(gauge, (account, window), None)


def _seconds_until(at: datetime | None, now: datetime) -> float | None:
    if at is None:
        return None
    seconds = (at - now).total_seconds()
    return seconds if seconds > 0 else None  # a reset that has passed is not something to wait for


def _set(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
    if value is not None:
        gauge.labels(*labels).set(value)
    else:
        with contextlib.suppress(KeyError):  # no series rather than a made-up number
            gauge.remove(*labels)
