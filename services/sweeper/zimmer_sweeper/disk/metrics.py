"""The disk sweeps' metrics: what every run records, the guard's refusals, and each root's free space."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class DiskMetrics:
    """The disk sweeps (issue 16): every number a run records (DiskRecords.run's counts, bytes and
    refusals), the guard's refusals, and each root's free space as the monitor last read it."""

    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.free_bytes = Gauge("zimmer_disk_free_bytes", "Free bytes on the volume holding each root",
                                ["host", "root"], registry=r)
        self.total_bytes = Gauge("zimmer_disk_total_bytes", "Size of the volume holding each root",
                                 ["host", "root"], registry=r)
        self.sweepable = Gauge("zimmer_disk_root_sweepable", "1 when this deployment may delete under the root "
                               "(the fence: only the deployment that owns the volume)", ["host", "root"], registry=r)
        self.reclaim_unreachable = Gauge("zimmer_disk_reclaim_unreachable", "1 while the free-space monitor "
                                         "cannot reclaim the clones volume to its target (paged)", ["host"], registry=r)
        self.runs = Counter("zimmer_disk_sweep_runs_total", "Disk sweep runs, by outcome", ["job", "outcome"],
                            registry=r)
        self.last_run = Gauge("zimmer_disk_sweep_last_run_timestamp_seconds", "When each disk sweep last finished "
                              "(unix time)", ["job"], registry=r)
        self.removed = Counter("zimmer_disk_sweep_removed_total", "Directories a disk sweep removed", ["job"],
                               registry=r)
        self.bytes_freed = Counter("zimmer_disk_sweep_bytes_freed_total", "Bytes disk sweeps freed, measured "
                                   "against the volume", ["job"], registry=r)
        self.tombstones = Counter("zimmer_disk_tombstones_reaped_total", "Deletion tombstones reaped", ["job"],
                                  registry=r)
        self.refusals = Counter("zimmer_disk_guard_refusals_total", "Deletions the guard refused (owned: a live or "
                                "reap-protected session owns the path; unanswered: spot-gate gave no answer, so "
                                "it failed closed)", ["job", "kind"], registry=r)
        self.transcripts_kept = Counter("zimmer_disk_guard_transcripts_kept_total", "Clones removed whose "
                                        "transcript was kept because the second question's answer changed or "
                                        "went unanswered", ["job"], registry=r)
        self.compose_teardowns = Counter("zimmer_disk_compose_teardowns_total", "Docker Compose teardowns run "
                                         "before a clone's removal, by outcome (down, failed, timed_out)",
                                         ["job", "outcome"], registry=r)
        self.counted = Counter("zimmer_disk_sweep_counted_total", "Every count a disk sweep run records "
                               "(examined, kept_tracked, deferred, overflow, ...)", ["job", "count"], registry=r)

    def run_recorded(self, job: str, *, outcome: str, counts: dict[str, int], bytes_freed: int, finished_at: float,
                     ) -> None:
        self.runs.labels(job, outcome).inc()
        self.last_run.labels(job).set(finished_at)
        self.bytes_freed.labels(job).inc(bytes_freed)
        for name, value in counts.items():
            self.counted.labels(job, name).inc(value)
        self.removed.labels(job).inc(counts.get("removed", 0))
        self.tombstones.labels(job).inc(counts.get("tombstones_reaped", 0))
