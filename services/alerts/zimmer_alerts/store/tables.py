"""The alerts ledger's tables, declared once (the migrations build them; a test checks that the
two agree column by column)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col, identity

SCHEMA = "alerts"
ARGS = {"schema": SCHEMA}


class IssueRow(SQLModel, table=True):
    __tablename__ = "issues"
    __table_args__ = ARGS
    id: int | None = identity()
    fingerprint: str = col(Text, unique=True)
    title: str = col(Text)
    level: str = col(Text)
    source: str = col(Text)
    events: int = col(Integer, default="0")
    first_seen: datetime = col(TIMESTAMPTZ)
    last_seen: datetime = col(TIMESTAMPTZ)
    notified_at: datetime | None = col(TIMESTAMPTZ, null=True)
    claimed_until: datetime | None = col(TIMESTAMPTZ, null=True)  # a notifier's lease while it sends (0005)
    tracker_events: int = col(Integer, default="0")  # events the issue tracker took (0006)
    log_level: str | None = col(Text, null=True)  # the level its log record is written at (0007)


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    __table_args__ = ARGS
    id: int | None = identity()
    event_id: str = col(Text, unique=True)
    issue_id: int = col(BigInteger, ForeignKey(f"{SCHEMA}.issues.id"))
    title: str = col(Text)
    level: str = col(Text)
    source: str = col(Text)
    message: str = col(Text)
    context: dict[str, Any] = col(JSONB, default="'{}'::jsonb")
    snippet: str | None = col(Text, null=True)
    condition_key: str | None = col(Text, null=True)
    still_true: bool = col(Boolean, default="true")
    occurred_at: datetime = col(TIMESTAMPTZ)
    received_at: datetime = col(TIMESTAMPTZ, default="now()")
    tracked_at: datetime | None = col(TIMESTAMPTZ, null=True)  # forwarded to the issue tracker (0006)
    tracker_claimed_until: datetime | None = col(TIMESTAMPTZ, null=True)  # a notifier's lease on it (0006)


class ConditionRow(SQLModel, table=True):
    __tablename__ = "conditions"
    __table_args__ = ARGS
    condition_key: str = col(Text, primary_key=True)
    title: str = col(Text)
    level: str = col(Text)
    source: str = col(Text)
    still_true: bool = col(Boolean)
    first_seen: datetime = col(TIMESTAMPTZ)
    last_seen: datetime = col(TIMESTAMPTZ)
    resolved_at: datetime | None = col(TIMESTAMPTZ, null=True)


class PageGroupRow(SQLModel, table=True):
    __tablename__ = "page_groups"
    __table_args__ = ARGS
    title: str = col(Text, primary_key=True)
    level: str = col(Text)
    first_seen: datetime = col(TIMESTAMPTZ)
    last_joined: datetime = col(TIMESTAMPTZ)
    last_notified: datetime | None = col(TIMESTAMPTZ, null=True)
    notifications: int = col(Integer, default="0")
    resolution_sent_at: datetime | None = col(TIMESTAMPTZ, null=True)
    last_event_at: datetime | None = col(TIMESTAMPTZ, null=True)  # an ERROR page with no condition (0004)
    claimed_until: datetime | None = col(TIMESTAMPTZ, null=True)  # a notifier's lease while it sends (0005)


class NotificationRow(SQLModel, table=True):
    __tablename__ = "notifications"
    __table_args__ = ARGS
    id: int | None = identity()
    issue_id: int | None = col(BigInteger, ForeignKey(f"{SCHEMA}.issues.id"), null=True)
    group_title: str | None = col(Text, null=True)
    sink: str = col(Text)
    outcome: str = col(Text)
    detail: str = col(Text, default="''")
    attempts: int = col(Integer, default="1")
    at: datetime = col(TIMESTAMPTZ)


issues = IssueRow.__table__
events = EventRow.__table__
conditions = ConditionRow.__table__
page_groups = PageGroupRow.__table__
notifications = NotificationRow.__table__

# Tables declared in their own modules, imported here so that loading the alerts tables loads them all.
from zimmer_alerts.store import recovery_tables as _recovery_tables  # noqa: E402,F401 - the comment above says why
