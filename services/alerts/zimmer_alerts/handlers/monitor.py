"""The health monitor (seed 003's SystemHealthMonitorJob): every minute it computes the health
report live and pages on what has held for two consecutive checks.

It is a loop in the alerts process, not a job on a lane: a monitor must never run on a lane it
watches (the outage it exists to report would starve it into silence too), and it watches every
lane. What watches the monitor is Prometheus: `zimmer_health_monitor_last_check_timestamp_seconds`
and the ZimmerHealthMonitorSilent rule (deploy/prometheus/alerts.yml).

Pages (each its own stable title, so each shape is its own issue):
- the queue verdict's title ("Nothing is executing", "Queue lane wedged", "Queue backlog
  critical") once a critical verdict has held for CONSECUTIVE_CRITICAL_TO_ALERT checks; the streak
  is cleared on every non-critical check, and the condition resolved;
- "Cron schedule stale" once a key has read stale on consecutive checks (a streak per key, kept
  apart from the queue's). While the queue page is critical, a key held by a running copy is left
  to it (its breakdown already names what holds the lane): held back, not dropped.
- While queue recovery mode is on, neither pages: the backlog is the operator's own doing.
A check that cannot read the cron schedule fails loudly (an ERROR page), never "nothing stale".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from zimmer_alerts.domain.cron import CONSECUTIVE_CRITICAL_TO_ALERT, CronStreaks
from zimmer_alerts.domain.queues import page_body
from zimmer_alerts.handlers.health import HealthReporter
from zimmer_alerts.handlers.health_metrics import HealthMetrics
from zimmer_alerts.store import ledger
from zimmer_common.contracts import health as h
from zimmer_common.contracts.fields import LONG_TEXT_MAX
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.unit_of_work import UnitsOfWork

log = logging.getLogger("zimmer.health")

SOURCE = "alerts/health_monitor"
CRON_TITLE = "Cron schedule stale"
CRON_CONDITION = "health:cron_stale"
UNREADABLE_TITLE = "Health monitor cannot read"
CLUSTER_TITLE = "NATS cluster degraded"
CLUSTER_CONDITION = "health:nats_cluster"
CLUSTER_GRACE_SECONDS = 300.0  # a leader election or a node's restart settles well within it


CRON_KEYS_IN_PAGE = 5  # with reasons; the rest by name (every reading is live in get_system_health)
LIVE_ELSEWHERE = " Every key's reading is live in get_system_health (MCP) and GET /api/v1/health."
CUT = " … (cut; the whole reading is live in get_system_health)"


def bounded(text: str, tail: str) -> str:
    """A page's message fits the contract's bound (LongText): cut, and say where the rest is."""
    if len(text) + len(tail) <= LONG_TEXT_MAX:
        return text + tail
    return text[:LONG_TEXT_MAX - len(CUT)] + CUT


@dataclass
class QueueStreak:
    """Consecutive critical checks of the queue verdict; any non-critical check clears it."""

    count: int = 0
    code: str | None = None

    def observe(self, verdict: h.QueueVerdict) -> bool:
        """True when this check confirms a page."""
        if verdict.status != "critical":
            self.count, self.code = 0, None
            return False
        self.count += 1
        self.code = verdict.code
        return self.count >= CONSECUTIVE_CRITICAL_TO_ALERT


@dataclass
class HealthMonitor:
    """The streaks live in the process (a restart only re-confirms over two checks); what is firing
    lives in the ledger (the conditions this monitor reported and nobody resolved), so a condition
    opened before a restart is resolved by the first check after it that finds it no longer holds,
    instead of re-paging every repeat interval until someone resolves it by hand."""

    reporter: HealthReporter
    pager: Pager
    units: UnitsOfWork | None = None  # the ledger's; None (a unit test): only this process's own reports
    metrics: HealthMetrics | None = None
    queue_streak: QueueStreak = field(default_factory=QueueStreak)
    cron_streaks: CronStreaks = field(default_factory=CronStreaks)
    # What this process reported firing, or resolved, and the ledger may not show yet (a page
    # reaches it through the outbox and the alerts consumer, a moment later).
    reported: set[str] = field(default_factory=set)
    resolved: set[str] = field(default_factory=set)
    cluster_degraded_since: float | None = None  # monotonic: when the cluster last stopped reading ok
    monotonic: Callable[[], float] = time.monotonic

    async def check_once(self) -> h.HealthReport:
        report = await self.reporter.report()
        if self.metrics is not None:
            self.metrics.checked(time.time())
        if report.queue_recovery_mode.active:
            # The operator halted the lanes: no backlog or cron page while that is so, and no
            # streak carried across the halt into the drain that follows it.
            self.queue_streak = QueueStreak()
            self.cron_streaks = CronStreaks()
            return report
        firing = await self.firing()
        await self._queue(report, {k for k in firing if k not in (CRON_CONDITION, CLUSTER_CONDITION)})
        await self._cron(report, CRON_CONDITION in firing)
        await self._cluster(report, CLUSTER_CONDITION in firing)
        return report

    async def _cluster(self, report: h.HealthReport, firing: bool) -> None:
        """Page once a node has been down, or a stream under-replicated or leaderless, for
        CLUSTER_GRACE_SECONDS; resolve when every stream is whole again."""
        nats = report.cluster
        if nats is None:
            return
        if nats.status == "ok":
            self.cluster_degraded_since = None
            if firing:
                await self.pager.report(title=CLUSTER_TITLE, fingerprint=["health", "nats_cluster"], level="warning",
                                        source=SOURCE, condition_key=CLUSTER_CONDITION, still_true=False,
                                        message=f"the NATS cluster is whole again: {nats.summary}")
                self.reported.discard(CLUSTER_CONDITION)
                self.resolved.add(CLUSTER_CONDITION)
            return
        now = self.monotonic()
        if self.cluster_degraded_since is None:
            self.cluster_degraded_since = now
        if now - self.cluster_degraded_since >= CLUSTER_GRACE_SECONDS and not firing:
            await self.pager.report(
                title=CLUSTER_TITLE, fingerprint=["health", "nats_cluster"], source=SOURCE,
                condition_key=CLUSTER_CONDITION, message=bounded(f"{nats.status}: {nats.summary}", LIVE_ELSEWHERE),
                context={"servers_offline": nats.servers_offline,
                         "streams": {s.stream: f"{s.current}/{s.expected}" for s in nats.streams}})
            self.reported.add(CLUSTER_CONDITION)
            self.resolved.discard(CLUSTER_CONDITION)

    async def firing(self) -> set[str]:
        """The monitor's conditions still open: the ledger's, with this process's own reports and
        resolutions the ledger has not caught up with. An unreadable ledger leaves what this
        process knows (a page is never held back for it)."""
        if self.units is None:
            return set(self.reported)
        try:
            async with self.units.read() as conn:
                open_keys = await ledger.open_condition_keys(conn, SOURCE)
        except Exception as exc:  # noqa: BLE001 - the report above already says what is unreadable
            log.warning("open conditions unreadable", extra=kv(error=repr(exc)))
            return set(self.reported)
        self.resolved &= open_keys  # once the ledger shows a resolution, the ledger is the record again
        return (open_keys - self.resolved) | self.reported

    async def _queue(self, report: h.HealthReport, firing: set[str]) -> None:
        verdict = report.verdict
        confirmed = self.queue_streak.observe(verdict)
        if confirmed and verdict.code and verdict.title:
            body = bounded(page_body(report.queue, verdict, report.workers), "")
            key = f"health:{verdict.code}"
            await self.pager.report(
                title=verdict.title, fingerprint=["health", verdict.code.split(":", 1)[0]], message=body,
                source=SOURCE, condition_key=key,
                context={"status_code": verdict.code, "paused_lanes": verdict.paused_lanes})
            self.reported.add(key)
            self.resolved.discard(key)
            for other in sorted(firing - {key}):  # the incident changed shape: the old one is over
                await self._resolve_queue(other)
        elif verdict.status != "critical":
            for key in sorted(firing):
                await self._resolve_queue(key)

    async def _resolve_queue(self, key: str) -> None:
        await self.pager.report(title="Queue health recovered", fingerprint=["health", "recovered"],
                                message=f"{key.removeprefix('health:')} no longer holds", level="warning",
                                source=SOURCE, condition_key=key, still_true=False)
        self.reported.discard(key)
        self.resolved.add(key)

    async def _cron(self, report: h.HealthReport, firing: bool) -> None:
        if not report.cron.readable:
            await self.pager.report(title=UNREADABLE_TITLE, fingerprint=["health", "cron_unreadable"],
                                    message=f"cron freshness could not be read: {report.cron.problem}",
                                    source=SOURCE)
            return
        queue_critical = report.verdict.status == "critical"
        stale = [k for k in report.cron.keys if k.state == "stale"
                 and not (queue_critical and k.held_by == "running")]
        confirmed = self.cron_streaks.observe([k.key for k in stale])
        if confirmed:
            behind = [k for k in stale if k.key in confirmed]
            lines = [f"{k.key} ({k.cadence}, {k.lane}): {k.reason}" for k in behind[:CRON_KEYS_IN_PAGE]]
            more = behind[CRON_KEYS_IN_PAGE:]
            if more:
                lines.append(f"and {len(more)} more: {', '.join(k.key for k in more)}")
            await self.pager.report(
                title=CRON_TITLE, fingerprint=["health", "cron_stale"], source=SOURCE, condition_key=CRON_CONDITION,
                message=bounded("Scheduled jobs not running: " + "; ".join(lines), LIVE_ELSEWHERE),
                context={"keys": [k.key for k in behind]})
            self.reported.add(CRON_CONDITION)
            self.resolved.discard(CRON_CONDITION)
        elif firing and not stale:
            await self.pager.report(title=CRON_TITLE, fingerprint=["health", "cron_stale"], level="warning",
                                    source=SOURCE, condition_key=CRON_CONDITION, still_true=False,
                                    message="every scheduled job is producing ticks again")
            self.reported.discard(CRON_CONDITION)
            self.resolved.add(CRON_CONDITION)
