"""A session's history as spot-gate keeps it, part of spot-gate's published language
(`contracts.spot` re-exports it): the gate's decision log and the messages enqueued behind a turn."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from zimmer_common.contracts.envelope import Payload, Request
from zimmer_common.contracts.fields import RowId, Time

DecisionEvent = Literal["turn", "ceiling_pause", "ceiling_kept", "ceiling_resume", "start_now", "promote",
                        "restart", "wake_stand_down", "auth_park", "auth_unpark"]


class GateDecisionQuery(Request):
    """A session's decision log, newest first; `since`/`until` bound it by time, and `at` asks for
    the one decision in force at that instant (the newest at or before it)."""

    session_id: RowId
    limit: int = Field(default=50, ge=1, le=500)
    since: Time | None = None
    until: Time | None = None
    at: Time | None = None

    @model_validator(mode="after")
    def _at_alone(self) -> GateDecisionQuery:
        if self.at is not None and (self.since is not None or self.until is not None):
            raise ValueError("give at alone, or since and/or until")
        if self.since is not None and self.until is not None and self.since > self.until:
            raise ValueError("since is after until")
        return self


class GateDecisionRow(Payload):
    id: int
    session_id: int
    # What the row records: a turn's admission (`turn`, with its kind), or an outcome that kept or
    # took the session off a slot without one (a ceiling pause, a start-now refusal, a park, …).
    event: DecisionEvent = "turn"
    turn_kind: str | None
    allowed: bool
    reason: str
    ceiling: str | None
    sentence: str
    numbers: dict[str, Any]
    decided_at: datetime


class GateDecisionList(Payload):
    decisions: list[GateDecisionRow]


class EnqueuedQuery(Request):
    """A session's enqueued messages, newest first: at most `limit`, fewer when their prompts fill
    one answer; `before_id` (an answer's `next_before_id`) starts the page after the one before."""

    session_id: RowId
    limit: int = Field(default=50, ge=1, le=500)
    before_id: RowId | None = Field(default=None, description="Only messages older than this one: give the "
                                                              "`next_before_id` of the page before")


class EnqueuedMessage(Payload):
    id: int
    turn_kind: str
    prompt: str | None
    created_at: datetime
    delivered_at: datetime | None  # None: still waiting for the session's next turn boundary


class EnqueuedList(Payload):
    messages: list[EnqueuedMessage]  # newest first, delivered ones included
    # A cursor, not an offset: messages arrive at the head of this list while it is read, and an
    # offset would show the same message on two pages.
    next_before_id: int | None = Field(default=None, description=(
        "Where the next page starts: ask again with this as `before_id`. Null when this page reaches the end. A "
        "page ends before `limit` messages when their prompts reach the byte bound of one answer, so the list "
        "never fails for its size: follow `next_before_id`"))
