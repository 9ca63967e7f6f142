"""Sends what is due (issue 11): each new issue once (log, Slack), every event to the issue
tracker (it counts the occurrences and notifies once per issue itself; issue 26 #10), each page
group when the repeating-page policy says so (log, Slack, Alertmanager), and a group's resolution
to Alertmanager once when its conditions stop. Sinks the environment does not allow are recorded
as `not_allowed`; every outcome is a ledger row. What to send is claimed with a lease in a short
transaction (skip locked), so two replicas never send the same notification and no sink call is
made while a transaction or lock is held (issue 26 #9: one Slack that hangs held every issue's row
for every sink's timeout, and a failed commit re-sent everything)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_alerts.domain.policy import Sink, Timing, allowed_sinks
from zimmer_alerts.domain.policy import due as due_now
from zimmer_alerts.handlers.sinks import Delivery, Notice, Sinks
from zimmer_alerts.store import ledger, ledger_pages
from zimmer_alerts.store.tables import issues
from zimmer_common.contracts.alerts import PANEL_ISSUES
from zimmer_common.settings import Environment
from zimmer_common.unit_of_work import UnitsOfWork

ISSUE_SINKS: tuple[Sink, ...] = ("log", "slack")
PAGE_SINKS: tuple[Sink, ...] = ("log", "slack", "alertmanager")
# How long a claim holds: past every sink's attempts and timeouts, so a live notifier is never
# overtaken, and a dead one's claims lapse within minutes.
CLAIM_LEASE = timedelta(minutes=5)


class AlertMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.pages = Counter("zimmer_alert_pages_total", "Pages received, by level and source", ["level", "source"],
                             registry=registry)
        self.notifications = Counter("zimmer_alert_notifications_total", "Notifications, by sink and outcome "
                                     "(sent, failed, not_allowed, not_configured)", ["sink", "outcome"],
                                     registry=registry)
        self.open_issues = Gauge("zimmer_alert_open_issues", "Issues not yet notified", registry=registry)
        self.newest_issues = Gauge("zimmer_alert_newest_issues", "Of the newest issues the Health page's Alerts "
                                   "panel shows (PANEL_ISSUES, 10): how many (shown) and how many still page "
                                   "(still_paging)", ["state"], registry=registry)

    async def observe_ledger(self, conn: AsyncConnection) -> None:
        """The Alerts panel's "N of the M issues shown are still paging", read now: where the ledger
        changes (a page recorded, a condition resolved) and at every notifier pass (an error stops
        paging when its repeat interval passes without an event)."""
        shown, paging = await ledger_pages.newest_paging(conn, PANEL_ISSUES)
        self.newest_issues.labels("shown").set(shown)
        self.newest_issues.labels("still_paging").set(paging)


class Notifier:
    def __init__(self, units: UnitsOfWork, sinks: Sinks, env: Environment,
                 now: Callable[[], datetime], metrics: AlertMetrics | None = None, timing: Timing = Timing(),
                 lease: timedelta = CLAIM_LEASE):
        self.units = units
        self.sinks = sinks
        self.env = env
        self.now = now
        self.metrics = metrics
        self.timing = timing
        self.lease = lease

    async def run_once(self) -> int:
        """Send everything due now; returns how many notifications were recorded. What to send is
        claimed in a short transaction (a lease); the sink calls happen outside any transaction, so
        a hung sink holds no lock and no connection; each outcome is recorded in its own."""
        now = self.now()
        recorded = await self._track_events(now)
        tracker_live = self._tracker_live()
        async with self.units.begin() as uow:
            claimed = await ledger.claim_issues(uow.conn, now, self.lease)
        for issue in claimed:
            notice = Notice("issue", issue.title, issue.level, issue.source, issue.message, issue.fingerprint,
                            starts_at=issue.first_seen, snippet=issue.snippet, context=issue.context or {},
                            log_level=issue.log_level)
            # A live tracker hears of the issue through its events; otherwise the ledger says why not.
            sinks = ISSUE_SINKS if tracker_live else (*ISSUE_SINKS, "issue_tracker")
            rows = await self._deliver(sinks, notice, now, issue_id=issue.id)
            async with self.units.begin() as uow:
                await ledger.add_notifications(uow.conn, rows)
                await ledger.mark_issue_notified(uow.conn, issue.id, now)
            recorded += len(rows)
        async with self.units.begin() as uow:
            due: list[tuple[str, Any, Any]] = []
            for row, group in await ledger.groups(uow.conn, now, self.timing):
                kind = "page" if due_now(group, now, self.timing) else (
                    "resolved" if not group.firing and row.last_notified is not None and row.resolution_sent_at is None
                    else None)
                if kind is not None:
                    due.append((kind, row, await ledger.group_detail(uow.conn, row.title)))
            mine = await ledger.claim_groups(uow.conn, [row.title for _kind, row, _d in due], now, self.lease)
        for kind, row, detail in due:
            if row.title not in mine:
                continue  # another notifier claimed it meanwhile
            ends = now + self.timing.repeat_interval + self.timing.group_interval if kind == "page" else now
            notice = Notice(kind, row.title, row.level, detail.source if detail else "", (
                detail.message if detail else row.title), row.title, starts_at=row.first_seen, ends_at=ends,
                snippet=detail.snippet if detail else None, context=(detail.context if detail else None) or {})
            sinks = PAGE_SINKS if kind == "page" else ("log", "alertmanager")
            rows = await self._deliver(sinks, notice, now, group_title=row.title)
            async with self.units.begin() as uow:
                await ledger.add_notifications(uow.conn, rows)
                if kind == "page":
                    await ledger.mark_group_notified(uow.conn, row.title, now)
                else:
                    await ledger.mark_resolution_sent(uow.conn, row.title, now)
            recorded += len(rows)
        if self.metrics:
            async with self.units.read() as conn:
                self.metrics.open_issues.set((await conn.execute(
                    select(func.count()).select_from(issues).where(issues.c.notified_at.is_(None)))).scalar_one())
                await self.metrics.observe_ledger(conn)
        return recorded

    def _tracker_live(self) -> bool:
        return self.sinks.configured("issue_tracker") and "issue_tracker" in allowed_sinks(self.env)

    async def _track_events(self, now: datetime) -> int:
        """Forward every event not yet forwarded to the issue tracker, each in its own envelope, in
        order. A tracker that fails stops the batch: what is left stays claimed until the lease
        lapses, so a tracker that is down costs one failed delivery per lease, not one per event
        per run. An event the tracker refuses is recorded and not sent again."""
        if not self._tracker_live():
            async with self.units.begin() as uow:
                await ledger.skip_tracking(uow.conn, now)
            return 0
        async with self.units.begin() as uow:
            claimed = await ledger.claim_events(uow.conn, now, self.lease)
        rows, sent, refused = [], [], []
        for event in claimed:
            notice = Notice("event", event.title, event.level, event.source, event.message, event.fingerprint,
                            starts_at=event.occurred_at, snippet=event.snippet, context=event.context or {},
                            event_id=event.event_id)
            delivery = await self.sinks.send("issue_tracker", notice)
            if self.metrics:
                self.metrics.notifications.labels("issue_tracker", delivery.outcome).inc()
            if delivery.outcome == "sent":
                sent.append(event.id)  # counted on its issue: a row per event would swamp the ledger
                continue
            rows.append({"sink": "issue_tracker", "outcome": delivery.outcome, "detail": delivery.detail,
                         "attempts": delivery.attempts, "at": now, "issue_id": event.issue_id})
            if not delivery.refused:
                break
            refused.append(event.id)
        async with self.units.begin() as uow:
            await ledger.add_notifications(uow.conn, rows)
            await ledger.mark_events_tracked(uow.conn, sent, refused, now)
        return len(sent) + len(rows)

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
