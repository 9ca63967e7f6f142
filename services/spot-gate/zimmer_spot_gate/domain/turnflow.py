"""The turn state machine: what one batch of turn requests does to the sessions it names.

Seed 004 "Every turn is gated, not just the first", "What hold does", "Consecutive holds back
off", "The concurrency limit" and "Precedence decides who gets the headroom back". Pure: the
gate's decision comes in as a function, the clock and the jitter as values; the edge
(`zimmer_spot_gate.handlers.turns`) reads the rows, calls `plan_batch` and writes what it returns.

The rules, in the order they are tried for a new turn:

1. An ended session (archived, failed) takes no more turns: refused.
2. clone_only and resume_monitoring pass: neither spends anything.
3. A session with a turn in flight (running) gets the new turn queued behind it, delivered at
   its next turn boundary: at most one turn in flight per session, and a running session is
   never flipped to waiting without being stopped. At the boundary (the runtime reported the
   turn over) the next queued turn is decided for a session that is still running: it keeps its
   slot (the fleet check is made when a session starts and never again), while the quota checks
   apply as to any turn; held, it goes dormant in waiting, never through needs_input.
4. A held session gets the new turn queued behind the held one (the hold record is left
   alone: the re-check it names is the one that fires), unless it no longer asks the gate at
   all (made priority): then the held turn is delivered now and the new one queued behind it.
   A person's restart resets the ladder and re-enters the gate carrying the held turn, its own
   prompt queued behind it.
5. Otherwise a session that never asks the gate (priority, Codex, a status-summary fork) is
   passed, and a spot session is admitted or held by the gate.

Within a batch, sessions are decided in precedence order (highest first, oldest first within a
tie), each seeing the admissions before it: when one slot frees and two sessions want it, the
higher precedence gets it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from zimmer_spot_gate.domain.gate import Decision, FleetState
from zimmer_spot_gate.domain.ladder import hold_delay
from zimmer_spot_gate.domain.model import UNGATED_TURNS, Reason, SessionStatus, TurnKind

ENDED = frozenset({SessionStatus.ARCHIVED, SessionStatus.FAILED})


@dataclass(frozen=True)
class Turn:
    kind: TurnKind
    prompt: str | None = None
    attachments: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Hold:
    """The gate's custody of a refused turn."""

    reason: Reason
    retry_at: datetime | None
    turn: Turn


@dataclass(frozen=True)
class Session:
    id: int
    status: SessionStatus
    exempt: str | None  # why the gate is never consulted (priority, codex, status_summary_fork); None: spot
    takes_slot: bool  # a Claude Code session that is not a status-summary fork
    burn: float  # what it spends per minute while running, in the gate's unit
    precedence: int
    created_at: datetime
    hold: Hold | None = None
    hold_count: int = 0  # consecutive holds: the rung of the ladder
    ever_started: bool = False


@dataclass(frozen=True)
class Ask:
    """One request for a turn, or (turn None) the re-check of the held turn."""

    session_id: int
    turn: Turn | None = None
    force: bool = False  # re-check now whatever the retry time (the session's class changed)
    boundary: bool = False  # the next queued turn of a running session whose turn just ended
    event: str = "turn"  # what the decision log calls this outcome (a resume names itself)


@dataclass(frozen=True)
class Logged:
    """A row of the decision log: the gate's decision, or (decision None) a start that took a
    dormant session onto a slot without asking the gate (`exempt` says why)."""

    session_id: int
    turn: Turn
    decision: Decision | None
    event: str = "turn"
    exempt: str | None = None


class Verdict(StrEnum):
    ADMITTED = "admitted"  # the gate allowed it: the turn starts
    PASSED = "passed"  # the gate was not consulted: the turn starts
    HELD = "held"  # the gate refused it and keeps it
    QUEUED = "queued"  # behind the turn in flight or the held one
    NOTHING = "nothing"  # a re-check with nothing (yet) to re-check
    REFUSED = "refused"  # the session has ended
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    session_id: int
    exempt_because: str | None = None
    decision: Decision | None = None


@dataclass
class BatchPlan:
    sessions: dict[int, Session]  # every session the batch read, as it leaves them
    changed: set[int] = field(default_factory=set)
    outcomes: list[Outcome] = field(default_factory=list)  # one per ask, in the asks' order
    starts: list[tuple[int, Turn]] = field(default_factory=list)  # start_turn commands, in order
    queued: list[tuple[int, Turn]] = field(default_factory=list)  # onto the sessions' queues, in order
    decisions: list[Logged] = field(default_factory=list)  # the decision log
    fleet: FleetState | None = None  # as the batch leaves it
    slots_at_admission: list[tuple[int, int]] = field(default_factory=list)  # (session, slots before), for spot


GateFn = Callable[[Session, FleetState], Decision]


def precedence_order(sessions: dict[int, Session], asks: Sequence[Ask]) -> list[int]:
    """The order the asks are decided in: highest precedence first, oldest session first within
    a tie, arrival order last. Asks naming no known session go first (they decide nothing)."""

    def key(i: int) -> tuple[int, int, float, int]:
        s = sessions.get(asks[i].session_id)
        if s is None:
            return (0, 0, 0.0, i)
        return (1, -s.precedence, s.created_at.timestamp(), i)

    return sorted(range(len(asks)), key=key)


def plan_batch(sessions: dict[int, Session], asks: Sequence[Ask], fleet: FleetState, gate: GateFn,
               now: datetime, jitter: Callable[[], float]) -> BatchPlan:
    plan = BatchPlan(dict(sessions), fleet=fleet)
    outcomes: dict[int, Outcome] = {}
    for i in precedence_order(sessions, asks):
        ask = asks[i]
        s = plan.sessions.get(ask.session_id)
        if s is None:
            outcomes[i] = Outcome(Verdict.NOT_FOUND, ask.session_id)
        elif ask.turn is None:
            outcomes[i] = _recheck(plan, s, ask, gate, now, jitter)
        else:
            outcomes[i] = _turn(plan, s, ask, ask.turn, gate, now, jitter)
    plan.outcomes = [outcomes[i] for i in range(len(asks))]
    return plan


def _turn(plan: BatchPlan, s: Session, ask: Ask, turn: Turn, gate: GateFn, now: datetime,
          jitter: Callable[[], float]) -> Outcome:
    if s.status in ENDED:
        return Outcome(Verdict.REFUSED, s.id)
    if turn.kind in UNGATED_TURNS:
        plan.starts.append((s.id, turn))
        return Outcome(Verdict.PASSED, s.id, exempt_because=turn.kind.value)
    if s.status is SessionStatus.RUNNING:
        if ask.boundary:  # its turn is over: this is its next, and it still holds its slot
            if s.exempt is not None:
                return _start(plan, s, turn, Verdict.PASSED, ask, exempt=s.exempt)
            return _decide(plan, s, turn, ask, gate, now, jitter)
        plan.queued.append((s.id, turn))
        return Outcome(Verdict.QUEUED, s.id)
    if s.hold is not None:
        if turn.kind is TurnKind.RESTART:
            # A person asked for this session: the ladder starts again, and the held turn goes
            # first; nothing is lost, its own prompt waits behind it.
            if turn.prompt is not None or turn.attachments:
                plan.queued.append((s.id, turn))
            return _recheck(plan, _set(plan, replace(s, hold_count=0)), replace(ask, force=True), gate, now, jitter)
        plan.queued.append((s.id, turn))
        if s.exempt is None:
            return Outcome(Verdict.QUEUED, s.id)
        # No longer gated (made priority while held): its held turn goes now, this one after it.
        return _start(plan, s, s.hold.turn, Verdict.PASSED, ask, exempt=s.exempt)
    if turn.kind is TurnKind.RESTART:
        s = _set(plan, replace(s, hold_count=0))
    if s.exempt is not None:
        return _start(plan, s, turn, Verdict.PASSED, ask, exempt=s.exempt)
    return _decide(plan, s, turn, ask, gate, now, jitter)


def _recheck(plan: BatchPlan, s: Session, ask: Ask, gate: GateFn, now: datetime,
             jitter: Callable[[], float]) -> Outcome:
    if s.hold is None or s.status in ENDED:
        return Outcome(Verdict.NOTHING, s.id)  # nothing held, or another worker re-checked it first
    due = s.hold.retry_at is None or s.hold.retry_at <= now
    if not (due or ask.force):
        return Outcome(Verdict.NOTHING, s.id)
    if s.exempt is not None:  # promoted to priority while held: the lever that starts it now
        return _start(plan, s, s.hold.turn, Verdict.PASSED, ask, exempt=s.exempt)
    return _decide(plan, s, s.hold.turn, ask, gate, now, jitter)


def _decide(plan: BatchPlan, s: Session, turn: Turn, ask: Ask, gate: GateFn, now: datetime,
            jitter: Callable[[], float]) -> Outcome:
    assert plan.fleet is not None
    decision = gate(s, plan.fleet)  # a running session (at its boundary) is asked as one: no slot check
    plan.decisions.append(Logged(s.id, turn, decision, ask.event))
    if decision.allowed:
        return _start(plan, s, turn, Verdict.ADMITTED, ask, decision=decision)
    count = s.hold_count + 1
    reason = decision.reason
    if s.status is SessionStatus.RUNNING and s.takes_slot:  # its turn ended and the next is held: the slot frees
        f = plan.fleet
        plan.fleet = FleetState(f.running_slots - 1, max(0.0, f.burn_dollars_per_minute - s.burn))
    # The gate takes custody of the turn; the session goes dormant in waiting (never
    # needs_input: nobody has to do anything about it).
    _set(plan, replace(s, status=SessionStatus.WAITING, hold_count=count,
                       hold=Hold(reason, now + hold_delay(reason, count, jitter()), turn)))
    return Outcome(Verdict.HELD, s.id, decision=decision)


def _start(plan: BatchPlan, s: Session, turn: Turn, verdict: Verdict, ask: Ask, *, exempt: str | None = None,
           decision: Decision | None = None) -> Outcome:
    assert plan.fleet is not None
    f = plan.fleet
    running = s.status is SessionStatus.RUNNING  # at its turn boundary: already counted in the fleet
    if s.exempt is None and not running:
        plan.slots_at_admission.append((s.id, f.running_slots))
    if s.takes_slot and not running:  # the next decision in this batch sees this session running
        plan.fleet = FleetState(f.running_slots + 1, f.burn_dollars_per_minute + s.burn)
    if decision is None and (s.hold is not None or ask.event != "turn"):
        # A dormant session taken onto a slot without asking the gate: the log says so, so the
        # decision in force at any instant is the newest row before it.
        plan.decisions.append(Logged(s.id, turn, None, ask.event, exempt))
    # Admission clears the hold record: the next outage starts the ladder at 10 minutes.
    _set(plan, replace(s, status=SessionStatus.RUNNING, ever_started=True, hold=None, hold_count=0))
    plan.starts.append((s.id, turn))
    return Outcome(verdict, s.id, exempt_because=exempt, decision=decision)


def _set(plan: BatchPlan, s: Session) -> Session:
    plan.sessions[s.id] = s
    plan.changed.add(s.id)
    return s
