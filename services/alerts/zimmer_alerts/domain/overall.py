"""The report's overall status and its prose (seed 003 "Reading it without a page": what
get_system_health prints above the JSON).

Queue critical/warning and stale cron (critical) / overdue cron (warning) move it; an unreadable
queue is critical, because "could not read" must never read as "nothing wrong". Log retention
readings are never counted here (they have their own alerts).
"""

from __future__ import annotations

from collections import Counter

from zimmer_alerts.domain.queues import format_age, ready_line
from zimmer_common.contracts.health import (
    CronHealth,
    QueueRecoveryStatus,
    QueueStatistics,
    QueueVerdict,
    Status,
    WorkerStatistics,
)

_RANK: dict[Status, int] = {"ok": 0, "warning": 1, "critical": 2}
_CRON_STATES = ("fresh", "overdue", "stale", "disabled", "exempt")


def worst(*statuses: Status) -> Status:
    return max(statuses, key=lambda s: _RANK[s], default="ok")


def overall_status(verdict: QueueVerdict, cron: CronHealth, workers: WorkerStatistics, queue_readable: bool,
                   ) -> Status:
    """The worst of the queue verdict and cron freshness. An unreadable cron check is a warning:
    it says nothing about the keys, but it must not read as "all fresh" either. Workers do not
    move it on their own: zero heartbeats is judged by the queue's nothing-is-executing gate."""
    del workers  # the worker line is context; its one incident shape is the queue gate's
    queue: Status = "critical" if not queue_readable else verdict.status
    cron_status: Status = cron.status if cron.readable else worst(cron.status, "warning")
    return worst(queue, cron_status)


def cron_line(cron: CronHealth) -> list[str]:
    if not cron.readable:
        return [f"Cron freshness: unavailable ({cron.problem or 'could not be read'})"]
    counts = Counter(k.state for k in cron.keys)
    parts = [f"{counts['fresh']} keys fresh", *(f"{counts[s]} {s}" for s in _CRON_STATES[1:] if counts[s])]
    lines = [f"Cron freshness: {', '.join(parts)}"]
    lines += [f"  {k.key} {k.state}: {k.reason}" for k in cron.keys if k.state in ("stale", "overdue")]
    return lines


def recovery_line(recovery: QueueRecoveryStatus | None) -> list[str]:
    if recovery is None or not recovery.active:
        return []
    expires = f", lifts at {recovery.expires_at:%Y-%m-%d %H:%M UTC}" if recovery.expires_at else ""
    lanes = ", ".join(recovery.lanes) or "none"
    return [f"Queue recovery mode: active (by {recovery.entered_by or 'unknown'}{expires}); lanes paused: {lanes}; "
            f"reason: {recovery.reason or 'none given'}"]


def summary_prose(overall: Status, stats: QueueStatistics, verdict: QueueVerdict, cron: CronHealth,
                  workers: WorkerStatistics, recovery: QueueRecoveryStatus | None = None) -> str:
    """A few lines: overall, the queue verdict, cron freshness and each key behind, workers, and
    queue recovery mode when it is on."""
    queue = f"Queue: {verdict.title or verdict.status} ({verdict.status}): {verdict.summary}"
    since = (f"last finished {format_age(stats.seconds_since_last_finished)} ago"
             if stats.seconds_since_last_finished is not None else "nothing finished yet")
    lines = [f"Overall: {overall}", queue]
    if stats.readable:
        lines.append(f"{ready_line(stats)}; claimed {stats.claimed_count}; {since}")
    lines += cron_line(cron)
    lines.append(f"Workers: {workers.active} active / {workers.registered} registered")
    lines += recovery_line(recovery)
    return "\n".join(lines)
