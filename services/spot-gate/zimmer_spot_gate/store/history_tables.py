"""The Quotas charts' history (migration 0010), declared once as in `store.tables`: one point per
window per minute, folded to quarter hours after 7 days (zimmer_common.history). Indexes and
checks live in the migration; `store.history` holds the queries."""

from datetime import datetime

from sqlalchemy import Double, Integer, SmallInteger, Text
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col
from zimmer_common.history_store import HistoryTable


class PoolHistoryRow(SQLModel, table=True):
    __tablename__ = "pool_history"
    __table_args__ = {"schema": "spot_gate"}
    resolution_minutes: int = col(SmallInteger, primary_key=True)
    window_name: str = col(Text, primary_key=True)
    at: datetime = col(TIMESTAMPTZ, primary_key=True)
    samples: int = col(Integer)
    utilization: float | None = col(Double, null=True)
    pacing: float | None = col(Double, null=True)
    reserve: float = col(Double)
    capacity_dollars: float | None = col(Double, null=True)
    running: int = col(Integer)
    held: int = col(Integer)
    paused: int = col(Integer)
    holds: int = col(Integer)
    pauses: int = col(Integer)
    resumes: int = col(Integer)


pool_history = PoolHistoryRow.__table__
POOL_HISTORY = HistoryTable(pool_history, keys=("window_name",), values={
    "utilization": "mean", "pacing": "mean", "reserve": "mean", "capacity_dollars": "mean",
    "running": "max", "held": "max", "paused": "max", "holds": "sum", "pauses": "sum", "resumes": "sum"})
