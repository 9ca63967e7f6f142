"""The budget is a ceiling (seed 004): what the ceiling sweep does to running and paused sessions.

Admission alone made the budget a floor under when new spot work stops, not a ceiling on what it
spends: on 2026-08-20 the card read "5-hour window at 89% of its 80% target" while twelve
sessions ran. So every five minutes the sweep asks the gate what it would say to a new spot
session, and applies the answer to the sessions already running:

  at_utilization_limit   every running spot session is paused
  fleet_at_cap           nothing: a running session already holds its slot
  anything else          paused sessions resume, highest precedence first (oldest pause first in a
                         tie), at most RESUME_BATCH a sweep and never more than the free slots,
                         each against the reserve widened by RESUME_MARGIN; the first that does not
                         fit stops the batch, and those behind it keep their place

Priority sessions, Codex sessions and status-summary forks are never paused. A paused session
someone made priority resumes on the next sweep whatever the windows say. `unavailable` (the
gate's inputs could not be read) changes nothing: the sweep neither pauses nor resumes blind.
Pure: the gate's decision comes in as a function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from zimmer_spot_gate.domain.gate import RESUME_MARGIN, Candidate, Decision, FleetState
from zimmer_spot_gate.domain.model import Reason

RESUME_BATCH = 5
# What the gate says to a candidate, with the reserve widened by `margin` (a fraction of the window).
Gate = Callable[[Candidate, FleetState, float], Decision]


@dataclass(frozen=True)
class Sleeper:
    """A running session the sweep may pause, or a paused one it may resume."""

    id: int
    precedence: int
    since: datetime  # a paused session: when it was paused (oldest first in a tie)
    exempt: str | None  # "priority", "codex", "status_summary_fork", or None for spot work
    burn: float = 0.0  # its model's burn rate, $/min
    takes_slot: bool = True


@dataclass(frozen=True)
class CeilingPlan:
    decision: Decision  # what the gate says to a new spot session now
    pause: tuple[int, ...] = ()
    resume: tuple[int, ...] = ()  # spot sessions the headroom takes back, in order
    promoted: tuple[int, ...] = ()  # paused sessions that no longer ask the gate: resumed regardless
    still_paused: int = 0  # spot sessions left for a later sweep, keeping their place
    # The session at the head of what is left when the gate itself stopped the batch (not its
    # size), with the decision that kept it paused: the decision log records it.
    kept: tuple[int, Decision] | None = None


def resume_order(paused: Sequence[Sleeper]) -> list[Sleeper]:
    return sorted(paused, key=lambda s: (-s.precedence, s.since, s.id))


def plan_ceiling(running: Sequence[Sleeper], paused: Sequence[Sleeper], fleet: FleetState, gate: Gate,
                 batch: int = RESUME_BATCH) -> CeilingPlan:
    decision = gate(Candidate(0.0), fleet, 0.0)
    exempt = [s for s in resume_order(paused) if s.exempt is not None]
    promoted = tuple(s.id for s in exempt)  # priority work is never gated on quota
    queue = resume_order([s for s in paused if s.exempt is None])
    if decision.reason is Reason.AT_UTILIZATION_LIMIT:
        return CeilingPlan(decision, pause=tuple(s.id for s in running if s.exempt is None), promoted=promoted,
                           still_paused=len(queue))
    if decision.reason in (Reason.FLEET_AT_CAP, Reason.UNAVAILABLE):
        return CeilingPlan(decision, promoted=promoted, still_paused=len(queue))
    for s in exempt:  # they run again whatever the windows say, and take their slots first
        fleet = FleetState(fleet.running_slots + int(s.takes_slot), fleet.burn_dollars_per_minute + s.burn)
    resumed: list[int] = []
    kept: tuple[int, Decision] | None = None
    for s in queue:
        if len(resumed) >= batch:
            break
        verdict = gate(Candidate(s.burn), fleet, RESUME_MARGIN)  # the slot check is the gate's too
        if not verdict.allowed:
            kept = (s.id, verdict)
            break
        resumed.append(s.id)
        fleet = FleetState(fleet.running_slots + int(s.takes_slot), fleet.burn_dollars_per_minute + s.burn)
    return CeilingPlan(decision, resume=tuple(resumed), promoted=promoted, still_paused=len(queue) - len(resumed),
                       kept=kept)
