"""Runtime commands (ZIMMER_RUNTIME) and ingest from the runtime (ZIMMER_INGEST)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from zimmer_common.contracts.envelope import Payload
from zimmer_common.contracts.subjects import ingest_subject, runtime_command_subject

START_TURN = runtime_command_subject("start_turn")
SAMPLE_QUOTA = runtime_command_subject("sample_quota")

INGEST_SESSION_STATUS = ingest_subject("session_status")
INGEST_QUOTA_READING = ingest_subject("quota_reading")
INGEST_SPEND = ingest_subject("spend")

SessionStatusName = Literal["waiting", "running", "needs_input", "archived", "failed"]
TurnKindName = Literal["first_start", "follow_up", "wake", "heartbeat", "restart", "clone_only", "resume_monitoring"]
AccountStatusName = Literal["active", "quota_exceeded", "needs_reauth"]


class StartTurn(Payload):
    """Tells the runtime to run a turn the gate admitted, carrying the prompt verbatim."""

    session_id: int
    turn_kind: TurnKindName
    prompt: str | None = None
    attachments: list[dict[str, Any]] = Field(default_factory=list)
    runtime: str
    harness: str
    model: str


class SampleQuota(Payload):
    accounts: list[str]
    reason: str = "staleness"


class SessionStatusReport(Payload):
    session_id: int
    status: SessionStatusName
    at: datetime | None = None


class WindowReadingIn(Payload):
    utilization: float = Field(ge=0, le=10)
    resets_at: datetime | None = None


class QuotaReadingIn(Payload):
    account: str = Field(min_length=1, max_length=200)
    status: AccountStatusName
    five_hour: WindowReadingIn | None = None
    seven_day: WindowReadingIn | None = None
    read_at: datetime | None = None
    serving: bool | None = None


class SpendReport(Payload):
    request_id: str = Field(min_length=1, max_length=200)
    session_id: int | None = None
    harness: str = Field(min_length=1)
    model: str = Field(min_length=1)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    at: datetime | None = None
