"""What every disk sweep writes down about itself, for the Health page's Disk and clones panel and
its metrics: one row per run (counts and bytes), one per guard refusal. Every row names the host,
since one sweeper runs beside each runtime host and all of them share the schema."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import insert

from zimmer_common.contracts.disk import SweepOutcome
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.disk.tables import DiskRefusalRow, DiskRunRow


class DiskRecords:
    def __init__(self, units: UnitsOfWork, host: str, now: Callable[[], datetime]):
        self.units = units
        self.host = host
        self._now = now

    async def run(self, job: str, *, started_at: datetime, outcome: SweepOutcome, counts: dict[str, int],
                  bytes_freed: int = 0, refusals: int = 0, note: str = "") -> int:
        """Record one finished run; returns its id."""
        async with self.units.begin() as uow:
            return int((await uow.conn.execute(insert(DiskRunRow).values(
                host=self.host, job=job, started_at=started_at, finished_at=self._now(), outcome=outcome,
                counts=counts, bytes_freed=bytes_freed, refusals=refusals, note=note[:2000],
            ).returning(DiskRunRow.id))).scalar_one())

    async def refusal(self, job: str, path: str, session_ids: list[int], reason: str) -> None:
        async with self.units.begin() as uow:
            await uow.conn.execute(insert(DiskRefusalRow).values(
                host=self.host, at=self._now(), job=job, path=path, session_ids=session_ids, reason=reason[:2000]))


def counts_of(**counts: Any) -> dict[str, int]:
    """A run's counts, with nothing that is not a whole number among them."""
    return {k: int(v) for k, v in counts.items()}
