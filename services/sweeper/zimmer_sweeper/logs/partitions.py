"""The day partitions of `sweeper.logs`, read from and changed in the catalog. Raw SQL on purpose:
partition DDL and catalog reads are what SQLAlchemy Core does not express (DESIGN: raw SQL only
where it earns its place).

Every statement here touches the catalog, never the rows: listing, sizing and the estimate are
O(partitions), and a drop is a catalog change whatever the partition holds. DDL takes a lock on
the class's parent table, so each statement runs with a short lock_timeout: a drop that would
queue behind a long reader fails (and is retried next tick) instead of stalling every insert
queued behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_sweeper.logs.domain import CLASSES, DayPartition
from zimmer_sweeper.schema import SCHEMA

DDL_LOCK_TIMEOUT = "2s"
# Creating partitions is serialised across replicas (two `CREATE TABLE IF NOT EXISTS … PARTITION
# OF` racing can both pass the existence check and one fails).
CREATE_LOCK = "zimmer.sweeper.log_partitions"


@dataclass(frozen=True)
class PartitionStats:
    partition: DayPartition
    estimated_rows: int
    total_bytes: int
    index_bytes: int


# Every day partition of either class, with its row estimate: reltuples once analysed, before
# that the statistics collector's live-tuple count (reltuples is -1 until then).
_PARTITIONS = f"""
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
      JOIN pg_class p ON p.oid = i.inhparent
      JOIN pg_namespace n ON n.oid = p.relnamespace
      LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
     WHERE n.nspname = '{SCHEMA}' AND p.relname IN ('logs_verbose', 'logs_other')"""
_ESTIMATE = "CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint ELSE coalesce(s.n_live_tup, 0) END"
_LIST = text(f"SELECT c.relname AS name, {_ESTIMATE} AS estimated_rows, pg_total_relation_size(c.oid) AS total_bytes, "
             f"pg_indexes_size(c.oid) AS index_bytes {_PARTITIONS}")
_ESTIMATES = text(f"SELECT c.relname AS name, {_ESTIMATE} AS estimated_rows {_PARTITIONS}")


async def stats(conn: AsyncConnection) -> list[PartitionStats]:
    """Every day partition with its catalog estimate and sizes, oldest first. The estimate is
    pg_class.reltuples once the partition has been analysed, before that the statistics
    collector's live-tuple count (reltuples is -1 on a partition never vacuumed or analysed)."""
    found = []
    for row in (await conn.execute(_LIST)).mappings():
        partition = DayPartition.parse(row["name"])
        if partition is not None:
            found.append(PartitionStats(partition, int(row["estimated_rows"]), int(row["total_bytes"]),
                                        int(row["index_bytes"])))
    return sorted(found, key=lambda s: s.partition)


async def estimates(conn: AsyncConnection) -> dict[DayPartition, int]:
    """Every day partition with its row estimate only: what a retention tick needs, without the
    sizes (two file-size reads per partition) the readings want."""
    found = {}
    for row in (await conn.execute(_ESTIMATES)).mappings():
        partition = DayPartition.parse(row["name"])
        if partition is not None:
            found[partition] = int(row["estimated_rows"])
    return found


async def existing(conn: AsyncConnection) -> set[DayPartition]:
    return set(await estimates(conn))


async def create_one(engine: AsyncEngine, partition: DayPartition) -> None:
    """Create one day partition in a transaction of its own (`create_in`), for a caller holding an
    engine rather than the service's units of work (the tests' and benchmarks' setup)."""
    async with engine.begin() as conn:
        await create_in(conn, partition)


async def create_in(conn: AsyncConnection, partition: DayPartition) -> None:
    """Create one day partition (with its copy of the timeline index, inherited from the parent).
    `conn`'s transaction must create nothing else: creating takes an exclusive lock on the class's
    parent, and a transaction holding both classes' parents at once deadlocks with a reader that
    locks them in the other order."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": CREATE_LOCK})
    await conn.execute(text(f"SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
    await conn.execute(text(
        f'CREATE TABLE IF NOT EXISTS "{SCHEMA}"."{partition.name}" PARTITION OF "{SCHEMA}"."{partition.parent}" '
        f"FOR VALUES FROM ('{partition.lower.isoformat()}') TO ('{partition.upper.isoformat()}')"))


async def drop(conn: AsyncConnection, partition: DayPartition) -> None:
    await conn.execute(text(f"SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
    await conn.execute(text(f'DROP TABLE IF EXISTS "{SCHEMA}"."{partition.name}"'))


async def holds_a_row(conn: AsyncConnection, partition: DayPartition) -> bool:
    """Whether the partition holds any row: reads its first live tuple, not the table."""
    return bool((await conn.execute(text(
        f'SELECT EXISTS (SELECT 1 FROM "{SCHEMA}"."{partition.name}")'))).scalar())


async def oldest_nonempty(conn: AsyncConnection, partitions: list[DayPartition]) -> list[DayPartition]:
    """For each class, its oldest partition that holds a row (at most one per class). Walks each
    class from its oldest day and stops at the first that holds one: retention keeps the walk to
    the few empty days that can precede it."""
    found = []
    for klass in CLASSES:
        for partition in sorted(p for p in partitions if p.klass == klass):
            if await holds_a_row(conn, partition):
                found.append(partition)
                break
    return found
