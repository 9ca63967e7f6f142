"""Lists page by bytes as well as by count (issue 27 #13): an RPC answer travels in one bus message
(NATS carries 1 MiB by default), so a list whose rows carry free text answers with as many rows as
fit under a byte budget and says where the next page starts, instead of failing for its size.

`rows_that_fit` is the rule, pure; `answer_budget` is the budget a service derives from the bus it
answers on; `take_within` applies the rule to rows, measuring each as it will travel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

# The rows of one answer, at most: half of NATS's default message, leaving the other half for the
# rest of the answer (counts, totals, the reply envelope) and for a server configured smaller than
# its default. One row is at most its payload (64 KB) plus bounded fields, so a page holds at least one.
ANSWER_ROWS_MAX_BYTES: Final = 512 * 1024


def rows_that_fit(sizes: Iterable[int], budget: int, limit: int | None = None) -> int:
    """How many leading rows one page carries: as many as fit in `budget` bytes together, at most
    `limit`, and never none while a row is left (a page that carried nothing would never end; one
    row is bounded far below a message, so the first row always travels)."""
    taken, used = 0, 0
    for size in sizes:
        if limit is not None and taken >= limit:
            break
        if taken and used + size > budget:
            break
        taken, used = taken + 1, used + size
    return taken


def next_offset(offset: int, shown: int, total: int) -> int | None:
    """Where the page after one of `shown` rows from `offset` starts; None when it reached the end."""
    return offset + shown if offset + shown < total else None


def answer_budget(payload_room: int, ceiling: int = ANSWER_ROWS_MAX_BYTES) -> int:
    """The byte budget of one answer's rows on a bus whose messages carry `payload_room` bytes:
    half of it, at most `ceiling`."""
    return max(1, min(ceiling, payload_room // 2))


def row_bytes(row: BaseModel) -> int:
    """A row's size as it travels: its JSON encoding (the bus's reply is the same encoding)."""
    return len(row.__pydantic_serializer__.to_json(row))


def take_within(rows: Sequence[T], budget: int, size: Callable[[T], int]) -> list[T]:
    """The leading rows of `rows` one page carries under `budget` (`rows_that_fit`), measuring each
    row only until the page is full."""
    return list(rows[:rows_that_fit((size(r) for r in rows), budget)])


ROWS_READ_AT_ONCE: Final = 50  # rows a page reads per round trip: a page cut short reads at most this many more


async def read_within(conn: AsyncConnection, stmt: Any, budget: int, convert: Callable[[Any], M]) -> list[M]:
    """The leading rows of `stmt`, converted, as many as fit in `budget` bytes (`rows_that_fit`).
    Read through a cursor a few at a time, so a page of large rows never loads the rows it will
    not carry (1,000 rows of 64 KB would be 64 MB in memory for a page of eight)."""
    taken: list[M] = []
    sizes: list[int] = []
    result = await conn.stream(stmt)
    try:
        async for chunk in result.partitions(ROWS_READ_AT_ONCE):
            rows = [convert(r) for r in chunk]
            more = [row_bytes(r) for r in rows]
            fit = rows_that_fit(sizes + more, budget) - len(sizes)
            taken += rows[:fit]
            sizes += more[:fit]
            if fit < len(rows):
                break
    finally:
        await result.close()
    return taken
