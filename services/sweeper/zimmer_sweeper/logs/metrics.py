"""The session logs' metrics: every number the Log Retention panel shows, and the ingest's flow."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from zimmer_common.contracts.logs import LogRetentionHealth


class SweeperMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.lines = Counter("zimmer_logs_ingested_total", "Log lines taken from the ingest stream, by outcome "
                             "(written; skipped: already written or its session deleted; refused: not a log line)",
                             ["outcome"], registry=r)
        self.batch_seconds = Histogram("zimmer_logs_ingest_batch_seconds", "Time to write one ingest batch",
                                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=r)
        self.batch_size = Gauge("zimmer_logs_ingest_batch_size", "How many lines the ingest fetches at once now "
                                "(shrinks while PostgreSQL is slow)", registry=r)
        self.unwritten_age = Gauge("zimmer_logs_ingest_oldest_unwritten_seconds",
                                   "Age of the oldest log line in the ingest stream not yet written "
                                   "(the stream keeps 3 days)", registry=r)
        self.estimated_rows = Gauge("zimmer_logs_estimated_rows", "Log rows by class (catalog estimate)",
                                    ["class"], registry=r)
        self.total_bytes = Gauge("zimmer_logs_total_bytes", "Size of the logs table with its indexes", registry=r)
        self.index_bytes = Gauge("zimmer_logs_index_bytes", "Size of the logs table's indexes", registry=r)
        self.partitions = Gauge("zimmer_logs_partitions", "Day partitions of the logs table", registry=r)
        self.oldest_age = Gauge("zimmer_logs_oldest_age_seconds", "Age of the oldest stored log row, by class "
                                "(to the day: its partition's start; 0 when none)", ["class"], registry=r)
        self.retention_warning = Gauge("zimmer_logs_retention_warning", "1 when the oldest row is more than a week "
                                       "past its window", registry=r)
        self.last_run = Gauge("zimmer_logs_retention_last_run_timestamp_seconds",
                              "When the last log retention tick finished (unix time)", registry=r)
        self.pending_purges = Gauge("zimmer_logs_pending_session_purges",
                                    "Deleted sessions whose log lines are still being purged", registry=r)
        self.dropped = Counter("zimmer_logs_partitions_dropped_total", "Log partitions dropped by retention",
                               ["class"], registry=r)
        self.dropped_rows = Counter("zimmer_logs_dropped_rows_total", "Rows in dropped partitions (catalog "
                                    "estimate)", ["class"], registry=r)
        self.drop_failures = Counter("zimmer_logs_partition_drop_failures_total",
                                     "Log partitions retention could not drop", ["class"], registry=r)
        self.purged_rows = Counter("zimmer_logs_purged_rows_total", "Deleted sessions' log rows purged", registry=r)

    def observe(self, health: LogRetentionHealth) -> None:
        self.estimated_rows.labels("verbose").set(health.estimated_verbose_rows)
        self.estimated_rows.labels("other").set(health.estimated_rows - health.estimated_verbose_rows)
        self.total_bytes.set(health.total_bytes)
        self.index_bytes.set(health.index_bytes)
        self.partitions.set(health.partitions)
        self.oldest_age.labels("any").set(health.oldest_log_age_seconds or 0)
        self.oldest_age.labels("verbose").set(health.oldest_verbose_log_age_seconds or 0)
        self.retention_warning.set(1 if health.status == "warning" else 0)
        if health.last_run_at is not None:
            self.last_run.set(health.last_run_at.timestamp())
        self.pending_purges.set(health.pending_session_purges)
        if health.ingest_oldest_unwritten_age_seconds is not None:
            self.unwritten_age.set(health.ingest_oldest_unwritten_age_seconds)
