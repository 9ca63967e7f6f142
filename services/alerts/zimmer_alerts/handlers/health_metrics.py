"""A metric for every number the health report shows (issue 15), set each time a report is
computed. A lane with nothing ready has no ready series at all (its label is removed), as the
report leaves it out: an idle lane and a draining one are different facts, and a 0 says the wrong
one."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Gauge, Histogram

from zimmer_common.contracts import health as h

STATUS_VALUE = {"ok": 0, "warning": 1, "critical": 2}
CRON_STATES = ("fresh", "overdue", "stale", "disabled", "exempt")


class HealthMetrics:
    def __init__(self, registry: CollectorRegistry):
        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, list(labels), registry=registry)

        self.overall = gauge("zimmer_health_overall_status", "The report's overall status: 0 ok, 1 warning, 2 critical")
        self.verdict = gauge("zimmer_health_queue_verdict", "1 for the queue verdict's status code (ok when none)",
                             ("code",))
        self.readable = gauge("zimmer_health_queue_readable", "1 when JetStream could be read for the last report")
        self.ready = gauge("zimmer_queue_ready", "Messages waiting on a worker, per lane (absent when none)", ("lane",))
        self.claimed = gauge("zimmer_queue_claimed", "Messages a worker holds (ack pending), per lane", ("lane",))
        self.oldest_ready = gauge("zimmer_queue_oldest_ready_age_seconds",
                                  "Age of each lane's longest-waiting ready message (absent when none)", ("lane",))
        self.oldest_claimed = gauge("zimmer_queue_oldest_claimed_age_seconds",
                                    "Age of each lane's longest-running execution", ("lane",))
        self.rate = gauge("zimmer_queue_processing_rate_per_hour", "Runs finished in the trailing hour, per lane",
                          ("lane",))
        self.since_finished = gauge("zimmer_queue_seconds_since_last_finished",
                                    "Seconds since any job lane last finished something (absent: never)")
        self.cron_keys = gauge("zimmer_cron_keys", "Scheduled keys by freshness state", ("state",))
        self.cron_behind = gauge("zimmer_cron_key_behind", "1 for each key read overdue or stale", ("key", "state"))
        self.workers_active = gauge("zimmer_workers_active", "Service instances with a heartbeat in the last 5 min")
        self.workers_registered = gauge("zimmer_workers_registered", "Service instances registered (seen in 1 h)")
        self.instances = gauge("zimmer_service_instances", "Registered instances of each service, up or down "
                               "(down: two heartbeat intervals missed)", ("service", "state"))
        self.stream_replicas = gauge("zimmer_nats_stream_replicas", "Each JetStream stream's replicas: configured "
                                     "(expected) and caught up with its leader (current)", ("stream", "state"))
        self.stream_leader = gauge("zimmer_nats_stream_has_leader", "1 while the stream has a leader (0: its writes "
                                   "are refused)", ("stream",))
        self.servers_offline = gauge("zimmer_nats_servers_offline", "NATS servers a stream's leader reports offline")
        self.cluster_status = gauge("zimmer_nats_cluster_status", "The NATS cluster: 0 ok, 1 warning "
                                    "(under-replicated), 2 critical (a stream leaderless or unreadable)")
        self.last_check = gauge("zimmer_health_monitor_last_check_timestamp_seconds",
                                "When the health monitor last completed a check (unix time)")
        self.report_seconds = Histogram("zimmer_health_report_seconds", "Time to compute one health report",
                                        registry=registry,
                                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self._lanes: set[str] = set()
        self._behind: set[tuple[str, str]] = set()

    def checked(self, unix_time: float) -> None:
        self.last_check.set(unix_time)

    def observe(self, report: h.HealthReport) -> None:
        self.overall.set(STATUS_VALUE[report.overall_status])
        self.verdict.clear()
        self.verdict.labels(report.verdict.code or "ok").set(1)
        q = report.queue
        self.readable.set(1 if q.readable else 0)
        self._lane_series(q)
        if q.seconds_since_last_finished is None:
            self.since_finished.set(float("nan"))
        else:
            self.since_finished.set(q.seconds_since_last_finished)
        counts = dict.fromkeys(CRON_STATES, 0)
        behind: set[tuple[str, str]] = set()
        for key in report.cron.keys:
            counts[key.state] += 1
            if key.state in ("overdue", "stale"):
                behind.add((key.key, key.state))
        for state, n in counts.items():
            self.cron_keys.labels(state).set(n)
        for gone in self._behind - behind:
            self.cron_behind.remove(*gone)
        for item in behind:
            self.cron_behind.labels(*item).set(1)
        self._behind = behind
        self.workers_active.set(report.workers.active)
        self.workers_registered.set(report.workers.registered)
        self._cluster(report.cluster)
        self.instances.clear()  # a service whose instances all retired drops out
        for service, n in report.workers.by_service.items():
            self.instances.labels(service, "up").set(n.up)
            self.instances.labels(service, "down").set(n.registered - n.up)

    def _cluster(self, nats: h.ClusterHealth | None) -> None:
        if nats is None:
            return
        self.cluster_status.set(STATUS_VALUE[nats.status])
        self.servers_offline.set(len(nats.servers_offline))
        for s in nats.streams:
            self.stream_replicas.labels(s.stream, "expected").set(s.expected)
            self.stream_replicas.labels(s.stream, "current").set(s.current)
            self.stream_leader.labels(s.stream).set(1 if s.leader else 0)

    def _lane_series(self, q: h.QueueStatistics) -> None:
        seen = {lane.lane for lane in q.lanes}
        for gone in self._lanes - seen:
            for g in (self.ready, self.claimed, self.oldest_ready, self.oldest_claimed, self.rate):
                with contextlib.suppress(KeyError):
                    g.remove(gone)
        for lane in q.lanes:
            self._set_or_remove(self.ready, lane.lane, lane.ready or None)
            self._set_or_remove(self.claimed, lane.lane, lane.claimed)
            self._set_or_remove(self.oldest_ready, lane.lane, lane.oldest_ready_age_seconds)
            self._set_or_remove(self.oldest_claimed, lane.lane, lane.oldest_claimed_age_seconds)
            self._set_or_remove(self.rate, lane.lane, lane.processing_rate_per_hour)
        self._lanes = seen

    @staticmethod
    def _set_or_remove(g: Gauge, lane: str, value: float | None) -> None:
        if value is None:
            with contextlib.suppress(KeyError):
                g.remove(lane)
        else:
            g.labels(lane).set(value)
