"""The transcript archive's tables, declared once (migration 0005 builds them; the table
conformance test checks that the two agree)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, Text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col
from zimmer_sweeper.schema import ARGS


class TranscriptArchiveRow(SQLModel, table=True):
    __tablename__ = "transcript_archives"
    __table_args__ = ARGS
    session_id: int = col(BigInteger, primary_key=True)
    host: str = col(Text)
    session_updated_at: datetime = col(TIMESTAMPTZ)
    newest_mtime: datetime = col(TIMESTAMPTZ)
    archived_at: datetime = col(TIMESTAMPTZ)
    object_name: str = col(Text)
    bytes: int = col(BigInteger)
    files: int = col(Integer)
    directories: list[str] = col(ARRAY(Text), default="'{}'")
    digest: str = col(Text)


class TranscriptLatestRow(SQLModel, table=True):
    __tablename__ = "transcript_archive_latest"
    __table_args__ = ARGS
    object_name: str = col(Text, primary_key=True)
    fingerprint: str = col(Text)
    built_at: datetime = col(TIMESTAMPTZ)
    built_by: str = col(Text)
    entries: int = col(Integer)
    bytes: int = col(BigInteger)
