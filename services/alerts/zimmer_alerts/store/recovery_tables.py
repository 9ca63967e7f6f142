"""Queue recovery mode's one row (migration 0003); see zimmer_alerts.handlers.recovery."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ARRAY, SmallInteger, Text
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col

SCHEMA = "alerts"


class QueueRecoveryModeRow(SQLModel, table=True):
    __tablename__ = "queue_recovery_mode"
    __table_args__ = {"schema": SCHEMA}
    id: int = col(SmallInteger, primary_key=True)
    entered_by: str = col(Text)
    reason: str = col(Text)
    entered_at: datetime = col(TIMESTAMPTZ)
    expires_at: datetime = col(TIMESTAMPTZ)
    lanes: list[str] = col(ARRAY(Text), default="'{}'")
    paused_consumers: list[str] = col(ARRAY(Text), default="'{}'")
    exited_at: datetime | None = col(TIMESTAMPTZ, null=True)
    exited_by: str | None = col(Text, null=True)


queue_recovery_mode = QueueRecoveryModeRow.__table__
