"""MangledCloneReport (per host, daily 08:00 UTC): one line saying how many clones this host's
archive-side mass-deletion guard defused in the last REPORT_WINDOW (25 h), how many tracked-file
deletions it dropped, and which sessions, read from the markers the cleanup writes.

Clone deletion is atomic now, which removes the mechanism that made these trees (#412), so the
count measures whether anything still does. It is kept out of the alert: the line is WARN (it
reaches the log store and wakes nobody), and a day with none is INFO, below the export threshold.
The window is measured from when the run starts, not from when cron fired.
"""

from __future__ import annotations

import logging

from zimmer_common.logs import kv
from zimmer_sweeper.disk.sweep_run import SweepRun, record
from zimmer_sweeper.trash import store
from zimmer_sweeper.trash.cleanup import TrashDeps
from zimmer_sweeper.trash.domain import Defusal, report_line, report_since

JOB = "mangled_clone_report"
log = logging.getLogger("zimmer.sweeper.mangled_report")


class MangledCloneReport:
    def __init__(self, deps: TrashDeps):
        self.d = deps

    async def run(self) -> SweepRun:
        started = self.d.clock.now()
        since = report_since(started)
        async with self.d.units.read() as conn:
            rows = await store.defusals_since(conn, host=self.d.host, since=since)
        defusals = [Defusal(r.session_id, r.dropped_deletions) for r in rows]
        level, message = report_line(defusals)
        sessions = sorted({d.session_id for d in defusals})
        dropped = sum(d.dropped_deletions for d in defusals)
        log.log(logging.WARNING if level == "warning" else logging.INFO, message,
                extra=kv(host=self.d.host, window_start=since.isoformat(), window_end=started.isoformat(),
                         sessions_defused=len(sessions), deletions_dropped=dropped, session_ids=sessions))
        self.d.metrics.report_sessions.set(len(sessions))
        self.d.metrics.report_deletions.set(dropped)
        run = SweepRun(JOB, started)
        run.counts.update(sessions_defused=len(sessions), deletions_dropped=dropped)
        run.notes.append(message)
        await record(run, self.d.records, self.d.disk_metrics, self.d.clock.now())
        return run
