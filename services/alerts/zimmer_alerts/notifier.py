"""Sends what is due (issue 11): each new issue once (log, issue tracker, Slack), each page group
when the repeating-page policy says so (log, Slack, Alertmanager), and a group's resolution to
Alertmanager once when its conditions stop. Sinks the environment does not allow are recorded
as `not_allowed`; every outcome is a ledger row. Rows are locked (skip locked) while they are
sent, so two replicas never send the same notification."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_alerts import ledger
from zimmer_alerts.domain.policy import Sink, Timing, allowed_sinks, due
from zimmer_alerts.sinks import Delivery, Notice, Sinks
from zimmer_alerts.tables import issues
from zimmer_common.settings import Environment

ISSUE_SINKS: tuple[Sink, ...] = ("log", "issue_tracker", "slack")
PAGE_SINKS: tuple[Sink, ...] = ("log", "slack", "alertmanager")


class AlertMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.pages = Counter("zimmer_alert_pages_total", "Pages received, by level and source", ["level", "source"],
                             registry=registry)
        self.notifications = Counter("zimmer_alert_notifications_total", "Notifications, by sink and outcome "
                                     "(sent, failed, not_allowed, not_configured)", ["sink", "outcome"],
                                     registry=registry)
        self.open_issues = Gauge("zimmer_alert_open_issues", "Issues not yet notified", registry=registry)


class Notifier:
    def __init__(self, engine: Callable[[], AsyncEngine], sinks: Sinks, env: Environment,
                 now: Callable[[], datetime], metrics: AlertMetrics | None = None, timing: Timing = Timing()):
        self._engine = engine
        self.sinks = sinks
        self.env = env
        self.now = now
        self.metrics = metrics
        self.timing = timing

    async def run_once(self) -> int:
        """Send everything due now; returns how many notifications were recorded."""
        now = self.now()
        recorded = 0
        async with self._engine().begin() as conn:
            for issue in await ledger.issues_to_notify(conn):
                notice = Notice("issue", issue.title, issue.level, issue.source, issue.message, issue.fingerprint,
                                starts_at=issue.first_seen, snippet=issue.snippet, context=issue.context or {})
                rows = await self._deliver(ISSUE_SINKS, notice, now, issue_id=issue.id)
                await ledger.add_notifications(conn, rows)
                await ledger.mark_issue_notified(conn, issue.id, now)
                recorded += len(rows)
            for row, group in await ledger.groups(conn, now, self.timing):
                kind = "page" if due(group, now, self.timing) else (
                    "resolved" if not group.firing and row.last_notified is not None and row.resolution_sent_at is None
                    else None)
                if kind is None:
                    continue
                detail = await ledger.group_detail(conn, row.title)
                ends = now + self.timing.repeat_interval + self.timing.group_interval if kind == "page" else now
                notice = Notice(kind, row.title, row.level, detail.source if detail else "", (
                    detail.message if detail else row.title), row.title, starts_at=row.first_seen, ends_at=ends,
                    snippet=detail.snippet if detail else None, context=(detail.context if detail else None) or {})
                sinks = PAGE_SINKS if kind == "page" else ("log", "alertmanager")
                rows = await self._deliver(sinks, notice, now, group_title=row.title)
                await ledger.add_notifications(conn, rows)
                if kind == "page":
                    await ledger.mark_group_notified(conn, row.title, now)
                else:
                    await ledger.mark_resolution_sent(conn, row.title, now)
                recorded += len(rows)
            if self.metrics:
                self.metrics.open_issues.set((await conn.execute(
                    select(func.count()).select_from(issues).where(issues.c.notified_at.is_(None)))).scalar_one())
        return recorded

    async def _deliver(self, sinks: tuple[Sink, ...], notice: Notice, now: datetime, **target: Any) -> list[dict[str, Any]]:
        allowed = allowed_sinks(self.env)
        rows = []
        for sink in sinks:
            if sink not in allowed:
                delivery = Delivery(sink, "not_allowed", f"{self.env.value} sends nothing to {sink}")
            else:
                delivery = await self.sinks.send(sink, notice)
            if self.metrics:
                self.metrics.notifications.labels(sink, delivery.outcome).inc()
            rows.append({"sink": sink, "outcome": delivery.outcome, "detail": delivery.detail,
                         "attempts": delivery.attempts, "at": now, **target})
        return rows
