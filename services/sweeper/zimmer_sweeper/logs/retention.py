"""LogRetentionJob (seed 003 "Log retention"): every 10 minutes, every environment, on the
maintenance lane, within a 90-second budget.

A tick drops whole day partitions past their window (verbose 7 days, the rest 90), oldest first,
each in its own short transaction: one that fails (a lock it could not get in time, say) is
logged and paged, and the tick goes on to the next. Each drop is logged with the partition's
name and its catalog row estimate. Then it works off deleted sessions' rows in 5,000-row slices.
The budget is checked before each unit of work; what a tick did not reach is logged at WARN and
is the next tick's. The log_partitions job creates each class's partitions a week ahead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.budget import BudgetExhausted, SweepBudget
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.logs import partitions
from zimmer_sweeper.logs.domain import DayPartition, to_create, to_drop
from zimmer_sweeper.logs.tables import logs, purges, runs

log = logging.getLogger("zimmer.sweeper.retention")

BUDGET_SECONDS = 90.0
PURGE_BATCH = 5_000
RUNS_KEPT = timedelta(days=30)
DROP_CONDITION = "sweeper:log_retention_drop"


@dataclass
class RetentionReport:
    started_at: datetime
    dropped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    unreached: list[str] = field(default_factory=list)
    purged_rows: int = 0
    budget_exhausted: bool = False


class LogRetention:
    def __init__(self, units: UnitsOfWork, now: Callable[[], datetime], pager: Pager, *,
                 on_dropped: Callable[[str, int], None] | None = None, on_failed: Callable[[str], None] | None = None,
                 on_purged: Callable[[int], None] | None = None):
        self.units = units
        self.now = now
        self.pager = pager
        self.on_dropped = on_dropped or (lambda klass, rows: None)
        self.on_failed = on_failed or (lambda klass: None)
        self.on_purged = on_purged or (lambda rows: None)

    # ---- log_partitions ----------------------------------------------------------------

    async def create_ahead(self) -> list[DayPartition]:
        """Today's partitions and a week ahead, for both classes; creates only the missing ones."""
        async with self.units.read() as conn:
            made = to_create(self.now(), await partitions.existing(conn))
        for partition in made:
            async with self.units.begin() as uow:  # one partition a transaction (`partitions.create_in`)
                await partitions.create_in(uow.conn, partition)
        if made:
            log.info("log partitions created", extra=kv(partitions=[p.name for p in made]))
        return made

    # ---- log_retention -----------------------------------------------------------------

    async def run(self, budget: SweepBudget) -> RetentionReport:
        now = self.now()
        report = RetentionReport(started_at=now)
        async with self.units.read() as conn:
            estimates = await partitions.estimates(conn)
        due = to_drop(now, set(estimates))
        for i, partition in enumerate(due):
            try:
                budget.check()
            except BudgetExhausted:
                report.budget_exhausted = True
                report.unreached = [p.name for p in due[i:]]
                log.warning("log retention budget spent; the next tick drops the rest", extra=kv(
                    unreached=report.unreached, budget_seconds=BUDGET_SECONDS))
                break
            await self._drop(partition, estimates[partition], now, report)
        if not report.budget_exhausted:
            report.purged_rows = await self.purge(budget, report)
        await self._record(report)
        await self._page(report)
        return report

    async def _drop(self, partition: DayPartition, estimated_rows: int, now: datetime,
                    report: RetentionReport) -> None:
        entry = {"partition": partition.name, "estimated_rows": estimated_rows,
                 "day": partition.day.isoformat(), "class": partition.klass}
        try:
            async with self.units.begin() as uow:
                await partitions.drop(uow.conn, partition)
        except Exception as exc:  # noqa: BLE001 - one failed drop does not stop the others
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            report.failed.append(entry)
            self.on_failed(partition.klass)
            # A warning per partition: the run pages once for all of them, as a condition that
            # repeats until a drop succeeds ("Log retention could not drop partitions").
            log.warning("log partition not dropped; the next tick retries it", extra=kv(**entry))
            return
        # How far past its retention window the partition was when it went (seed 003).
        entry["past_window_seconds"] = round((now - partition.upper).total_seconds())
        report.dropped.append(entry)
        self.on_dropped(partition.klass, estimated_rows)
        log.info("log partition dropped", extra=kv(**entry, past_window=str(now - partition.upper)))

    # ---- deleted sessions --------------------------------------------------------------

    async def purge(self, budget: SweepBudget, report: RetentionReport | None = None) -> int:
        """Delete deleted sessions' rows across every partition, 5,000 rows a transaction, until
        done or the budget is spent (the rest is the next tick's)."""
        total = 0
        async with self.units.read() as conn:
            pending = list((await conn.execute(
                select(purges.c.session_id).where(purges.c.finished_at.is_(None))
                .order_by(purges.c.requested_at, purges.c.session_id))).scalars())
        for session_id in pending:
            while True:
                try:
                    budget.check()
                except BudgetExhausted:
                    if report is not None:
                        report.budget_exhausted = True
                    log.warning("log purge budget spent; the next tick goes on", extra=kv(session_id=session_id))
                    return total
                async with self.units.begin() as uow:
                    deleted = await _delete_slice(uow.conn, session_id)
                    done = deleted < PURGE_BATCH
                    await uow.conn.execute(purges.update().where(purges.c.session_id == session_id).values(
                        deleted_rows=purges.c.deleted_rows + deleted, finished_at=self.now() if done else None))
                total += deleted
                self.on_purged(deleted)
                if done:
                    log.info("deleted session's log lines purged", extra=kv(session_id=session_id))
                    break
        return total

    async def _record(self, report: RetentionReport) -> None:
        finished = self.now()
        async with self.units.begin() as uow:
            await uow.conn.execute(runs.insert().values(
                started_at=report.started_at, finished_at=finished, dropped=len(report.dropped),
                failed=len(report.failed), purged_rows=report.purged_rows, budget_exhausted=report.budget_exhausted,
                detail={"dropped": report.dropped, "failed": report.failed, "unreached": report.unreached}))
            await uow.conn.execute(runs.delete().where(runs.c.finished_at < finished - RUNS_KEPT))

    async def _page(self, report: RetentionReport) -> None:
        """Failed drops page (one condition, resolved by the first tick that drops cleanly after)."""
        if report.failed:
            names = ", ".join(f["partition"] for f in report.failed)
            await self.pager.report(
                title="Log retention could not drop partitions", fingerprint=["sweeper", "log_retention_drop"],
                condition_key=DROP_CONDITION, context={"failed": report.failed},
                message=f"{len(report.failed)} log partition(s) past their window were not dropped ({names}); "
                        "the next tick retries. Rows older than their window stay until one succeeds.")
        elif await self._previous_failed():
            await self.pager.report(
                title="Log retention could not drop partitions", fingerprint=["sweeper", "log_retention_drop"],
                condition_key=DROP_CONDITION, still_true=False, message="Log retention drops partitions again")

    async def _previous_failed(self) -> bool:
        async with self.units.read() as conn:
            failed = (await conn.execute(select(runs.c.failed).order_by(runs.c.id.desc()).offset(1).limit(1))).scalar()
        return bool(failed)


async def request_purge(conn: AsyncConnection, session_id: int, reason: str, at: datetime) -> None:
    """Remember that a session's rows must go (idempotent: a repeated event changes nothing)."""
    await conn.execute(pg_insert(purges).values(session_id=session_id, reason=reason, requested_at=at)
                       .on_conflict_do_nothing())


async def _delete_slice(conn: AsyncConnection, session_id: int) -> int:
    key = (logs.c.level_class, logs.c.created_at, logs.c.id)
    chosen = select(*key).where(logs.c.session_id == session_id).limit(PURGE_BATCH)
    result = await conn.execute(logs.delete().where(logs.c.session_id == session_id, tuple_(*key).in_(chosen)))
    return int(result.rowcount or 0)


async def pending_purges(conn: AsyncConnection) -> int:
    return int((await conn.execute(select(func.count()).select_from(purges)
                                   .where(purges.c.finished_at.is_(None)))).scalar() or 0)
