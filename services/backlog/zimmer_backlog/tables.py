"""The backlog's tables, declared once (seed 000, "What an item is"). The migrations build them;
these models are what every query is written against (SQLAlchemy Core), and a test checks that
the two agree column by column (tests/test_tables_match_migrations.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, DateTime, Double, ForeignKey, Identity, Integer, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import Field, SQLModel

SCHEMA = "backlog"
NOW = text("now()")


def _time(*, nullable: bool = True, default: Any = None) -> Any:
    return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=nullable, server_default=default))


def _text(*, nullable: bool = True, default: str | None = None) -> Any:
    return Field(default=default, sa_column=Column(Text, nullable=nullable,
                                                   server_default=None if default is None else text(f"'{default}'")))


def _bigint(*, nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(BigInteger, nullable=nullable))


class WorkBacklogItem(SQLModel, table=True):
    """A row is never deleted: queued → starting → started, or queued → removed."""

    __tablename__ = "work_backlog_items"
    __table_args__ = {"schema": SCHEMA}

    id: int | None = Field(default=None, sa_column=Column(BigInteger, Identity(always=True), primary_key=True))
    key: str = _text(nullable=False)
    issue_url: str | None = _text()
    repo: str | None = _text()
    surface: str | None = _text()
    title: str = _text(nullable=False, default="")
    kind: str | None = _text()
    scope_direction: str | None = _text()
    estimated_cost: str = _text(nullable=False)
    gate_verdict: str | None = _text()
    decided_at: datetime | None = _time()
    added_at: datetime | None = _time(nullable=False, default=NOW)
    added_by: str | None = _text()
    added_via: str = _text(nullable=False)
    precedence: int = Field(sa_column=Column(Integer, nullable=False))
    pinned: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false")))
    status: str = _text(nullable=False, default="queued")
    writing_session_id: int | None = _bigint()
    started_session_id: int | None = _bigint()
    started_by_session_id: int | None = _bigint()
    started_at: datetime | None = _time()
    # The spawn saga's request, kept so a recovery asks spot-gate exactly the same thing.
    spawn_key: str | None = _text()
    start_class: str | None = _text()
    start_precedence: int | None = Field(default=None, sa_column=Column(Integer))
    start_deadline: float | None = Field(default=None, sa_column=Column(Double))  # epoch seconds
    removed_at: datetime | None = _time()
    removed_by: str | None = _text()
    removal_reason: str | None = _text()
    liveness_state: str | None = _text()
    liveness_checked_at: datetime | None = _time()
    held_at: datetime | None = _time()
    held_until: datetime | None = _time()
    held_by: str | None = _text()
    held_by_session_id: int | None = _bigint()
    hold_reason: str | None = _text()
    held_liveness_state: str | None = _text()
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(
        JSONB, nullable=False, server_default=text("'{}'::jsonb")))
    import_id: str | None = Field(default=None, sa_column=Column(Text, unique=True))


class ProducedSession(SQLModel, table=True):
    """What spot-gate's session events say about the sessions this backlog produced."""

    __tablename__ = "produced_sessions"
    __table_args__ = {"schema": SCHEMA}

    session_id: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    item_id: int = Field(sa_column=Column(BigInteger, ForeignKey(f"{SCHEMA}.work_backlog_items.id"), nullable=False))
    status: str = _text(nullable=False)
    spot_held: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false")))
    updated_at: datetime | None = _time(nullable=False, default=NOW)
    version: int = Field(default=-1, sa_column=Column(BigInteger, nullable=False, server_default=text("-1")))


class ImportRun(SQLModel, table=True):
    """One row per import run: what it read, what it wrote, and why it could not."""

    __tablename__ = "import_runs"
    __table_args__ = {"schema": SCHEMA}

    id: int | None = Field(default=None, sa_column=Column(BigInteger, Identity(always=True), primary_key=True))
    source: str | None = _text()
    started_at: datetime | None = _time(nullable=False, default=NOW)
    finished_at: datetime | None = _time()
    inserted: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    skipped: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default=text("0")))
    error: str | None = _text()


items = WorkBacklogItem.__table__
produced = ProducedSession.__table__
import_runs = ImportRun.__table__
