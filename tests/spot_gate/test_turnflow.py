"""The turn state machine's invariants, over random fleets and random interleavings (hypothesis).

A simulated runtime plays the batches forward: turns and re-checks arrive in random batches,
turns end at random (running → needs_input, where the next queued turn is delivered, as
spot-gate's status handler does), and the real gate (`decide`) decides with a random pool.
Whatever the interleaving:

- at most one turn is in flight per session: a turn is started only for a session not running
  (clone_only and resume_monitoring aside: they start no agent turn);
- a running session never goes to waiting while its turn is in flight: a new turn is queued
  behind it, and at its boundary the next is run (keeping its slot) or held (dormant in waiting);
- a session's prompts are delivered in the order they were asked for, none lost, none twice;
- spot admissions never take the fleet past `max_sessions` (priority work may: it is never held).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from zimmer_spot_gate.domain.gate import Candidate, FleetState, Policy, Snapshot, WindowState, decide
from zimmer_spot_gate.domain.model import Reason, SessionStatus, TurnKind, Window
from zimmer_spot_gate.domain.turnflow import Ask, Hold, Session, Turn, Verdict, plan_batch, precedence_order

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ROOMY = (WindowState(Window.FIVE_HOUR, 0.1, 200, 100.0),)  # room in the window: only the slots decide
GATED = [TurnKind.FOLLOW_UP, TurnKind.WAKE, TurnKind.HEARTBEAT, TurnKind.FIRST_START, TurnKind.RESTART]


def gate_for(policy: Policy, windows: tuple[WindowState, ...]):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    def gate(s: Session, fleet: FleetState):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        return decide(Snapshot(policy, windows, fleet, Candidate(s.burn), 1, 1))
    return gate


@st.composite
def fleets(draw):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    n = draw(st.integers(1, 8))
    sessions = {}
    for i in range(1, n + 1):
        exempt = draw(st.sampled_from([None, None, None, "priority", "codex"]))
        sessions[i] = Session(i, SessionStatus.WAITING, exempt, takes_slot=exempt != "codex",
                              burn=draw(st.floats(0, 3)), precedence=draw(st.integers(-5, 5)),
                              created_at=T0 + timedelta(seconds=i))
    policy = Policy(max_sessions=draw(st.integers(0, 4)))
    u = draw(st.floats(0, 1))
    windows = (WindowState(Window.FIVE_HOUR, u, 200, draw(st.sampled_from([None, 100.0]))),)
    script = draw(st.lists(st.tuples(st.integers(1, n), st.sampled_from(["turn", "turn", "recheck", "end",
                                                                          "clone"]),
                                     st.sampled_from(GATED)), min_size=1, max_size=40))
    cuts = draw(st.lists(st.integers(1, 5), min_size=1, max_size=40))
    return sessions, policy, windows, script, cuts, draw(st.integers(0, 2**32 - 1))


@given(fleets())
@settings(max_examples=300, deadline=None)
def test_invariants_hold_under_any_interleaving(case) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    sessions, policy, windows, script, cuts, seed = case
    rng = random.Random(seed)
    gate = gate_for(policy, windows)
    queues: dict[int, list[Turn]] = {sid: [] for sid in sessions}
    asked: dict[int, list[str]] = {sid: [] for sid in sessions}
    delivered: dict[int, list[str]] = {sid: [] for sid in sessions}
    now = T0
    fleet = FleetState(0, 0.0)

    def running_slots() -> int:
        return sum(1 for s in sessions.values() if s.status is SessionStatus.RUNNING and s.takes_slot)

    def play(asks: list[Ask]) -> None:
        nonlocal sessions, fleet
        before = dict(sessions)
        ended = {a.session_id for a in asks if a.boundary}  # their turn is over: the next may start
        fleet = FleetState(running_slots(), 0.0)
        plan = plan_batch(sessions, asks, fleet, gate, now, rng.random)
        for sid, slots_before in plan.slots_at_admission:
            assert slots_before < policy.max_sessions or not _gated(before[sid]), (sid, slots_before)
        for sid, turn in plan.starts:
            if turn.kind not in (TurnKind.CLONE_ONLY, TurnKind.RESUME_MONITORING):
                assert before[sid].status is not SessionStatus.RUNNING or sid in ended, "a second turn in flight"
                delivered[sid].append(turn.prompt or "")
        for sid, turn in plan.queued:
            queues[sid].append(turn)
        for sid, s in plan.sessions.items():
            if before[sid].status is SessionStatus.RUNNING and sid not in ended:
                assert s.status is SessionStatus.RUNNING, "a running session flipped without a stop"
            if sid in ended and s.status is not SessionStatus.RUNNING:
                assert s.status is SessionStatus.WAITING and s.hold is not None, "a boundary turn is run or held"
        sessions = plan.sessions
        exempt_running = sum(1 for s in sessions.values()
                             if s.status is SessionStatus.RUNNING and s.takes_slot and s.exempt)
        assert running_slots() <= policy.max_sessions + exempt_running

    pending: list[Ask] = []
    cut = itertools.cycle(cuts)
    for counter, (sid, what, kind) in enumerate(script, start=1):
        now += timedelta(minutes=rng.choice([0, 5, 30]))
        s = sessions[sid]
        if what == "end" and s.status is SessionStatus.RUNNING:
            # The turn boundary, as spot-gate's status handler takes it: in one transaction under
            # the admission lock, the next queued turn is decided for the still-running session
            # (it keeps its slot); with nothing queued it waits on a person.
            if queues[sid]:
                play([Ask(sid, queues[sid].pop(0), boundary=True)])
            else:
                sessions = {**sessions, sid: replace(s, status=SessionStatus.NEEDS_INPUT)}
        elif what == "turn":
            prompt = f"{sid}:{counter}"
            asked[sid].append(prompt)
            pending.append(Ask(sid, Turn(kind, prompt)))
        elif what == "recheck":
            pending.append(Ask(sid))
        elif what == "clone":
            pending.append(Ask(sid, Turn(TurnKind.CLONE_ONLY)))
        if len(pending) >= next(cut):
            play(pending)
            pending = []
    if pending:
        play(pending)
    for sid in sessions:
        held = [sessions[sid].hold.turn.prompt] if sessions[sid].hold else []
        queued = [t.prompt for t in queues[sid]]
        # Every prompt is exactly once somewhere, and in the order it was asked for.
        assert delivered[sid] + held + queued == asked[sid], (sid, delivered[sid], held, queued, asked[sid])


def _gated(s: Session) -> bool:
    return s.exempt is None


def test_a_follow_up_to_a_running_session_is_queued_not_started() -> None:
    """Issue 8 #2 (seed 004 "Every turn is gated"): a turn for a session with a turn in flight is
    queued in enqueued_messages and drained at the next turn boundary; admitting it would send a
    second start_turn, holding it would flip a running session to waiting while its process runs."""
    s = Session(1, SessionStatus.RUNNING, None, True, 1.0, 0, T0)
    plan = plan_batch({1: s}, [Ask(1, Turn(TurnKind.FOLLOW_UP, "more"))], FleetState(1, 1.0),
                      gate_for(Policy(max_sessions=1), ()), T0, lambda: 0.0)
    assert [o.verdict for o in plan.outcomes] == [Verdict.QUEUED]
    assert plan.starts == [] and plan.queued == [(1, Turn(TurnKind.FOLLOW_UP, "more"))]
    assert plan.sessions[1].status is SessionStatus.RUNNING and plan.decisions == []


def test_higher_precedence_gets_the_freed_slot() -> None:
    """Issue 8 #3 (seed 004 "Precedence decides who gets the headroom back"): with two fleet_at_cap
    holds and one slot free, the higher precedence is admitted; ties go to the older session."""
    held = Hold(Reason.FLEET_AT_CAP, T0, Turn(TurnKind.FIRST_START, "p"))
    low = Session(1, SessionStatus.WAITING, None, True, 0.0, 0, T0, held, 1)
    high = Session(2, SessionStatus.WAITING, None, True, 0.0, 1000, T0 + timedelta(hours=1), held, 1)
    plan = plan_batch({1: low, 2: high}, [Ask(1), Ask(2)], FleetState(0, 0.0),
                      gate_for(Policy(max_sessions=1), ROOMY), T0, lambda: 0.0)
    assert [(o.session_id, o.verdict) for o in plan.outcomes] == [(1, Verdict.HELD), (2, Verdict.ADMITTED)]
    older = replace(high, precedence=0, created_at=T0 - timedelta(hours=1))
    assert precedence_order({1: low, 2: older}, [Ask(1), Ask(2)]) == [1, 0]


def test_a_held_session_made_priority_delivers_its_held_turn_first() -> None:
    held = Hold(Reason.AT_UTILIZATION_LIMIT, T0 + timedelta(minutes=10), Turn(TurnKind.FIRST_START, "first"))
    s = Session(1, SessionStatus.WAITING, "priority", True, 0.0, 0, T0, held, 1)
    plan = plan_batch({1: s}, [Ask(1, Turn(TurnKind.FOLLOW_UP, "second"))], FleetState(0, 0.0),
                      gate_for(Policy(), ()), T0, lambda: 0.0)
    assert plan.starts == [(1, Turn(TurnKind.FIRST_START, "first"))]
    assert plan.queued == [(1, Turn(TurnKind.FOLLOW_UP, "second"))]


@given(st.integers(0, 12), st.integers(0, 6), st.integers(0, 3))
@settings(max_examples=200, deadline=None)
def test_one_batch_admits_exactly_the_free_slots(spot: int, cap: int, running: int) -> None:
    """Issue 8 #1: a burst of spot first turns in one batch admits exactly the free slots and
    holds the rest on fleet_at_cap (priority aside); never one more, never unavailable."""
    sessions = {i: Session(i, SessionStatus.WAITING, None, True, 0.0, 0, T0 + timedelta(seconds=i))
                for i in range(1, spot + 1)}
    plan = plan_batch(sessions, [Ask(i, Turn(TurnKind.FIRST_START, "go")) for i in sessions],
                      FleetState(running, 0.0), gate_for(Policy(max_sessions=cap), ROOMY), T0, lambda: 0.0)
    verdicts = [o.verdict for o in plan.outcomes]
    assert verdicts.count(Verdict.ADMITTED) == min(spot, max(0, cap - running))
    assert all(d.decision is not None and d.decision.reason in (Reason.WITHIN_LIMITS, Reason.FLEET_AT_CAP)
               for d in plan.decisions)
