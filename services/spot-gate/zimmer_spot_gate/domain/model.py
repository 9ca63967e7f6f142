"""The vocabulary of seed 004 as values: windows, accounts, readings, classes, reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum


class Window(StrEnum):
    FIVE_HOUR = "five_hour"
    SEVEN_DAY = "seven_day"


WINDOW_LENGTH: dict[Window, timedelta] = {Window.FIVE_HOUR: timedelta(hours=5), Window.SEVEN_DAY: timedelta(days=7)}


class AccountStatus(StrEnum):
    ACTIVE = "active"
    QUOTA_EXCEEDED = "quota_exceeded"
    NEEDS_REAUTH = "needs_reauth"


@dataclass(frozen=True)
class WindowReading:
    utilization: float  # 0..1 (values above 1 are clamped by readers)
    resets_at: datetime | None = None

    @property
    def spent(self) -> bool:
        return self.utilization >= 1.0


@dataclass(frozen=True)
class AccountReading:
    """An account's newest reading; `windows` holds only the windows it could read."""

    account: str
    status: AccountStatus
    read_at: datetime
    windows: dict[Window, WindowReading] = field(default_factory=dict)


class SchedulingClass(StrEnum):
    PRIORITY = "priority"
    SPOT = "spot"


class Genesis(StrEnum):
    WEB_UI = "web_ui"
    SLACK = "slack"
    GITHUB_ISSUE = "github_issue"
    GITHUB_LABEL = "github_label"
    SCHEDULE = "schedule"
    AO_EVENT = "ao_event"
    API = "api"
    UNKNOWN = "unknown"


class SessionStatus(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    NEEDS_INPUT = "needs_input"
    ARCHIVED = "archived"
    FAILED = "failed"


class Runtime(StrEnum):
    CLAUDE_CODE = "claude_code"
    CODEX = "codex"


class Reason(StrEnum):
    """Why the gate decided what it did (seed 004, "Fail-open")."""

    GATING_DISABLED = "gating_disabled"
    NO_SNAPSHOT = "no_snapshot"
    UNAVAILABLE = "unavailable"
    WITHIN_LIMITS = "within_limits"
    AT_UTILIZATION_LIMIT = "at_utilization_limit"
    FLEET_AT_CAP = "fleet_at_cap"


HOLD_REASONS = frozenset({Reason.AT_UTILIZATION_LIMIT, Reason.FLEET_AT_CAP})


class Ceiling(StrEnum):
    """Which limit is holding (DESIGN §9)."""

    FLEET_CAP = "fleet_cap"
    SPOT_BUDGET = "spot_budget"
    PACING_CURVE = "pacing_curve"


class TurnKind(StrEnum):
    FIRST_START = "first_start"
    FOLLOW_UP = "follow_up"
    WAKE = "wake"
    HEARTBEAT = "heartbeat"
    RESTART = "restart"
    CLONE_ONLY = "clone_only"
    RESUME_MONITORING = "resume_monitoring"


# Neither spends anything: clone_only spawns no agent, resume_monitoring re-attaches to a
# process already running (holding it would orphan the process, not save a token).
UNGATED_TURNS = frozenset({TurnKind.CLONE_ONLY, TurnKind.RESUME_MONITORING})
