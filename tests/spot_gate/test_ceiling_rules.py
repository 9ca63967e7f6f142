"""The ceiling sweep's plan (seed 004 "The budget is a ceiling"), pure: the gate comes in as a
function of the candidate, the fleet and the resume margin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.ceiling import RESUME_BATCH, Sleeper, plan_ceiling
from zimmer_spot_gate.domain.gate import RESUME_MARGIN, Candidate, Decision, FleetState
from zimmer_spot_gate.domain.model import Reason

T0 = datetime(2026, 8, 20, 12, tzinfo=UTC)


def gate_with(reason: Reason, *, max_slots: int = 10, resume_room: int = 100):
    """A gate that says `reason` to a new spot session; resumes fit while the fleet has fewer than
    `max_slots` running and fewer than `resume_room` resumes' burn (1 $/min each) on top."""
    def gate(candidate: Candidate, fleet: FleetState, margin: float) -> Decision:
        if margin == 0.0 and candidate.burn_dollars_per_minute == 0.0:
            return Decision(reason not in (Reason.AT_UTILIZATION_LIMIT, Reason.FLEET_AT_CAP), reason, None, reason.value)
        assert margin == RESUME_MARGIN  # resuming decides against the widened reserve
        if fleet.running_slots >= max_slots:
            return Decision(False, Reason.FLEET_AT_CAP, None, "cap")
        if fleet.burn_dollars_per_minute + candidate.burn_dollars_per_minute > resume_room:
            return Decision(False, Reason.AT_UTILIZATION_LIMIT, None, "no headroom with the margin")
        return Decision(True, Reason.WITHIN_LIMITS, None, "ok")
    return gate


def sleeper(i: int, precedence: int = 0, minutes_ago: int = 0, exempt: str | None = None) -> Sleeper:
    return Sleeper(i, precedence, T0 - timedelta(minutes=minutes_ago), exempt, burn=1.0)


def test_at_the_limit_every_running_spot_session_is_paused_and_nothing_else() -> None:
    running = [sleeper(1), sleeper(2, exempt="priority"), sleeper(3, exempt="codex"),
               sleeper(4, exempt="status_summary_fork"), sleeper(5)]
    plan = plan_ceiling(running, [sleeper(9, exempt="priority")], FleetState(5, 5.0),
                        gate_with(Reason.AT_UTILIZATION_LIMIT))
    assert plan.pause == (1, 5) and plan.resume == () and plan.promoted == (9,)


def test_fleet_at_cap_pauses_nothing_and_resumes_only_priority() -> None:
    plan = plan_ceiling([sleeper(1)], [sleeper(2), sleeper(3, exempt="priority")], FleetState(10, 10.0),
                        gate_with(Reason.FLEET_AT_CAP))
    assert (plan.pause, plan.resume, plan.promoted, plan.still_paused) == ((), (), (3,), 1)


def test_resume_order_batch_and_free_slots() -> None:
    paused = [sleeper(1, precedence=10, minutes_ago=5), sleeper(2, precedence=50, minutes_ago=1),
              sleeper(3, precedence=10, minutes_ago=30), sleeper(4, precedence=0), sleeper(5, precedence=99),
              sleeper(6, precedence=10, minutes_ago=30), sleeper(7, precedence=-5)]
    plan = plan_ceiling([], paused, FleetState(0, 0.0), gate_with(Reason.WITHIN_LIMITS))
    # highest precedence first, oldest pause first in a tie (then id), five a sweep
    assert plan.resume == (5, 2, 3, 6, 1) and plan.still_paused == 2
    plan = plan_ceiling([], paused, FleetState(8, 8.0), gate_with(Reason.WITHIN_LIMITS))
    assert plan.resume == (5, 2)  # never more than the free slots


def test_the_first_that_does_not_fit_stops_the_batch_and_those_behind_keep_their_place() -> None:
    paused = [sleeper(1, precedence=3), sleeper(2, precedence=2), sleeper(3, precedence=1)]
    plan = plan_ceiling([], paused, FleetState(0, 0.0), gate_with(Reason.WITHIN_LIMITS, resume_room=1))
    assert plan.resume == (1,) and plan.still_paused == 2


def test_unavailable_changes_nothing_but_priority() -> None:
    plan = plan_ceiling([sleeper(1)], [sleeper(2), sleeper(3, exempt="priority")], FleetState(1, 1.0),
                        gate_with(Reason.UNAVAILABLE))
    assert (plan.pause, plan.resume, plan.promoted) == ((), (), (3,))


@given(st.lists(st.tuples(st.integers(-100, 100), st.integers(0, 600), st.booleans()), max_size=30),
       st.integers(0, 12), st.integers(0, 40))
def test_never_more_than_the_batch_or_the_slots_and_always_in_queue_order(
        rows: list[tuple[int, int, bool]], running: int, room: int) -> None:
    paused = [sleeper(i, p, m, "priority" if promoted else None) for i, (p, m, promoted) in enumerate(rows)]
    plan = plan_ceiling([], paused, FleetState(running, float(running)),
                        gate_with(Reason.WITHIN_LIMITS, max_slots=10, resume_room=room))
    spot = sorted((s for s in paused if s.exempt is None), key=lambda s: (-s.precedence, s.since, s.id))
    assert len(plan.resume) <= RESUME_BATCH
    assert running + len(plan.promoted) + len(plan.resume) <= max(10, running + len(plan.promoted))
    assert list(plan.resume) == [s.id for s in spot[:len(plan.resume)]]  # a prefix of the queue
    assert set(plan.promoted) == {s.id for s in paused if s.exempt is not None}
    assert plan.still_paused == len(spot) - len(plan.resume)
