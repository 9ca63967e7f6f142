"""The health records' tables (migration 0002), declared once as in zimmer_alerts.store.tables: job runs
merged from job_run events, each instance's newest heartbeat (and whether a graceful stop retired
it, migration 0009), the NATS servers seen. Indexes and
checks live in the migration; zimmer_alerts.store.health_records holds the queries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Double, Text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col

SCHEMA = "alerts"
ARGS = {"schema": SCHEMA}


class JobRunRow(SQLModel, table=True):
    __tablename__ = "job_runs"
    __table_args__ = ARGS
    service: str = col(Text, primary_key=True)
    job: str = col(Text, primary_key=True)
    run_id: str = col(Text, primary_key=True)
    lane: str = col(Text)
    instance_id: str = col(Text)
    scheduled: bool = col(Boolean, default="true")
    enqueued_at: datetime = col(TIMESTAMPTZ)
    started_at: datetime | None = col(TIMESTAMPTZ, null=True)
    finished_at: datetime | None = col(TIMESTAMPTZ, null=True)
    state: str = col(Text)
    error: str | None = col(Text, null=True)


class HeartbeatRow(SQLModel, table=True):
    __tablename__ = "heartbeats"
    __table_args__ = ARGS
    service: str = col(Text, primary_key=True)
    instance_id: str = col(Text, primary_key=True)
    version: str = col(Text)
    at: datetime = col(TIMESTAMPTZ)
    started_at: datetime = col(TIMESTAMPTZ)
    lanes: list[str] = col(ARRAY(Text), default="'{}'")
    interval_seconds: float = col(Double, default="15")
    retired_at: datetime | None = col(TIMESTAMPTZ, null=True)


class NatsServerRow(SQLModel, table=True):
    __tablename__ = "nats_servers"
    __table_args__ = ARGS
    server_id: str = col(Text, primary_key=True)
    first_seen: datetime = col(TIMESTAMPTZ)


job_runs = JobRunRow.__table__
heartbeats = HeartbeatRow.__table__
nats_servers = NatsServerRow.__table__
