"""The Quotas and Costs charts' history (issue 32 #4; DESIGN §9 "History for charts"): recording the
pool's minute, keeping the history at bounded resolution, and answering the two history reads.

`record` is the `record_pool_history` job (every minute): the same figures the policy view reads
(the pooled windows, the policy's reserves, the calibration, the running / held / asleep counts)
and the gate's decisions logged since the point before, one row per window. `retain` is the
`pool_history_retention` job: `zimmer_common.history`'s rule in bounded batches. Spend needs no
recorder: the spend ledger is kept whole, and `costs_history` buckets it per model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts import charts as ch
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.history import FINE, STEPS, HistoryRangeError, clamp_range, floor_to, read_range
from zimmer_common.history_store import PointsGauge, Retained, count_points, newest_fine, read, record, retain
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.history import FleetFigures, WindowFigures, pool_points
from zimmer_spot_gate.domain.model import WINDOW_LENGTH, Window
from zimmer_spot_gate.domain.pool import pooled_windows
from zimmer_spot_gate.domain.prices import spends_against_claude
from zimmer_spot_gate.store import history, quota, triggers
from zimmer_spot_gate.store.history import POOL_HISTORY
from zimmer_spot_gate.store.sessions import class_expr

EVENTS_LOOKBACK = timedelta(hours=1)  # the longest gap the events since the point before reach over
COSTS_SPAN = timedelta(days=7)
T = TypeVar("T")


def range_or_invalid(read: Callable[[], T]) -> T:
    """The range a read answers, or the `invalid` refusal naming the parameter to change."""
    try:
        return read()
    except HistoryRangeError as exc:
        raise ZimmerError(ErrorCode.INVALID, str(exc), {"field": exc.field}) from None


class PoolHistoryOps:
    def __init__(self, units: UnitsOfWork, now: Callable[[], datetime], gauge: PointsGauge | None = None):
        self.units = units
        self.now = now
        self.gauge = gauge

    # ---- recording and retention (jobs) ------------------------------------------------------------

    async def record(self) -> int:
        """This minute's point of each window; returns the rows written (0: a replica wrote them)."""
        now = self.now()
        minute = floor_to(now, FINE)
        async with self.units.begin() as uow:
            conn = uow.conn
            readings, pool_size = await quota.newest_readings(conn)
            pooled = pooled_windows(readings, now, pool_size)
            capacities = await quota.capacities(conn)
            row = await quota.policy(conn)
            running, held = await triggers.counts(conn, class_expr(row.overrides))
            paused = await triggers.paused_counts(conn)
            # The events since the point before (from its minute up to this one's): each is counted
            # once, on the first point after it, however late a tick ran.
            previous = await newest_fine(conn, POOL_HISTORY, minute)
            since = minute - timedelta(minutes=FINE) if previous is None else max(previous, minute - EVENTS_LOOKBACK)
            holds, pauses, resumes = await history.decision_events(conn, since, minute)
            windows = {w: WindowFigures(w, p.utilization, p.mean_seconds_to_reset / 60, p.reset_known,
                                        capacities.get(w)) for w, p in pooled.items()}
            fleet = FleetFigures(sum(running.values()), sum(held.values()), sum(paused.values()), holds, pauses,
                                 resumes)
            written = await record(conn, POOL_HISTORY, minute, pool_points(windows, row.policy.reserve, fleet))
            await self._observe(conn)
        return written

    async def retain(self, progress: Callable[[], Awaitable[None]] | None = None) -> Retained:
        done = await retain(self.units, POOL_HISTORY, self.now(), between=progress)
        async with self.units.read() as conn:
            await self._observe(conn)
        return done

    async def _observe(self, conn: AsyncConnection) -> None:
        if self.gauge is not None:
            self.gauge.observe(await count_points(conn, POOL_HISTORY))

    # ---- reads ------------------------------------------------------------------------------------------

    async def pool_history(self, q: ch.PoolHistoryQuery) -> ch.PoolHistory:
        now = self.now()
        span = range_or_invalid(lambda: read_range(q.since, q.until, q.step_minutes, now=now,
                                                   default_span=WINDOW_LENGTH[Window(q.window)],
                                                   max_points=ch.POOL_MAX_POINTS))
        async with self.units.read() as conn:
            rows = await read(conn, POOL_HISTORY, span, [POOL_HISTORY.c.window_name == q.window])
        return ch.PoolHistory(window=q.window, since=span.since, until=span.until, step_minutes=span.step_minutes,
                              points=[_pool_point(r) for r in rows])

    async def costs_history(self, q: ch.CostsHistoryQuery) -> ch.CostsHistory:
        now = self.now()
        # One snapshot: a model first spent on between the count and the buckets would not fit the step.
        async with self.units.snapshot() as conn:
            start, end = range_or_invalid(lambda: clamp_range(q.since, q.until, now=now, default_span=COSTS_SPAN))
            models = await history.spend_models(conn, floor_to(start, STEPS[-1]), end)  # the widest a step aligns to
            span = range_or_invalid(lambda: read_range(q.since, q.until, q.step_minutes, now=now,
                                                       default_span=COSTS_SPAN, series=min(models, ch.MAX_MODELS),
                                                       max_points=ch.SERIES_MAX_POINTS))
            rows = await history.spend_buckets(conn, span)
        by_model: dict[tuple[str, str], list[ch.SpendPoint]] = {}
        for r in rows:
            dollars = float(r.dollars)
            by_model.setdefault((r.harness, r.model), []).append(ch.SpendPoint(
                at=r.at, dollars=dollars, dollars_per_minute=dollars / span.step_minutes))
        series = [ch.ModelSpend(harness=h, model=m, spends_against="claude" if spends_against_claude(h, m) else "codex",
                                dollars=sum(p.dollars for p in points), points=points)
                  for (h, m), points in by_model.items()]
        series.sort(key=lambda s: (-s.dollars, s.harness, s.model))
        return ch.CostsHistory(since=span.since, until=span.until, step_minutes=span.step_minutes,
                               models=series[:ch.MAX_MODELS], models_left_out=max(0, len(series) - ch.MAX_MODELS))


def _pool_point(r: Any) -> ch.PoolHistoryPoint:
    reserve = float(r.reserve)
    return ch.PoolHistoryPoint(
        at=r.at, samples=int(r.samples), utilization=_float(r.utilization), pacing=_float(r.pacing), reserve=reserve,
        spot_budget=max(0.0, 1.0 - reserve), capacity_dollars=_float(r.capacity_dollars), running=int(r.running),
        held=int(r.held), paused=int(r.paused), holds=int(r.holds), pauses=int(r.pauses), resumes=int(r.resumes))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
