"""Answering "is retention running?" without a shell (seed 003): sizes and the row estimate from
the catalog, the oldest row's age from partition bounds (O(partitions), never a scan), the last
retention tick, and how far ingest is behind. The status warns once the oldest row is more than a
week past its window, and is never counted in the overall status."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_common.contracts.logs import LogRetentionHealth
from zimmer_sweeper.logs import partitions
from zimmer_sweeper.logs.domain import oldest, status
from zimmer_sweeper.logs.retention import pending_purges
from zimmer_sweeper.logs.tables import runs


async def read(engine: AsyncEngine, now: datetime,
               ingest_lag: Callable[[], Awaitable[timedelta | None]] | None = None) -> LogRetentionHealth:
    async with engine.connect() as conn:
        stats = await partitions.stats(conn)
        nonempty = await partitions.oldest_nonempty(conn, [s.partition for s in stats])
        last = (await conn.execute(select(runs.c.finished_at, runs.c.dropped, runs.c.failed)
                                   .order_by(runs.c.id.desc()).limit(1))).first()
        purges = await pending_purges(conn)
    any_ = oldest(nonempty, now)
    verbose = oldest(nonempty, now, "verbose")
    other = oldest(nonempty, now, "other")
    state, note = status(any_, verbose, other)
    lag = None
    if ingest_lag is not None:
        try:
            age = await ingest_lag()
            lag = age.total_seconds() if age is not None else None
        except Exception:  # noqa: BLE001 - the bus reading is one number; the rest still answers
            lag = None
    return LogRetentionHealth(
        status=state, status_note=note,
        estimated_rows=sum(s.estimated_rows for s in stats),
        estimated_verbose_rows=sum(s.estimated_rows for s in stats if s.partition.klass == "verbose"),
        total_bytes=sum(s.total_bytes for s in stats), index_bytes=sum(s.index_bytes for s in stats),
        partitions=len(stats),
        oldest_log_at=any_.at, oldest_log_age_seconds=any_.age.total_seconds() if any_.age is not None else None,
        oldest_verbose_log_at=verbose.at,
        oldest_verbose_log_age_seconds=verbose.age.total_seconds() if verbose.age is not None else None,
        last_run_at=last.finished_at if last else None, last_run_dropped=last.dropped if last else None,
        last_run_failed=last.failed if last else None, pending_session_purges=purges,
        ingest_oldest_unwritten_age_seconds=lag)
