"""Log retention's rules (seed 003 "Log retention", "Two windows"; DESIGN §9): which level class a
line belongs to, how a day partition is named and bounded, which partitions to create ahead and
which to drop, and how the panel reads the oldest row. Plain functions of their arguments.

Two windows, both absolute ages: verbose lines (raw CLI stdout, the bulk of the table) are kept
7 days; every other level 90 days. A day partition [D, D+1) is dropped only once D+1 is at or
before now − window: every row in it is then older than its window, so no row inside its window
is ever deleted, and none outlives its window by more than the partition's one day (plus the
wait for the next 10-minute tick).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from zimmer_common.contracts.logs import MESSAGE_MAX, RETENTION_DAYS, VERBOSE_RETENTION_DAYS, LogLevel

LevelClass = Literal["verbose", "other"]
CLASSES: tuple[LevelClass, ...] = ("verbose", "other")
WINDOWS: dict[LevelClass, timedelta] = {"verbose": timedelta(days=VERBOSE_RETENTION_DAYS),
                                        "other": timedelta(days=RETENTION_DAYS)}
# The panel warns once the oldest row is this far past its window: a deployment draining its
# first backlog genuinely is, which is why the warning stays out of the overall status.
WARN_PAST_WINDOW = timedelta(days=7)
CREATE_AHEAD_DAYS = 7  # a week of missed log_partitions runs before ingest needs a partition itself
DAY = timedelta(days=1)

_NAME = re.compile(r"^logs_(verbose|other)_p(\d{8})$")


def level_class(level: LogLevel) -> LevelClass:
    return "verbose" if level == "verbose" else "other"


@dataclass(frozen=True, order=True)
class DayPartition:
    """One day of one level class: rows with lower <= created_at < upper (UTC days)."""

    day: date
    klass: LevelClass

    @property
    def name(self) -> str:
        return f"logs_{self.klass}_p{self.day:%Y%m%d}"

    @property
    def parent(self) -> str:
        return f"logs_{self.klass}"

    @property
    def lower(self) -> datetime:
        return datetime.combine(self.day, time(), tzinfo=UTC)

    @property
    def upper(self) -> datetime:
        return self.lower + DAY

    @classmethod
    def parse(cls, name: str) -> DayPartition | None:
        """The partition a table name denotes, or None for any other table."""
        found = _NAME.match(name)
        if not found:
            return None
        try:
            day = datetime.strptime(found.group(2), "%Y%m%d").date()
        except ValueError:
            return None
        return cls(day, found.group(1))  # type: ignore[arg-type]  # the pattern admits only the two literals

    @classmethod
    def holding(cls, klass: LevelClass, at: datetime) -> DayPartition:
        return cls(at.astimezone(UTC).date(), klass)


def to_create(now: datetime, existing: set[DayPartition], ahead_days: int = CREATE_AHEAD_DAYS) -> list[DayPartition]:
    """Today's partitions and `ahead_days` more of each class, those that do not exist yet."""
    today = now.astimezone(UTC).date()
    wanted = [DayPartition(today + timedelta(days=i), klass) for i in range(ahead_days + 1) for klass in CLASSES]
    return [p for p in wanted if p not in existing]


def expired(partition: DayPartition, now: datetime) -> bool:
    """Every row the partition can hold is older than its class's window."""
    return partition.upper <= now - WINDOWS[partition.klass]


def to_drop(now: datetime, existing: set[DayPartition]) -> list[DayPartition]:
    """Expired partitions, oldest first (so a tick cut short by its budget drops the oldest)."""
    return sorted((p for p in existing if expired(p, now)), key=lambda p: (p.day, p.klass))


@dataclass(frozen=True)
class OldestReading:
    at: datetime | None
    age: timedelta | None


def oldest(nonempty: list[DayPartition], now: datetime, klass: LevelClass | None = None) -> OldestReading:
    """The oldest stored row, to the day: the lower bound of the oldest partition that holds a row
    (of `klass`, or of either). A bound, not a scan: it can read up to a day older than the true
    oldest row, never younger, so a stalled retention is never hidden."""
    candidates = [p for p in nonempty if klass is None or p.klass == klass]
    if not candidates:
        return OldestReading(None, None)
    first = min(candidates).lower
    return OldestReading(first, max(timedelta(0), now - first))


def status(oldest_any: OldestReading, oldest_verbose: OldestReading, oldest_other: OldestReading) -> tuple[str, str]:
    """(ok | warning, why). Warning once a class's oldest row is more than WARN_PAST_WINDOW past its
    window. Never part of the overall status (seed: a backlog draining on schedule must not turn
    the whole report yellow)."""
    late = []
    for klass, reading in (("verbose", oldest_verbose), ("other", oldest_other)):
        if reading.age is not None and reading.age > WINDOWS[klass] + WARN_PAST_WINDOW:
            past = reading.age - WINDOWS[klass]
            late.append(f"the oldest {klass} row is {past.days} days past its {WINDOWS[klass].days}-day window")
    if late:
        return "warning", "; ".join(late) + " (retention is behind or stopped; not counted in overall status)"
    if oldest_any.at is None:
        return "ok", "no rows stored"
    return "ok", "every row is inside its window or within a week of it"


_NUL = "\x00"


def storable(message: str) -> str:
    """A line as it can be stored: NUL (which PostgreSQL text cannot hold) and lone surrogates
    escaped, and a line longer than MESSAGE_MAX characters cut with a marker saying how much."""
    if _NUL in message:
        message = message.replace(_NUL, "\\u0000")
    if not message.isascii():
        try:
            message.encode("utf-8")
        except UnicodeEncodeError:
            message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(message) > MESSAGE_MAX:
        cut = len(message) - MESSAGE_MAX
        message = f"{message[:MESSAGE_MAX]}… [{cut} more characters cut]"
    return message
