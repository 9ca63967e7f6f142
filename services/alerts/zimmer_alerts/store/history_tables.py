"""The Health charts' history (migration 0010), declared once as in `store.tables`: one point per
queue lane per minute, folded to quarter hours after 7 days (zimmer_common.history). Indexes and
checks live in the migration; `handlers.lane_history` records and reads it."""

from datetime import datetime

from sqlalchemy import Double, Integer, SmallInteger, Text
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col
from zimmer_common.history_store import HistoryTable


class LaneHistoryRow(SQLModel, table=True):
    __tablename__ = "lane_history"
    __table_args__ = {"schema": "alerts"}
    resolution_minutes: int = col(SmallInteger, primary_key=True)
    lane: str = col(Text, primary_key=True)
    at: datetime = col(TIMESTAMPTZ, primary_key=True)
    samples: int = col(Integer)
    ready: int = col(Integer)
    claimed: int = col(Integer)
    oldest_ready_age_seconds: float | None = col(Double, null=True)
    depth_threshold: int = col(Integer)
    stall_age_seconds: float = col(Double)


lane_history = LaneHistoryRow.__table__
LANE_HISTORY = HistoryTable(lane_history, keys=("lane",), values={
    "ready": "max", "claimed": "max", "oldest_ready_age_seconds": "max", "depth_threshold": "max",
    "stall_age_seconds": "max"})
