"""Session logs (seed 003 "Log retention"; DESIGN §9): the line the runtime publishes on
`zimmer.ingest.logs`, the timeline the sweeper answers, and its retention readings.

The runtime publishes lines as `EventEnvelope`s whose `id` doubles as `Nats-Msg-Id` (a re-publish
inside the ingest stream's duplicate window is dropped by the server), in either shape:

- `log_line`: one line, `data` a `LogLineIn`, the envelope's `id` the line's message id;
- `log_lines`: a batch of up to 1,000 lines, `data` a `LogLinesIn`, each line carrying its own
  message id. This is the shape a runtime should use: it buffers a session's stdout and sends
  what it has every few hundred milliseconds, and the per-message cost of JetStream and its
  client is paid once per batch instead of once per line (docs/sweeper.md has the figures).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import AwareTime, RowId
from zimmer_common.contracts.subjects import ingest_subject

CTX = "sweeper"
INGEST_LOGS = ingest_subject("logs")
LOG_LINE = "log_line"  # the envelope type of one ingested line
LOG_LINES = "log_lines"  # the envelope type of a batch of lines
LINES_MAX = 1_000  # lines in one log_lines message

LogLevel = Literal["verbose", "info", "warning", "error"]
LEVELS: tuple[LogLevel, ...] = ("verbose", "info", "warning", "error")
# A line longer than this is stored cut, with a marker saying how much was cut: a runaway CLI
# printing a minified bundle on one line must not put megabytes into one row.
MESSAGE_MAX = 16_384
VERBOSE_RETENTION_DAYS = 7
RETENTION_DAYS = 90


class LogLineIn(Payload):
    """One timeline line as the runtime sends it. Lenient on purpose: a log line is data, so text
    PostgreSQL cannot store (NUL, lone surrogates) is escaped and an over-long line is cut by the
    sweeper rather than refused and lost."""

    session_id: RowId
    level: LogLevel
    message: str
    at: AwareTime = Field(description="When the runtime saw the line, ISO 8601 with its offset, 1970 to 9998 "
                                      "(the runtime's clock; the row's day is the sweeper's)")


class LogLineItem(LogLineIn):
    """One line of a `log_lines` batch: a line with its own message id."""

    message_id: str = Field(min_length=1, max_length=200)


class LogLinesIn(Payload):
    """A batch of lines (any sessions). A line that is not valid is refused alone; the rest of
    its batch is written."""

    lines: list[LogLineItem] = Field(min_length=1, max_length=LINES_MAX)


class LogQuery(Request):
    session_id: RowId
    levels: list[LogLevel] | None = Field(
        None, max_length=4, description="Only these levels; default every level but verbose")
    cursor: str | None = Field(None, max_length=200, description="next_cursor of the previous page")
    order: Literal["asc", "desc"] = "asc"
    limit: int = Field(default=100, ge=1, le=1000)


class LogLineView(Payload):
    id: int
    session_id: int
    level: LogLevel
    message: str
    at: datetime = Field(description="The runtime's timestamp of the line")
    created_at: datetime = Field(description="When the sweeper stored it (its retention clock)")


class LogPage(Payload):
    session_id: int
    levels: list[LogLevel]
    lines: list[LogLineView]
    next_cursor: str | None = Field(None, description="Pass as cursor for the next page; null at the end")


class RetentionHealthQuery(Request):
    pass


class LogRetentionHealth(Payload):
    """Readings that never scan the table: sizes from the catalog, ages from partition bounds."""

    status: Literal["ok", "warning"]
    status_note: str
    counts_in_overall: bool = Field(False, description="Always false: a draining backlog must not turn the report")
    estimated_rows: int
    estimated_verbose_rows: int
    total_bytes: int
    index_bytes: int
    partitions: int
    oldest_log_at: datetime | None
    oldest_log_age_seconds: float | None
    oldest_verbose_log_at: datetime | None
    oldest_verbose_log_age_seconds: float | None
    verbose_retention_days: int = VERBOSE_RETENTION_DAYS
    retention_days: int = RETENTION_DAYS
    last_run_at: datetime | None = Field(None, description="When the retention job last finished")
    last_run_dropped: int | None = None
    last_run_failed: int | None = None
    pending_session_purges: int = 0
    ingest_oldest_unwritten_age_seconds: float | None = Field(
        None, description="Age of the oldest line in the ingest stream not yet written; the stream keeps 3 days")


GET_SESSION_LOGS = RpcSpec(CTX, "get_session_logs", LogQuery, LogPage)
LOG_RETENTION_HEALTH = RpcSpec(CTX, "log_retention_health", RetentionHealthQuery, LogRetentionHealth)
