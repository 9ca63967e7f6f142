"""The spot_gate schema as SQLModel table models, which the store builds its SQLAlchemy Core
queries from. A declaration of what migrations/0001..0008 build (every column with its type,
nullability, key and server default); the migrations remain the DDL: nothing creates a table
from these, and CHECK constraints and indexes are declared only there."""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Double, ForeignKey, Integer, Table, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col, identity

SCHEMA = {"schema": "spot_gate"}
JSON = JSONB(none_as_null=True)  # Python None binds as SQL NULL, not the JSON 'null'


class TriggerRow(SQLModel, table=True):
    __tablename__ = "triggers"
    __table_args__ = SCHEMA
    id: int | None = identity()
    kind: str = col(Text)
    name: str = col(Text)
    scheduling_class: str | None = col(Text, null=True)
    precedence: int | None = col(Integer, null=True)
    prompt: str | None = col(Text, null=True)
    enabled: bool = col(Boolean, default="true")
    created_at: datetime = col(TIMESTAMPTZ, default="now()")
    updated_at: datetime = col(TIMESTAMPTZ, default="now()")


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = SCHEMA
    id: int | None = identity()
    idempotency_key: str | None = col(Text, null=True)
    parent_session_id: int | None = col(BigInteger, ForeignKey("spot_gate.sessions.id"), null=True)
    forked_from_session_id: int | None = col(BigInteger, ForeignKey("spot_gate.sessions.id"), null=True)
    genesis: str = col(Text)
    scheduling_class: str | None = col(Text, null=True)
    precedence: int = col(Integer, default="0")
    status: str = col(Text, default="'waiting'")
    runtime: str = col(Text, default="'claude_code'")
    harness: str = col(Text, default="'claude_code'")
    model: str = col(Text, default="'claude-opus-4'")
    title: str = col(Text, default="''")
    goal: str | None = col(Text, null=True)
    prompt: str | None = col(Text, null=True)
    trigger_id: int | None = col(BigInteger, ForeignKey("spot_gate.triggers.id"), null=True)
    clone_path: str | None = col(Text, null=True)
    # `metadata` is SQLModel's own attribute: the column keeps its name, the field does not.
    metadata_: dict[str, Any] = col(JSON, name="metadata", default="'{}'::jsonb")
    is_status_summary_fork: bool = col(Boolean, default="false")
    ever_started: bool = col(Boolean, default="false")
    spot_hold_reason: str | None = col(Text, null=True)
    spot_hold_retry_at: datetime | None = col(TIMESTAMPTZ, null=True)
    spot_hold_count: int = col(Integer, default="0")
    held_turn_kind: str | None = col(Text, null=True)
    held_prompt: str | None = col(Text, null=True)
    held_attachments: list[Any] | None = col(JSON, null=True)
    created_at: datetime = col(TIMESTAMPTZ, default="now()")
    updated_at: datetime = col(TIMESTAMPTZ, default="now()")
    version: int = col(BigInteger, default="0")
    idempotency_scope: str = col(Text, default="''")
    paused_by: str | None = col(Text, null=True)
    spot_pause_at: datetime | None = col(TIMESTAMPTZ, null=True)
    spot_pause_reason: str | None = col(Text, null=True)
    spot_pause_detail: str | None = col(Text, null=True)
    spot_pause_count: int = col(Integer, default="0")
    parked_account: str | None = col(Text, null=True)
    spot_pause_acked_at: datetime | None = col(TIMESTAMPTZ, null=True)
    resume_prompt: str | None = col(Text, null=True)
    archived_at: datetime | None = col(TIMESTAMPTZ, null=True)
    archived_from_status: str | None = col(Text, null=True)
    archived_waits: dict[str, Any] | None = col(JSON, null=True)  # what the archive dropped, for the undo (0009)
    stranded_rescues: int = col(Integer, default="0")
    # The clone as the runtime reported it (clone_path above), and the unarchive stamp (0007).
    agent_subdirectory: str | None = col(Text, null=True)
    clone_scaffolded: bool = col(Boolean, default="false")
    clone_host: str | None = col(Text, null=True)
    clone_reported_at: datetime | None = col(TIMESTAMPTZ, null=True)
    unarchive_started_at: datetime | None = col(TIMESTAMPTZ, null=True)
    spawn_answer: dict[str, Any] | None = col(JSON, null=True)  # a keyed spawn's first answer (0008)


class SessionWakeRow(SQLModel, table=True):
    __tablename__ = "session_wakes"
    __table_args__ = SCHEMA
    id: int | None = identity()
    session_id: int = col(BigInteger, ForeignKey("spot_gate.sessions.id", ondelete="CASCADE"))
    wake_at: datetime = col(TIMESTAMPTZ)
    prompt: str | None = col(Text, null=True)
    set_by: str = col(Text)
    created_at: datetime = col(TIMESTAMPTZ, default="now()")
    fired_at: datetime | None = col(TIMESTAMPTZ, null=True)
    cancelled_at: datetime | None = col(TIMESTAMPTZ, null=True)


class EnqueuedMessageRow(SQLModel, table=True):
    __tablename__ = "enqueued_messages"
    __table_args__ = SCHEMA
    id: int | None = identity()
    session_id: int = col(BigInteger, ForeignKey("spot_gate.sessions.id", ondelete="CASCADE"))
    turn_kind: str = col(Text)
    prompt: str | None = col(Text, null=True)
    attachments: list[Any] = col(JSON, default="'[]'::jsonb")
    created_at: datetime = col(TIMESTAMPTZ, default="now()")
    delivered_at: datetime | None = col(TIMESTAMPTZ, null=True)


class GateDecisionLogRow(SQLModel, table=True):
    __tablename__ = "gate_decisions"
    __table_args__ = SCHEMA
    id: int | None = identity()
    session_id: int = col(BigInteger, ForeignKey("spot_gate.sessions.id", ondelete="CASCADE"))
    turn_kind: str | None = col(Text, null=True)  # None: not about a turn (0008)
    allowed: bool = col(Boolean)
    reason: str = col(Text)
    ceiling: str | None = col(Text, null=True)
    sentence: str = col(Text)
    numbers: dict[str, Any] = col(JSON)
    decided_at: datetime = col(TIMESTAMPTZ, default="now()")
    event: str = col(Text, default="'turn'")  # 0008: turn, ceiling_pause, ceiling_resume, start_now, …
    inputs: dict[str, Any] | None = col(JSON, null=True)  # 0011: the gate's call (domain/gate_record.py)


class SessionWarningRow(SQLModel, table=True):
    __tablename__ = "session_warnings"
    __table_args__ = SCHEMA
    id: int | None = identity()
    session_id: int = col(BigInteger, ForeignKey("spot_gate.sessions.id", ondelete="CASCADE"))
    kind: str = col(Text)
    message: str = col(Text)
    source: str = col(Text)
    created_at: datetime = col(TIMESTAMPTZ, default="now()")


class SpotPolicyRow(SQLModel, table=True):
    __tablename__ = "spot_policy"
    __table_args__ = SCHEMA
    id: bool = col(Boolean, primary_key=True, default="true")
    gating_enabled: bool = col(Boolean, default="true")
    reserve_five_hour: float = col(Double, default="0.2")
    reserve_seven_day: float = col(Double, default="0.1")
    max_sessions: int = col(Integer, default="10")
    genesis_overrides: dict[str, str] = col(JSON, default="'{}'::jsonb")
    updated_at: datetime = col(TIMESTAMPTZ, default="now()")


class AccountRow(SQLModel, table=True):
    __tablename__ = "accounts"
    __table_args__ = SCHEMA
    account: str = col(Text, primary_key=True)
    status: str = col(Text)
    serving: bool = col(Boolean, default="false")
    updated_at: datetime = col(TIMESTAMPTZ, default="now()")


class QuotaReadingRow(SQLModel, table=True):
    __tablename__ = "quota_readings"
    __table_args__ = SCHEMA
    id: int | None = identity()
    account: str = col(Text, ForeignKey("spot_gate.accounts.account"))
    status: str = col(Text)
    five_hour_utilization: float | None = col(Double, null=True)
    five_hour_resets_at: datetime | None = col(TIMESTAMPTZ, null=True)
    seven_day_utilization: float | None = col(Double, null=True)
    seven_day_resets_at: datetime | None = col(TIMESTAMPTZ, null=True)
    read_at: datetime = col(TIMESTAMPTZ)
    received_at: datetime = col(TIMESTAMPTZ, default="now()")


class SpendLedgerRow(SQLModel, table=True):
    __tablename__ = "spend_ledger"
    __table_args__ = SCHEMA
    request_id: str = col(Text, primary_key=True)
    session_id: int | None = col(BigInteger, null=True)  # not a foreign key
    harness: str = col(Text)
    model: str = col(Text)
    input_tokens: int = col(BigInteger, default="0")
    output_tokens: int = col(BigInteger, default="0")
    cache_write_tokens: int = col(BigInteger, default="0")
    cache_read_tokens: int = col(BigInteger, default="0")
    dollars: float = col(Double)
    at: datetime = col(TIMESTAMPTZ)


class BurnRateRow(SQLModel, table=True):
    __tablename__ = "burn_rates"
    __table_args__ = SCHEMA
    harness: str = col(Text, primary_key=True)
    model: str = col(Text, primary_key=True)
    dollars_per_minute: float = col(Double)
    sessions_counted: int = col(Integer)
    computed_at: datetime = col(TIMESTAMPTZ, default="now()")
    opus_dollars_per_minute: float = col(Double, default="0")  # 0008: the gate's currency


class WindowCalibrationRow(SQLModel, table=True):
    __tablename__ = "window_calibration"
    __table_args__ = SCHEMA
    window_name: str = col(Text, primary_key=True)
    capacity_dollars: float = col(Double)
    observations: int = col(Integer, default="1")
    calibrated_at: datetime = col(TIMESTAMPTZ, default="now()")


class GateSweepRow(SQLModel, table=True):
    """Every ceiling sweep's own decision and its call (0011), for the policy dry-run."""

    __tablename__ = "gate_sweeps"
    __table_args__ = SCHEMA
    id: int | None = identity()
    swept_at: datetime = col(TIMESTAMPTZ)
    allowed: bool = col(Boolean)
    reason: str = col(Text)
    ceiling: str | None = col(Text, null=True)
    paused: int = col(Integer, default="0")
    inputs: dict[str, Any] = col(JSON)


class SessionRunRow(SQLModel, table=True):
    """A session starting (running) or stopping running, on the gate's clock (0011)."""

    __tablename__ = "session_runs"
    __table_args__ = SCHEMA
    id: int | None = identity()
    session_id: int = col(BigInteger)  # not a foreign key: a deleted session's runs stay on the record
    at: datetime = col(TIMESTAMPTZ)
    running: bool = col(Boolean)
    takes_slot: bool = col(Boolean)
    exempt: str | None = col(Text, null=True)  # None: spot work the gate decides on


def _table(model: type[SQLModel]) -> Table:
    return model.__table__  # type: ignore[attr-defined,no-any-return]  # SQLModel sets __table__ at class creation


# The Table objects the queries are built from (Core, not the ORM: no mapping on the hot path).
triggers = _table(TriggerRow)
sessions = _table(SessionRow)
enqueued_messages = _table(EnqueuedMessageRow)
session_wakes = _table(SessionWakeRow)
gate_decisions = _table(GateDecisionLogRow)
session_warnings = _table(SessionWarningRow)
spot_policy = _table(SpotPolicyRow)
accounts = _table(AccountRow)
quota_readings = _table(QuotaReadingRow)
spend_ledger = _table(SpendLedgerRow)
burn_rates = _table(BurnRateRow)
window_calibration = _table(WindowCalibrationRow)
gate_sweeps = _table(GateSweepRow)
session_runs = _table(SessionRunRow)
