"""The gate's inputs, read from the database: the one place they are read, and the one place a
decision is made from them (`GateInputs.decide`), whoever asks: an admission, the ceiling sweep,
start now, or the policy view every surface renders. So the card's badge and a spawn's answer in
the same second come from the same function over the same kind of snapshot.

The pool's side (readings, calibration, burn rates) changes every few minutes and is the bulk
of the reading, so admissions share it through a short-lived cache; the fleet's side (what is
running now) changes with every admission and is read fresh, under the admission lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.spot import SpawnSession
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.gate import Candidate, Decision, FleetState, WindowState, evaluate
from zimmer_spot_gate.domain.model import AccountReading
from zimmer_spot_gate.domain.pool import pooled_windows
from zimmer_spot_gate.domain.pricing import fallback_burn, session_burn
from zimmer_spot_gate.domain.rates import LOOKBACK, observed_rates
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store.quota import PolicyRow

# What a spawn that names neither gets: the candidate the policy view decides for.
DEFAULT_HARNESS = str(SpawnSession.model_fields["harness"].default)
DEFAULT_MODEL = str(SpawnSession.model_fields["model"].default)


@dataclass(frozen=True)
class PoolParts:
    windows: tuple[WindowState, ...]
    accounts_averaged: int
    pool_size: int
    readings: list[AccountReading]
    burn_rates: dict[tuple[str, str], float]  # in the gate's currency (Opus-priced $/min)

    def burn_of(self, harness: str, model: str) -> float:
        return session_burn(self.burn_rates, harness, model)

    @property
    def fallback_burn(self) -> float:
        return fallback_burn(self.burn_rates)


async def read_pool_parts(conn: AsyncConnection, now: datetime) -> PoolParts:
    readings, pool_size = await quota.newest_readings(conn)
    pooled = pooled_windows(readings, now, pool_size)
    capacities = await quota.capacities(conn)
    uncalibrated = [w for w in pooled if w not in capacities]
    rates = observed_rates(await quota.readings_since(conn, now - LOOKBACK)) if uncalibrated else {}
    windows = tuple(WindowState(w, p.utilization, p.mean_seconds_to_reset / 60, capacities.get(w), rates.get(w, 0.0),
                                p.accounts_rolled_over) for w, p in pooled.items())
    averaged = max((p.accounts_averaged for p in pooled.values()), default=0)
    burn = {(r.harness, r.model): float(r.opus_dollars_per_minute) for r in await quota.all_burn_rates(conn)}
    return PoolParts(windows, averaged, pool_size, readings, burn)


@dataclass(frozen=True)
class GateInputs:
    """One reading of the gate's inputs: the policy, and the pool's side or why it could not be
    read (the gate then fails open on the quota checks, never on the slot check)."""

    policy: PolicyRow
    parts: PoolParts | None
    failure: BaseException | None = None

    def burn_of(self, harness: str, model: str) -> float:
        return self.parts.burn_of(harness, model) if self.parts else 0.0

    @property
    def fallback_burn(self) -> float:
        return self.parts.fallback_burn if self.parts else 0.0

    def decide(self, fleet: FleetState, candidate: Candidate, margin: float = 0.0) -> Decision:
        p = self.parts
        return evaluate(self.policy.policy, p.windows if p else None, fleet, candidate,
                        accounts_averaged=p.accounts_averaged if p else 0, accounts_in_pool=p.pool_size if p else 0,
                        failure=self.failure, reserve_margin=margin)

    def default_candidate(self) -> Candidate:
        """A new spot session as a spawn naming no harness or model gets it."""
        return Candidate(self.burn_of(DEFAULT_HARNESS, DEFAULT_MODEL))


async def read_inputs(conn: AsyncConnection, now: datetime) -> tuple[GateInputs, FleetState]:
    """Everything fresh and without the admission lock, for the surfaces that show the decision
    (the policy view): the same inputs an admission reads, decided by the same function."""
    parts = await read_pool_parts(conn, now)
    policy, fleet = await quota.policy_and_fleet(conn, parts.fallback_burn)
    return GateInputs(policy, parts), fleet


class PoolCache:
    """The pool's side of the snapshot, shared by admissions for `ttl` seconds (monotonic).

    A reading or calibration recorded by this process invalidates it at once; one recorded by
    another replica is seen within `ttl`. Readings arrive every few minutes, so a second-old
    pool is the same pool.
    """

    def __init__(self, units: UnitsOfWork, now: Callable[[], datetime], ttl: float = 1.0):
        self._units = units
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
                async with self._units.read() as own:
                    parts = await read_pool_parts(own, self._now())
            else:
                async with conn.begin_nested():
                    parts = await read_pool_parts(conn, self._now())
            self._parts, self._read_at = parts, time.monotonic()
        return self._parts
