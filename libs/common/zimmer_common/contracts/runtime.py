"""Runtime commands (ZIMMER_RUNTIME) and ingest from the runtime (ZIMMER_INGEST)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from zimmer_common.contracts.envelope import Payload, Request
from zimmer_common.contracts.fields import Name, RowId, Time
from zimmer_common.contracts.subjects import ingest_subject, runtime_command_subject

START_TURN = runtime_command_subject("start_turn")
STOP_TURN = runtime_command_subject("stop_turn")
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


class StopTurn(Payload):
    """Tells the runtime to stop a session's turn: `graceful` lets the tool call in flight finish,
    `halt` terminates the CLI process now. The runtime acknowledges with the session's status
    report once the process is gone (needs_input or waiting); a paused session reported
    needs_input is carried to waiting (seed 004: the pause callback)."""

    session_id: int
    mode: Literal["graceful", "halt"] = "halt"
    reason: str = ""


class SampleQuota(Payload):
    accounts: list[str]
    reason: str = "staleness"


class SessionStatusReport(Request):
    session_id: RowId
    status: SessionStatusName
    at: Time | None = None


class WindowReadingIn(Request):
    utilization: float = Field(ge=0, le=10)
    resets_at: Time | None = None


class QuotaReadingIn(Request):
    account: Name
    status: AccountStatusName
    five_hour: WindowReadingIn | None = None
    seven_day: WindowReadingIn | None = None
    read_at: Time | None = None
    serving: bool | None = None


TOKENS_MAX = 10**12  # per request: far beyond any model's context, inside bigint arithmetic


class SpendReport(Request):
    request_id: Name
    session_id: RowId | None = None
    harness: Name
    model: Name
    input_tokens: int = Field(default=0, ge=0, le=TOKENS_MAX)
    output_tokens: int = Field(default=0, ge=0, le=TOKENS_MAX)
    cache_write_tokens: int = Field(default=0, ge=0, le=TOKENS_MAX)
    cache_read_tokens: int = Field(default=0, ge=0, le=TOKENS_MAX)
    at: Time | None = None
