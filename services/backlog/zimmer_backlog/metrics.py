"""Backlog metrics: items by status, the counts every read surface shows, the flows, and the
liveness sweep's and GitHub snapshot's figures (every number the Issues view shows)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from zimmer_common.contracts.backlog import Counts

STATUSES = ("queued", "starting", "started", "removed")


class BacklogMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.items = Gauge("zimmer_backlog_items", "Work backlog rows, by status", ["status"], registry=r)
        self.counts = Gauge("zimmer_backlog_count", "The backlog's counts (queued, in_flight, spot_held, parked, "
                            "claimed, stranded, awaiting_decision, held)", ["kind"], registry=r)
        self.appends = Counter("zimmer_backlog_appends_total", "Items appended", registry=r)
        self.pulled = Counter("zimmer_backlog_pulled_total", "Items started by a pull or start-now", ["via"], registry=r)
        self.removals = Counter("zimmer_backlog_removals_total", "Items removed, by reason", ["reason"], registry=r)
        self.holds = Counter("zimmer_backlog_holds_total", "Stranded rows held for a human decision", registry=r)
        self.liveness_passes = Counter("zimmer_backlog_liveness_passes_total",
                                       "Liveness sweep passes, by whether GitHub could be read in full",
                                       ["outcome"], registry=r)
        self.liveness_verdicts = Counter("zimmer_backlog_liveness_verdicts_total",
                                         "Verdicts the liveness sweep recorded", ["verdict"], registry=r)
        self.liveness_last_pass = Gauge("zimmer_backlog_liveness_last_pass_timestamp_seconds",
                                        "When the last liveness pass ran (unix time)", registry=r)
        self.stranded_oldest_age = Gauge("zimmer_backlog_stranded_oldest_age_seconds",
                                         "Age of the oldest stranded row at the last pass (0: none)", registry=r)
        self.stranded_pages = Counter("zimmer_backlog_stranded_pages_total",
                                      "Pages the liveness sweep sent: band, lapse", ["kind"], registry=r)
        self.band_store_failures = Counter("zimmer_backlog_stranded_band_store_failures_total",
                                           "Passes whose alert band store could not be used", registry=r)
        self.github_requests = Counter("zimmer_backlog_github_requests_total", "Requests to GitHub, by outcome",
                                       ["api", "outcome"], registry=r)
        self.issues_view = Gauge("zimmer_backlog_issues_view", "The Issues view's GitHub-side figures: stranded and "
                                 "awaiting rows shown, those left out because the snapshot shows their issue closed, "
                                 "open issues with no row, queued rows whose issue is closed", ["figure"], registry=r)
        self.github_open_issues = Gauge("zimmer_backlog_github_open_issues",
                                        "Open issues per gated repository at the last snapshot", ["repo"], registry=r)

    def observe(self, by_status: dict[str, int], counts: Counts) -> None:
        for status in STATUSES:
            self.items.labels(status).set(by_status.get(status, 0))
        for kind, value in counts.model_dump().items():
            self.counts.labels(kind).set(value)

    def observe_view(self, view: Any) -> None:
        for figure in ("stranded_total", "stranded_closed_in_github", "awaiting_total", "awaiting_closed_in_github",
                       "held", "not_on_queue_total", "queued_closed_in_github"):
            self.issues_view.labels(figure).set(getattr(view, figure))

    def observe_pass(self, report: Any) -> None:
        outcome = "rate_limited" if report.rate_limited else "unreadable" if report.unreadable_repos else "read_all"
        self.liveness_passes.labels(outcome).inc()
        for verdict, n in report.verdicts.items():
            self.liveness_verdicts.labels(verdict).inc(n)
        self.liveness_last_pass.set(report.started_at.timestamp())
        age = report.oldest_stranded_age
        self.stranded_oldest_age.set(0 if age is None else age.total_seconds())
        for kind in report.paged:
            self.stranded_pages.labels(kind).inc()

    def github_request(self, api: str, outcome: str) -> None:
        self.github_requests.labels(api, outcome).inc()
