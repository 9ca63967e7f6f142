"""The gate's inputs, read from the database: the one place they are read.

The pool's side (readings, calibration, burn rates) changes every few minutes and is the bulk
of the reading, so admissions share it through a short-lived cache; the fleet's side (what is
running now) changes with every admission and is read fresh, under the admission lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_spot_gate.domain.gate import Candidate, Snapshot, WindowState
from zimmer_spot_gate.domain.model import AccountReading
from zimmer_spot_gate.domain.pool import pooled_windows
from zimmer_spot_gate.domain.rates import observed_rates
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store.quota import PolicyRow

RATE_LOOKBACK = timedelta(minutes=30)


@dataclass(frozen=True)
class PoolParts:
    windows: tuple[WindowState, ...]
    accounts_averaged: int
    pool_size: int
    readings: list[AccountReading]
    burn_rates: dict[tuple[str, str], float]


async def read_pool_parts(conn: AsyncConnection, now: datetime) -> PoolParts:
    readings, pool_size = await quota.newest_readings(conn)
    pooled = pooled_windows(readings, now, pool_size)
    capacities = await quota.capacities(conn)
    uncalibrated = [w for w in pooled if w not in capacities]
    rates = observed_rates(await quota.readings_since(conn, now - RATE_LOOKBACK)) if uncalibrated else {}
    windows = tuple(WindowState(w, p.utilization, p.mean_seconds_to_reset / 60, capacities.get(w), rates.get(w, 0.0),
                                p.accounts_rolled_over) for w, p in pooled.items())
    averaged = max((p.accounts_averaged for p in pooled.values()), default=0)
    burn = {(r.harness, r.model): float(r.dollars_per_minute) for r in await quota.all_burn_rates(conn)}
    return PoolParts(windows, averaged, pool_size, readings, burn)


@dataclass(frozen=True)
class PoolView:
    snapshot: Snapshot
    policy: PolicyRow
    readings: list[AccountReading]
    pool_size: int


async def read_pool(conn: AsyncConnection, now: datetime, candidate: Candidate | None = None) -> PoolView:
    """Everything fresh, for surfaces that show the decision (the policy view). With no
    candidate, the decision is for a typical new spot session: the mean burn rate."""
    policy_row = await quota.policy(conn)
    parts = await read_pool_parts(conn, now)
    if candidate is None:
        rates = parts.burn_rates.values()
        candidate = Candidate(sum(rates) / len(rates) if rates else 0.0)
    snap = Snapshot(policy_row.policy, parts.windows, await quota.fleet(conn), candidate, parts.accounts_averaged,
                    parts.pool_size)
    return PoolView(snap, policy_row, parts.readings, parts.pool_size)


class PoolCache:
    """The pool's side of the snapshot, shared by admissions for `ttl` seconds (monotonic).

    A reading or calibration recorded by this process invalidates it at once; one recorded by
    another replica is seen within `ttl`. Readings arrive every few minutes, so a second-old
    pool is the same pool.
    """

    def __init__(self, engine: Callable[[], AsyncEngine], now: Callable[[], datetime], ttl: float = 1.0):
        self._engine = engine
        self._now = now
        self.ttl = ttl
        self._parts: PoolParts | None = None
        self._read_at = 0.0

    def invalidate(self) -> None:
        self._parts = None

    async def get(self, conn: AsyncConnection | None = None) -> PoolParts:
        """The cached parts, or a fresh read. With `conn` (an admission's own transaction) the
        read is a savepoint on it: a failed read cannot poison the transaction, and the caller
        never needs a second connection from the pool while it holds one."""
        if self._parts is None or time.monotonic() - self._read_at > self.ttl:
            if conn is None:
                async with self._engine().connect() as own:
                    parts = await read_pool_parts(own, self._now())
            else:
                async with conn.begin_nested():
                    parts = await read_pool_parts(conn, self._now())
            self._parts, self._read_at = parts, time.monotonic()
        return self._parts
