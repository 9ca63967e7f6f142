"""The Health charts' history (issue 32 #4; DESIGN §9 "History for charts"): each queue lane's depth
and oldest-ready age with its thresholds, a point a minute.

Recorded from the health monitor's check (every minute, a loop of the process: a recorder on a job
lane would go silent in the very stall the chart should show); every replica's check writes the
same minute once. Kept flat by `zimmer_common.history`'s rule in the `health_records_prune` job,
and read aggregated to a step for GET /api/v1/health/history and the Health page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_alerts.store.history_tables import LANE_HISTORY
from zimmer_common.clock import Clock
from zimmer_common.contracts import charts as ch
from zimmer_common.contracts import health as h
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.history import STEPS, HistoryRangeError, clamp_range, floor_to, read_range
from zimmer_common.history_store import PointsGauge, Retained, count_points, read, record, retain, series_in
from zimmer_common.unit_of_work import UnitsOfWork

DEFAULT_SPAN = timedelta(hours=24)


def lane_rows(report: h.HealthReport) -> list[dict[str, Any]]:
    """One row per lane the report read (none when JetStream could not be read: a gap, not zeros)."""
    if not report.queue.readable:
        return []
    return [{"lane": lane.lane, "ready": lane.ready, "claimed": lane.claimed,
             "oldest_ready_age_seconds": lane.oldest_ready_age_seconds if lane.ready > 0 else None,
             "depth_threshold": lane.depth_threshold, "stall_age_seconds": lane.stall_age_seconds}
            for lane in report.queue.lanes]


class LaneHistory:
    def __init__(self, units: UnitsOfWork, clock: Clock, gauge: PointsGauge | None = None):
        self.units = units
        self.clock = clock
        self.gauge = gauge

    async def record(self, report: h.HealthReport) -> int:
        """The report's lanes as this minute's points; returns the rows written."""
        async with self.units.begin() as uow:
            written = await record(uow.conn, LANE_HISTORY, report.generated_at, lane_rows(report))
            await self._observe(uow.conn)
        return written

    async def retain(self, progress: Callable[[], Awaitable[None]] | None = None) -> Retained:
        done = await retain(self.units, LANE_HISTORY, self.clock.now(), between=progress)
        async with self.units.read() as conn:
            await self._observe(conn)
        return done

    async def _observe(self, conn: AsyncConnection) -> None:
        if self.gauge is not None:
            self.gauge.observe(await count_points(conn, LANE_HISTORY))

    async def read(self, q: ch.HealthHistoryQuery) -> ch.HealthHistory:
        now = self.clock.now()
        where = [LANE_HISTORY.c.lane == q.lane] if q.lane is not None else []
        try:
            start, end = clamp_range(q.since, q.until, now=now, default_span=DEFAULT_SPAN)
            # One snapshot: a lane first recorded between the count and the rows would not fit the step.
            async with self.units.snapshot() as conn:
                # The lanes the widest step's buckets would hold: how many series the step must fit.
                lanes = len(await series_in(conn, LANE_HISTORY, floor_to(start, STEPS[-1]), end, where))
                span = read_range(q.since, q.until, q.step_minutes, now=now, default_span=DEFAULT_SPAN, series=lanes,
                                  max_points=ch.SERIES_MAX_POINTS)
                rows = await read(conn, LANE_HISTORY, span, where)
        except HistoryRangeError as exc:
            raise ZimmerError(ErrorCode.INVALID, str(exc), {"field": exc.field}) from None
        by_lane: dict[str, list[ch.LanePoint]] = {}
        for r in rows:
            by_lane.setdefault(r.lane, []).append(ch.LanePoint(
                at=r.at, samples=int(r.samples), ready=int(r.ready), claimed=int(r.claimed),
                oldest_ready_age_seconds=None if r.oldest_ready_age_seconds is None else float(r.oldest_ready_age_seconds),
                depth_threshold=int(r.depth_threshold), stall_age_seconds=float(r.stall_age_seconds)))
        return ch.HealthHistory(since=span.since, until=span.until, step_minutes=span.step_minutes,
                                lanes=[ch.LaneHistory(lane=lane, points=points) for lane, points in sorted(by_lane.items())])
