"""What the policy dry-run reads and answers (issue 32 #5), as values: the record of one span
(the gate's decisions with the calls they were made from, the ceiling sweeps, sessions starting
and stopping), the settings to try, and the answer per hour beside what happened. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from zimmer_spot_gate.domain.gate import GateCall, Policy
from zimmer_spot_gate.domain.model import Window

# How long the spot gate keeps what a replay reads (session_runs, gate_sweeps) and the longest span
# one dry-run replays (a bound on the work, and the Quotas page's "last 7 days").
KEPT_DAYS = 15
MAX_SPAN_DAYS = 7
# At most this many rows of each kind are read for one dry-run: past it the replay stops at the
# last instant it read whole, and says so.
MAX_DECISIONS = 20_000
MAX_SWEEPS = 4_000
MAX_RUN_EDGES = 40_000
SESSIONS_LISTED = 50  # sessions decided differently, named in one answer


@dataclass(frozen=True)
class Asked:
    """A row of the decision log. `call` None: not a gate evaluation (a start without asking, a
    park, a wake stand-down), or a row from before the calls were recorded."""

    id: int
    session_id: int
    at: datetime
    event: str
    allowed: bool
    reason: str
    ceiling: str | None
    call: GateCall | None


@dataclass(frozen=True)
class Swept:
    """A ceiling sweep: what the gate said to a new spot session then, and from what."""

    at: datetime
    call: GateCall
    reason: str


@dataclass(frozen=True)
class RunEdge:
    """A session started (`running`) or stopped running."""

    session_id: int
    at: datetime
    running: bool
    takes_slot: bool
    exempt: str | None  # None: spot work the gate decides on


@dataclass(frozen=True)
class Record:
    since: datetime
    until: datetime
    asked: tuple[Asked, ...]  # oldest first
    sweeps: tuple[Swept, ...]  # oldest first
    edges: tuple[RunEdge, ...]  # oldest first
    running_at_since: tuple[RunEdge, ...] = ()  # the start of each run still open when the span begins


@dataclass(frozen=True)
class Settings:
    """The settings to try; a field left None keeps what each decision recorded."""

    gating_enabled: bool | None = None
    reserve_five_hour: float | None = None  # a fraction of the window
    reserve_seven_day: float | None = None
    max_sessions: int | None = None

    def apply(self, p: Policy) -> Policy:
        if self == Settings():
            return p  # the recorded policy itself: a replay at the recorded settings decides as the gate did
        reserve = dict(p.reserve)
        if self.reserve_five_hour is not None:
            reserve[Window.FIVE_HOUR] = self.reserve_five_hour
        if self.reserve_seven_day is not None:
            reserve[Window.SEVEN_DAY] = self.reserve_seven_day
        return replace(p, reserve=reserve,
                       gating_enabled=p.gating_enabled if self.gating_enabled is None else self.gating_enabled,
                       max_sessions=p.max_sessions if self.max_sessions is None else self.max_sessions)


@dataclass
class Figures:
    """One history's figures for one hour (or the whole span)."""

    admitted: int = 0  # gate decisions that let a turn (or a resume) start
    held: int = 0  # gate decisions that held a turn
    paused: int = 0  # running spot sessions the ceiling paused
    held_minutes: dict[str, float] = field(default_factory=dict)  # by binding ceiling
    paused_minutes: float = 0.0
    peak_running: int = 0  # sessions taking a slot at once, at the most

    def add(self, other: Figures) -> None:
        self.admitted += other.admitted
        self.held += other.held
        self.paused += other.paused
        for k, v in other.held_minutes.items():
            self.held_minutes[k] = self.held_minutes.get(k, 0.0) + v
        self.paused_minutes += other.paused_minutes
        self.peak_running = max(self.peak_running, other.peak_running)


@dataclass(frozen=True)
class Left:
    """A window's spot budget left: dollars once calibrated, else a fraction of the window."""

    window: Window
    calibrated: bool
    recorded: float
    replayed: float
    utilization_recorded: float
    utilization_replayed: float


@dataclass
class Hour:
    start: datetime
    recorded: Figures = field(default_factory=Figures)
    replayed: Figures = field(default_factory=Figures)
    decisions: int = 0  # recorded gate evaluations asked again
    held_instead: int = 0  # the record admitted, the replay held (or paused)
    admitted_instead: int = 0  # the record held (or paused), the replay admitted
    left: tuple[Left, ...] = ()  # at the hour's last reading of the windows


@dataclass(frozen=True)
class ResetLeft:
    """What a window had left of its spot budget at its last reading before it reset."""

    at: datetime
    left: Left


@dataclass(frozen=True)
class Differently:
    session_id: int
    at: datetime
    recorded: str  # admitted, held, paused
    replayed: str


@dataclass
class Answer:
    hours: list[Hour]
    resets: list[ResetLeft]
    differently: list[Differently]  # the first SESSIONS_LISTED
    decisions_replayed: int = 0
    decisions_changed: int = 0  # allowed differently
    reasons_changed: int = 0  # allowed alike, for another reason or ceiling
    sessions_changed: int = 0
    not_replayed: int = 0  # gate decisions in the span recorded without their call
    not_recorded_until: datetime | None = None  # the newest of them
