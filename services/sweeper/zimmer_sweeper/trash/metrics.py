"""The trash pipeline's own numbers, beside what every disk run records (DiskMetrics.run_recorded:
each run's counts and bytes): how cleanups, restores and EmptyTrash end, what was preserved, git's
timeouts, the mass-deletion guard's defusals and the daily report's window."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class TrashMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.recorded = Counter("zimmer_trash_events_recorded_total", "Archive and unarchive events this host's "
                                "sweeper took into the trash pipeline", ["event"], registry=r)
        self.cleanups = Counter("zimmer_trash_cleanups_total", "Archived sessions' clone cleanups, by how they "
                                "ended (trashed, done, held, cancelled, exhausted)", ["outcome"], registry=r)
        self.attempt_failures = Counter("zimmer_trash_cleanup_attempt_failures_total", "Clone cleanup attempts "
                                        "that failed and were retried (quietly: only exhaustion pages)", registry=r)
        self.git_timeouts = Counter("zimmer_trash_git_timeouts_total", "Clones held because git was killed at "
                                    "its 120 s bound", registry=r)
        self.preserved_bytes = Counter("zimmer_trash_preserved_bytes_total", "Bytes of git bundles and patches "
                                       "written for dirty clones", registry=r)
        self.defused = Counter("zimmer_trash_mangled_clones_defused_total", "Clones whose working tree was "
                               "nothing but deletions of tracked files, so it was not preserved", registry=r)
        self.dropped_deletions = Counter("zimmer_trash_mangled_deletions_dropped_total", "Tracked-file deletions "
                                         "the mangled-tree guard dropped", registry=r)
        self.emptied = Counter("zimmer_trash_emptied_total", "Sessions EmptyTrash handled after their deadline, by "
                               "outcome (emptied, kept: reap-protected, deferred: past the budget)", ["outcome"],
                               registry=r)
        self.restores = Counter("zimmer_trash_restores_total", "Unarchive restores, by outcome (restored, "
                                "nothing_preserved, failed)", ["outcome"], registry=r)
        self.report_sessions = Gauge("zimmer_trash_mangled_report_sessions", "Sessions with a clone defused in the "
                                     "last daily report's 25-hour window", registry=r)
        self.report_deletions = Gauge("zimmer_trash_mangled_report_deletions", "Tracked-file deletions dropped in "
                                      "the last daily report's 25-hour window", registry=r)
