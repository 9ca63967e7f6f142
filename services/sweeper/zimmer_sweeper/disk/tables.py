"""The disk sweeps' tables, declared once (migration 0002 builds them; the table conformance test
checks that the two agree). Every row names its host: one sweeper runs beside each runtime host."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col, identity
from zimmer_sweeper.schema import ARGS


class DiskRunRow(SQLModel, table=True):
    __tablename__ = "disk_runs"
    __table_args__ = ARGS
    id: int | None = identity()
    host: str = col(Text)
    job: str = col(Text)
    started_at: datetime = col(TIMESTAMPTZ)
    finished_at: datetime | None = col(TIMESTAMPTZ, null=True)
    outcome: str = col(Text)
    counts: dict[str, Any] = col(JSONB, default="'{}'::jsonb")
    bytes_freed: int = col(BigInteger, default="0")
    refusals: int = col(Integer, default="0")
    note: str = col(Text, default="''")


class DiskRefusalRow(SQLModel, table=True):
    __tablename__ = "disk_refusals"
    __table_args__ = ARGS
    id: int | None = identity()
    host: str = col(Text)
    at: datetime = col(TIMESTAMPTZ)
    job: str = col(Text)
    path: str = col(Text)
    session_ids: list[int] = col(ARRAY(BigInteger), default="'{}'")
    reason: str = col(Text)


class DiskRootRow(SQLModel, table=True):
    __tablename__ = "disk_roots"
    __table_args__ = ARGS
    host: str = col(Text, primary_key=True)
    name: str = col(Text, primary_key=True)
    path: str | None = col(Text, null=True)
    exists_now: bool = col(Boolean)
    free_bytes: int | None = col(BigInteger, null=True)
    total_bytes: int | None = col(BigInteger, null=True)
    sweepable: bool = col(Boolean)
    fence: str = col(Text)
    read_at: datetime = col(TIMESTAMPTZ)
