"""Simulated Claude accounts: 5-hour and 7-day windows whose utilization climbs with the spend the
fleet routes to them and falls to zero at `resets_at`.

The windows are the simulator's choice (profile.five_hour_cycle_seconds): a reading says when the
window resets, and the control plane believes it. Nothing here fakes the services' clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from zimmer_sim.profile import SIM_PRICES, Profile

Status = Literal["active", "needs_reauth"]


@dataclass
class SimWindow:
    capacity: float  # dollars
    length: timedelta
    resets_at: datetime
    spent: float = 0.0

    def roll(self, now: datetime) -> bool:
        """Past its reset: empty again, and the next window begins. True when it rolled."""
        rolled = False
        while now >= self.resets_at:
            self.resets_at += self.length
            self.spent, rolled = 0.0, True
        return rolled

    @property
    def utilization(self) -> float:
        return min(10.0, self.spent / self.capacity) if self.capacity > 0 else 1.0


@dataclass
class SimAccount:
    name: str
    five_hour: SimWindow
    seven_day: SimWindow
    status: Status = "active"
    reauth_at: datetime | None = None  # when a lost credential comes back
    back_at: datetime | None = None  # when it last came back
    resets: int = 0

    def tick(self, now: datetime) -> None:
        self.resets += int(self.five_hour.roll(now))
        self.seven_day.roll(now)
        if self.status == "needs_reauth" and self.reauth_at is not None and now >= self.reauth_at:
            self.status, self.reauth_at, self.back_at = "active", None, now

    def charge(self, dollars: float) -> None:
        self.five_hour.spent += dollars
        self.seven_day.spent += dollars


class AccountPool:
    def __init__(self, profile: Profile, rng: random.Random, now: datetime):
        self.rng = rng
        five, seven = timedelta(seconds=profile.five_hour_cycle_seconds), timedelta(seconds=profile.seven_day_cycle_seconds)
        self.accounts = {
            f"sim-account-{i + 1}": SimAccount(
                f"sim-account-{i + 1}",
                # Staggered: the accounts' windows end at different moments, as real ones do.
                SimWindow(profile.capacity_five_hour, five, now + five * (0.5 + 0.5 * (i + 1) / profile.accounts)),
                SimWindow(profile.capacity_seven_day, seven, now + seven * (0.3 + 0.7 * (i + 1) / profile.accounts)))
            for i in range(profile.accounts)}

    def tick(self, now: datetime) -> None:
        for account in self.accounts.values():
            account.tick(now)

    def assign(self) -> str:
        """The account a new Claude session spends on: the least used active one."""
        active = [a for a in self.accounts.values() if a.status == "active"] or list(self.accounts.values())
        return min(active, key=lambda a: (a.five_hour.utilization, a.name)).name

    def lose_credentials(self, name: str, now: datetime, seconds: float) -> None:
        account = self.accounts[name]
        account.status, account.reauth_at = "needs_reauth", now + timedelta(seconds=seconds)


def request_dollars(model: str, input_tokens: int, output_tokens: int) -> float:
    price_in, price_out = SIM_PRICES.get(model, (5.0, 25.0))
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


def utc_now() -> datetime:
    return datetime.now(UTC)
