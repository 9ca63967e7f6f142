"""The trash pipeline's tables, declared once (migration 0004 builds them; the table conformance
test checks that the two agree): a record per archived session, and the mangled-clone markers."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Integer, Text
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col
from zimmer_sweeper.schema import ARGS


class TrashRecordRow(SQLModel, table=True):
    __tablename__ = "trash_records"
    __table_args__ = ARGS
    session_id: int = col(BigInteger, primary_key=True)
    host: str = col(Text)
    clone_path: str | None = col(Text, null=True)
    archived_at: datetime | None = col(TIMESTAMPTZ, null=True)
    session_version: int = col(BigInteger, default="0")
    state: str = col(Text)
    attempts: int = col(Integer, default="0")
    next_attempt_at: datetime = col(TIMESTAMPTZ)
    trash_after: datetime | None = col(TIMESTAMPTZ, null=True)
    finding: str | None = col(Text, null=True)
    artifacts_path: str | None = col(Text, null=True)
    bundle_preserved: bool = col(Boolean, default="false")
    patch_preserved: bool = col(Boolean, default="false")
    preserved_bytes: int = col(BigInteger, default="0")
    clone_removed: bool = col(Boolean, default="false")
    freed_bytes: int = col(BigInteger, default="0")
    outcome: str = col(Text, default="''")
    last_error: str = col(Text, default="''")
    recorded_at: datetime = col(TIMESTAMPTZ)
    updated_at: datetime = col(TIMESTAMPTZ)
    unarchived_at: datetime | None = col(TIMESTAMPTZ, null=True)
    restore_outcome: str | None = col(Text, null=True)
    restore_detail: str = col(Text, default="''")


class MangledCloneMarkerRow(SQLModel, table=True):
    __tablename__ = "mangled_clone_markers"
    __table_args__ = ARGS
    session_id: int = col(BigInteger, primary_key=True)
    archived_at: datetime = col(TIMESTAMPTZ, primary_key=True)
    host: str = col(Text)
    dropped_deletions: int = col(Integer)
    defused_at: datetime = col(TIMESTAMPTZ)


trash_records = TrashRecordRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
mangled_markers = MangledCloneMarkerRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
