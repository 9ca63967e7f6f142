"""Backlog metrics: items by status, the counts every read surface shows, and the flows."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from zimmer_common.contracts.backlog import Counts

STATUSES = ("queued", "starting", "started", "removed")


class BacklogMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.items = Gauge("zimmer_backlog_items", "Work backlog rows, by status", ["status"], registry=r)
        self.counts = Gauge("zimmer_backlog_count", "The backlog's counts (queued, in_flight, spot_held, parked, "
                            "claimed)", ["kind"], registry=r)
        self.appends = Counter("zimmer_backlog_appends_total", "Items appended", registry=r)
        self.pulled = Counter("zimmer_backlog_pulled_total", "Items started by a pull or start-now", ["via"], registry=r)
        self.removals = Counter("zimmer_backlog_removals_total", "Items removed, by reason", ["reason"], registry=r)

    def observe(self, by_status: dict[str, int], counts: Counts) -> None:
        for status in STATUSES:
            self.items.labels(status).set(by_status.get(status, 0))
        for kind, value in counts.model_dump().items():
            self.counts.labels(kind).set(value)
