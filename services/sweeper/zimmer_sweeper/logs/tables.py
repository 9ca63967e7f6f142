"""The session logs' tables in the sweeper schema, declared once (migrations/ build them;
tests/test_tables_match_migrations.py checks that the two agree). Queries are built from these
with SQLAlchemy Core; raw SQL is kept for what Core does not express: COPY, and creating and
dropping partitions (`partitions.py`).

`logs` is a plain Core table rather than a model: a partitioned table has no primary key that
does not include its partition keys, and the sweeper never loads a line as an object."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, Integer, Table, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col, identity
from zimmer_sweeper.schema import ARGS, SCHEMA

logs = Table(
    "logs", SQLModel.metadata,
    Column("id", BigInteger, nullable=False, server_default=text("nextval('sweeper.logs_id_seq')")),
    Column("level_class", Text, nullable=False),
    Column("created_at", TIMESTAMPTZ, nullable=False),
    Column("session_id", BigInteger, nullable=False),
    Column("level", Text, nullable=False),
    Column("message", Text, nullable=False),
    Column("logged_at", TIMESTAMPTZ, nullable=False),
    Column("message_id", Text, nullable=False),
    schema=SCHEMA,
)
# The order COPY sends the columns in (id comes from the sequence).
COPY_COLUMNS = ("level_class", "created_at", "session_id", "level", "message", "logged_at", "message_id")


class IngestLedgerRow(SQLModel, table=True):
    __tablename__ = "ingest_ledger"
    __table_args__ = ARGS
    consumer: str = col(Text, primary_key=True)
    stream_seq: int = col(BigInteger, primary_key=True)


class LogPurgeRow(SQLModel, table=True):
    __tablename__ = "log_purges"
    __table_args__ = ARGS
    session_id: int = col(BigInteger, primary_key=True)
    reason: str = col(Text)
    requested_at: datetime = col(TIMESTAMPTZ)
    deleted_rows: int = col(BigInteger, default="0")
    finished_at: datetime | None = col(TIMESTAMPTZ, null=True)


class RetentionRunRow(SQLModel, table=True):
    __tablename__ = "retention_runs"
    __table_args__ = ARGS
    id: int | None = identity()
    started_at: datetime = col(TIMESTAMPTZ)
    finished_at: datetime = col(TIMESTAMPTZ)
    dropped: int = col(Integer)
    failed: int = col(Integer)
    purged_rows: int = col(BigInteger)
    budget_exhausted: bool = col(Boolean)
    detail: dict[str, Any] = col(JSONB, default="'{}'::jsonb")


ledger = IngestLedgerRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
purges = LogPurgeRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
runs = RetentionRunRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
