"""A chart-history table kept by `zimmer_common.history`'s rule, in SQL (DESIGN §9 "History for
charts"). A service declares its table with the shape this module reads and writes:

    at timestamptz, resolution_minutes smallint (1 or 15), samples integer, <key columns>,
    <value columns>, PRIMARY KEY (resolution_minutes, <key columns>, at)
    plus an index on (resolution_minutes, at), which retention walks from the oldest point.

`record` writes this minute's points (a replica that records the same minute adds nothing);
`retain_batch` folds and drops one bounded span, `retain` repeats it up to a bound; `read`
aggregates a range to a step in one statement; `count_points` is what the history metric shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import ColumnElement, Table, and_, case, delete, func, literal, literal_column, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.history import (
    COARSE,
    DROP_SPAN,
    FINE,
    FOLD_SPAN,
    Aggregate,
    ReadRange,
    drop_before,
    floor_to,
    fold_before,
)
from zimmer_common.unit_of_work import UnitsOfWork

RETAIN_BATCHES = 64  # batches one retention run does at most (a year of minutes takes 52)


@dataclass(frozen=True)
class HistoryTable:
    """A chart-history table: its key columns (which series a point belongs to) and how each value
    column folds (`zimmer_common.history.Aggregate`)."""

    table: Table
    keys: tuple[str, ...]
    values: Mapping[str, Aggregate]

    @property
    def c(self) -> Any:
        return self.table.c


ORIGIN = literal_column("timestamptz '1970-01-01 00:00:00+00'")


def bucket(column: Any, minutes: int) -> ColumnElement[datetime]:
    """The start of the `minutes` bucket holding `column`, aligned to the epoch (`history.floor_to`).
    Written inline (an int the caller checked): the same text in the select list and the GROUP BY,
    which bound parameters would not be."""
    return func.date_bin(literal_column(f"interval '{int(minutes)} minutes'"), column, ORIGIN)


def _aggregated(h: HistoryTable, source: Any) -> list[ColumnElement[Any]]:
    """Each value column aggregated over `source`'s rows as `combine` does: a level weighted by its
    samples (rows without a value left out), a peak the highest, a count summed."""
    out: list[ColumnElement[Any]] = []
    for name, how in h.values.items():
        col = source.c[name]
        if how == "mean":
            weight = func.sum(source.c.samples).filter(col.is_not(None))
            out.append((func.sum(col * source.c.samples) / func.nullif(weight, 0)).label(name))
        elif how == "max":
            out.append(func.max(col).label(name))
        else:
            out.append(func.coalesce(func.sum(col), 0).label(name))
    return out


async def record(conn: AsyncConnection, h: HistoryTable, at: datetime, rows: Sequence[Mapping[str, Any]]) -> int:
    """This minute's points (one per series in `rows`, keys and values), at the minute holding `at`.
    A series that has this minute already keeps it: a second replica's tick adds nothing."""
    if not rows:
        return 0
    minute = floor_to(at, FINE)
    stmt = pg_insert(h.table).values([{**r, "at": minute, "resolution_minutes": FINE, "samples": 1} for r in rows])
    result = await conn.execute(stmt.on_conflict_do_nothing())
    return int(result.rowcount or 0)


async def newest_fine(conn: AsyncConnection, h: HistoryTable, before: datetime) -> datetime | None:
    """The newest minute point before `before`, any series."""
    c = h.c
    return (await conn.execute(select(func.max(c.at)).where(c.resolution_minutes == FINE, c.at < before))).scalar()


@dataclass(frozen=True)
class Retained:
    folded: int = 0  # minute points folded into quarter hours
    written: int = 0  # quarter-hour points written (or merged into)
    dropped: int = 0  # quarter-hour points dropped past 90 days
    more: bool = False  # a batch was full: another would find more to do

    def __add__(self, other: Retained) -> Retained:
        return Retained(self.folded + other.folded, self.written + other.written, self.dropped + other.dropped,
                        other.more)


def _merge(h: HistoryTable, stmt: Any) -> Any:
    """ON CONFLICT for a quarter hour already there (a minute point written late): the two combined."""
    old, new = h.table.c, stmt.excluded
    total = old.samples + new.samples
    merged: dict[str, Any] = {"samples": total}
    for name, how in h.values.items():
        o, n = old[name], new[name]
        if how == "mean":
            merged[name] = case((o.is_(None), n), (n.is_(None), o), else_=(o * old.samples + n * new.samples) / total)
        elif how == "max":
            merged[name] = func.greatest(o, n)
        else:
            merged[name] = func.coalesce(o, 0) + func.coalesce(n, 0)
    return stmt.on_conflict_do_update(index_elements=["resolution_minutes", *h.keys, "at"], set_=merged)


async def retain_batch(conn: AsyncConnection, h: HistoryTable, now: datetime) -> Retained:
    """One bounded step of retention at `now`: the oldest week (at most) of minute points past
    `fold_before(now)` folded into quarter hours in one statement (deleted as they are folded), then
    the oldest 90 days (at most) of quarter hours past `drop_before(now)` dropped."""
    c = h.c
    fold_at, drop_at = fold_before(now), drop_before(now)
    oldest_fine = (await conn.execute(select(func.min(c.at)).where(c.resolution_minutes == FINE))).scalar()
    folded = written = 0
    more = False
    if oldest_fine is not None and oldest_fine < fold_at:
        upto = min(fold_at, floor_to(oldest_fine, COARSE) + FOLD_SPAN)
        more = upto < fold_at
        folded = int((await conn.execute(select(func.count()).select_from(h.table).where(
            c.resolution_minutes == FINE, c.at < upto))).scalar() or 0)
        moved = delete(h.table).where(c.resolution_minutes == FINE, c.at < upto).returning(*h.table.c).cte("moved")
        quarter = bucket(moved.c.at, COARSE)
        rows = select(*(moved.c[k] for k in h.keys), quarter.label("at"), literal(COARSE).label("resolution_minutes"),
                      func.sum(moved.c.samples).label("samples"), *_aggregated(h, moved)
                      ).group_by(*(moved.c[k] for k in h.keys), quarter)
        columns = [*h.keys, "at", "resolution_minutes", "samples", *h.values]
        stmt = _merge(h, pg_insert(h.table).from_select(columns, rows)).add_cte(moved)
        written = int((await conn.execute(stmt)).rowcount or 0)
    oldest_coarse = (await conn.execute(select(func.min(c.at)).where(c.resolution_minutes == COARSE))).scalar()
    dropped = 0
    if oldest_coarse is not None and oldest_coarse < drop_at:
        upto = min(drop_at, oldest_coarse + DROP_SPAN)
        more = more or upto < drop_at
        dropped = int((await conn.execute(delete(h.table).where(c.resolution_minutes == COARSE, c.at < upto)
                                          )).rowcount or 0)
    return Retained(folded, written, dropped, more)


async def retain(units: UnitsOfWork, h: HistoryTable, now: datetime, *, batches: int = RETAIN_BATCHES,
                 between: Callable[[], Any] | None = None) -> Retained:
    """Retention at `now` in batches, each its own unit of work, until nothing is left to do or
    `batches` have run. `between` (a job's progress) is awaited after each batch."""
    total = Retained()
    for _ in range(batches):
        async with units.begin() as uow:
            step = await retain_batch(uow.conn, h, now)
        total = total + step
        if between is not None:
            await between()
        if not step.more:
            break
    return total


async def read(conn: AsyncConnection, h: HistoryTable, span: ReadRange,
               where: Sequence[ColumnElement[bool]] = ()) -> list[Any]:
    """The points in `span` aggregated to its step: one row per series and bucket that has any
    sample (keys, `at`, `samples`, values), ordered by series then time. A bucket nothing was
    recorded in is absent (a gap, never a zero)."""
    c = h.c
    at = bucket(c.at, span.step_minutes)
    keys = [c[k] for k in h.keys]
    query = (select(*keys, at.label("at"), func.sum(c.samples).label("samples"), *_aggregated(h, h.table))
             .where(and_(c.at >= span.since, c.at < span.until, *where))
             .group_by(*keys, at).order_by(*keys, at))
    return list((await conn.execute(query)).all())


async def series_in(conn: AsyncConnection, h: HistoryTable, since: datetime, until: datetime,
                    where: Sequence[ColumnElement[bool]] = ()) -> list[tuple[Any, ...]]:
    """The series (key tuples) with a point in [since, until)."""
    c = h.c
    rows = await conn.execute(select(*(c[k] for k in h.keys)).where(c.at >= since, c.at < until, *where).distinct())
    return [tuple(r) for r in rows]


async def count_points(conn: AsyncConnection, h: HistoryTable) -> dict[int, int]:
    """Points kept, by resolution in minutes (1 and 15; a resolution with none reads 0)."""
    c = h.c
    rows = await conn.execute(select(c.resolution_minutes, func.count()).group_by(c.resolution_minutes))
    counts = {FINE: 0, COARSE: 0}
    counts.update({int(r[0]): int(r[1]) for r in rows})
    return counts


class PointsGauge:
    """`zimmer_chart_history_points{history, resolution}`: the points a chart history keeps, so its
    size is seen to stay flat (DESIGN §9). One per service registry; `history` names the table."""

    def __init__(self, registry: CollectorRegistry, history: str):
        self.history = history
        self.gauge = Gauge("zimmer_chart_history_points", "Points kept for the operator pages' charts, by history "
                           "and resolution (1m for 7 days, 15m for 90)", ["history", "resolution"], registry=registry)

    def observe(self, counts: Mapping[int, int]) -> None:
        for resolution, n in counts.items():
            self.gauge.labels(self.history, f"{resolution}m").set(n)
