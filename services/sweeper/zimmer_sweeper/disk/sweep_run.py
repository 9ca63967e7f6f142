"""One run of a disk sweep, as it goes: its counts, bytes and refusals, its outcome and the
sentence saying what it did; written down once at the end (DiskRecords, for the Disk and clones
panel) and counted in the metrics, so every number a run records is also a metric."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from zimmer_common.contracts.disk import SweepOutcome
from zimmer_common.logs import kv
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords

log = logging.getLogger("zimmer.sweeper.disk")

# Worse outcomes win: a run that was partial and then aborted is aborted.
_SEVERITY: dict[SweepOutcome, int] = {"ok": 0, "partial": 1, "aborted": 2, "failed": 3}


@dataclass
class SweepRun:
    job: str
    started_at: datetime
    counts: Counter[str] = field(default_factory=Counter)
    bytes_freed: int = 0
    outcome: SweepOutcome = "ok"
    notes: list[str] = field(default_factory=list)

    def mark(self, outcome: SweepOutcome, sentence: str) -> None:
        if _SEVERITY[outcome] > _SEVERITY[self.outcome]:
            self.outcome = outcome
        self.notes.append(sentence)

    @property
    def note(self) -> str:
        return " ".join(self.notes)

    @property
    def refusals(self) -> int:
        return self.counts["refused"] + self.counts["unanswered"]


async def record(run: SweepRun, records: DiskRecords, metrics: DiskMetrics, finished_at: datetime) -> None:
    counts = {k: int(v) for k, v in run.counts.items()}
    metrics.run_recorded(run.job, outcome=run.outcome, counts=counts, bytes_freed=run.bytes_freed,
                         finished_at=finished_at.timestamp())
    log.info("disk sweep finished", extra=kv(job=run.job, outcome=run.outcome, bytes_freed=run.bytes_freed,
                                             note=run.note, **counts))
    try:
        await records.run(run.job, started_at=run.started_at, outcome=run.outcome, counts=counts,
                          bytes_freed=run.bytes_freed, refusals=run.refusals, note=run.note)
    except Exception as exc:  # noqa: BLE001 - the run happened; its log line above says what it did
        log.warning("disk sweep run not recorded", extra=kv(job=run.job, error=repr(exc)[:300]))
