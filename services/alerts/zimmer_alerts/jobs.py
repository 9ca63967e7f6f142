"""The alerts service's jobs (seed 003's cron table says when each runs; docs/jobs.md): bounding
the health records, and lifting queue recovery mode once its TTL has elapsed (path 2, on auth,
the one lane the mode never pauses). The health monitor and the notifier are loops of the
process instead (`service.py`): a monitor must never run on a lane it watches."""

from __future__ import annotations

import logging

from zimmer_alerts.handlers.lane_history import LaneHistory
from zimmer_alerts.handlers.recovery import EXPIRY_JOB, EXPIRY_LANE, QueueRecoveryMode
from zimmer_alerts.store import health_records
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.unit_of_work import UnitsOfWork

log = logging.getLogger("zimmer.alerts")


def alerts_jobs(units: UnitsOfWork, recovery: QueueRecoveryMode, history: LaneHistory) -> list[JobSpec]:
    async def health_records_prune(ctx: JobContext) -> None:
        """Bound the health records: runs past 14 days, heartbeats past a day; and the Health charts'
        lane history: minutes past 7 days folded into quarter hours, quarter hours past 90 dropped."""
        async with units.begin() as uow:
            runs, beats = await health_records.prune(uow.conn, ctx.clock.now())
        kept = await history.retain(ctx.progress)
        log.info("health records pruned", extra=kv(runs=runs, heartbeats=beats, lane_minutes_folded=kept.folded,
                                                   lane_points_dropped=kept.dropped))

    async def queue_recovery_expiry(_ctx: JobContext) -> None:
        await recovery.expire()

    return [JobSpec("health_records_prune", "maintenance", health_records_prune),
            JobSpec(EXPIRY_JOB, EXPIRY_LANE, queue_recovery_expiry)]
