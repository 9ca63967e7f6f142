"""The ingest's rows as PostgreSQL's text COPY format, built in Python.

`copy_records_to_table` has asyncpg encode every value of every record in binary, a Python-level
call per value (~3 µs a line); here a line's row is one f-string, made when its message is
decoded, and a batch is one `join` and one `encode`. The row starts with `created_at` (the time
of the write, the same for the whole batch), so a batch's buffer is that prefix joined with the
rows' tails.

Text COPY (https://www.postgresql.org/docs/current/sql-copy.html, "Text Format"): columns are
separated by a tab and rows end with a newline; a backslash starts an escape, so backslash, tab,
newline and carriage return in a value are sent as `\\\\`, `\\t`, `\\n`, `\\r`; every other
character stands for itself. NUL cannot be sent at all (PostgreSQL text cannot hold it) and lone
surrogates cannot be encoded: `storable`/`storable_id` escape both before a value gets here.
There are no NULLs (every column is NOT NULL), so `\\N` never appears unescaped.
Times are sent in UTC, ISO 8601 (`datetime.isoformat`), which timestamptz reads exactly: an offset
past ±15:59 (a runtime may send up to ±23:59) is out of PostgreSQL's range as input.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from zimmer_common.contracts.envelope import printable

# The column order of the buffer (not the table's): created_at first, so a batch's rows share
# one prefix. Every other column is in the tail `row_tail` makes.
COLUMNS = ("created_at", "level_class", "session_id", "level", "message", "logged_at", "message_id")

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_NUL = "\x00"


def escape(text: str) -> str:
    """`text` as a text COPY value. It must already be storable: no NUL, no lone surrogate."""
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        return text.translate(_ESCAPES)
    return text


def storable_id(message_id: str) -> str:
    """A message id as it can be stored: NUL and lone surrogates escaped as `storable` escapes a
    line's text (ids are not cut: a batch's ids are at most 200 characters)."""
    if _NUL in message_id or not message_id.isascii():
        return printable(message_id)
    return message_id


def row_tail(level_class: str, session_id: int, level: str, message: str, at: datetime, message_id: str) -> str:
    """A row without its leading created_at: the columns after it in `COLUMNS`, tab-separated,
    ending with the row's newline. `message` and `message_id` must already be storable."""
    return f"{level_class}\t{session_id}\t{level}\t{escape(message)}\t{utc_text(at)}\t{escape(message_id)}\n"


def utc_text(at: datetime) -> str:
    """An aware time as timestamptz input: the instant in UTC, ISO 8601."""
    return (at if at.tzinfo is UTC else at.astimezone(UTC)).isoformat()


def buffer(created_at: datetime, tails: Iterable[str]) -> memoryview:
    """A batch's COPY data: every tail after the batch's created_at; empty if there is no row.
    A memoryview, for asyncpg's `copy_to_table(source=...)`: it takes `bytes` for a file's path."""
    prefix = f"{utc_text(created_at)}\t"
    rows = prefix.join(tails)
    return memoryview(f"{prefix}{rows}".encode() if rows else b"")
