"""Builds the gate's snapshot from the database: the one place the gate's inputs are read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_spot_gate.domain.gate import Candidate, Snapshot, WindowState
from zimmer_spot_gate.domain.model import AccountReading
from zimmer_spot_gate.domain.pool import pooled_windows
from zimmer_spot_gate.domain.rates import observed_rates
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store.quota import PolicyRow

RATE_LOOKBACK = timedelta(minutes=30)


@dataclass(frozen=True)
class PoolView:
    snapshot: Snapshot
    policy: PolicyRow
    readings: list[AccountReading]
    pool_size: int


async def read_pool(conn: AsyncConnection, now: datetime, candidate: Candidate) -> PoolView:
    policy_row = await quota.policy(conn)
    readings, pool_size = await quota.newest_readings(conn)
    pooled = pooled_windows(readings, now, pool_size)
    capacities = await quota.capacities(conn)
    uncalibrated = [w for w in pooled if w not in capacities]
    rates = observed_rates(await quota.readings_since(conn, now - RATE_LOOKBACK)) if uncalibrated else {}
    windows = tuple(WindowState(w, p.utilization, p.mean_seconds_to_reset / 60, capacities.get(w), rates.get(w, 0.0))
                    for w, p in pooled.items())
    averaged = max((p.accounts_averaged for p in pooled.values()), default=0)
    snap = Snapshot(policy_row.policy, windows, await quota.fleet(conn), candidate, averaged, pool_size)
    return PoolView(snap, policy_row, readings, pool_size)
