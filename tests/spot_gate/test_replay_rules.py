"""The policy dry-run's pure rules (issue 32 #5): a recorded call decides again exactly as the gate
did, a replay at the recorded settings reproduces every recorded decision, and other settings
change what happened in the direction they should, carried forward through the fleet."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from zimmer_spot_gate.domain.gate import Candidate, FleetState, GateCall, Policy, WindowState, evaluate, evaluate_call
from zimmer_spot_gate.domain.gate_record import UnreadableCall, call_json, call_of
from zimmer_spot_gate.domain.ladder import hold_delay
from zimmer_spot_gate.domain.model import Reason, Window
from zimmer_spot_gate.domain.replay import LADDER_JITTER, replay
from zimmer_spot_gate.domain.replay_hours import NO_SWEEP, NOT_RECORDED, gaps
from zimmer_spot_gate.domain.replay_model import Asked, Record, RunEdge, Settings, Swept

FIVE, SEVEN = Window.FIVE_HOUR, Window.SEVEN_DAY
T0 = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)


def call(u5: float = 0.3, u7: float = 0.2, *, slots: int = 0, burn: float = 0.0, cand: float = 1.0,
         reserve5: float = 0.2, reserve7: float = 0.1, max_sessions: int = 10, cap5: float | None = 1000.0,
         mins5: float = 200.0, running: bool = False, margin: float = 0.0) -> GateCall:
    return GateCall(Policy(True, {FIVE: reserve5, SEVEN: reserve7}, max_sessions),
                    (WindowState(FIVE, u5, mins5, cap5), WindowState(SEVEN, u7, 5000.0, 10000.0)),
                    FleetState(slots, burn), Candidate(cand, running), 3, 3, None, margin)


def asked(i: int, sid: int, minute: float, c: GateCall, event: str = "turn") -> Asked:
    d = evaluate_call(c)
    return Asked(i, sid, T0 + timedelta(minutes=minute), event, d.allowed, d.reason.value,
                 d.ceiling.value if d.ceiling else None, c)


def edge(sid: int, minute: float, running: bool, exempt: str | None = None) -> RunEdge:
    return RunEdge(sid, T0 + timedelta(minutes=minute), running, True, exempt)


def record(asks: list[Asked], edges: list[RunEdge] = (), sweeps: list[Swept] = (),  # type: ignore[assignment]  # tuples as defaults
           hours: int = 3, running: tuple[RunEdge, ...] = ()) -> Record:
    return Record(T0, T0 + timedelta(hours=hours), tuple(sorted(asks, key=lambda a: (a.at, a.id))),
                  tuple(sweeps), tuple(sorted(edges, key=lambda e: e.at)), running)


# ---- the recorded call ---------------------------------------------------------------------

fractions = st.floats(min_value=0, max_value=1, allow_nan=False)
money = st.floats(min_value=0, max_value=50, allow_nan=False)
calls = st.builds(
    lambda u5, u7, slots, burn, cand, r5, r7, cap, mins, running, margin, gating, blind: GateCall(
        Policy(gating, {FIVE: r5, SEVEN: r7}, 6), None if blind else (
            WindowState(FIVE, u5, mins, cap, burn / 100), WindowState(SEVEN, u7, mins * 20, None, 0.001)),
        FleetState(slots, burn), Candidate(cand, running), 2, 3, "RuntimeError: pool unreadable" if blind else None,
        margin),
    fractions, fractions, st.integers(0, 8), money, money, fractions, fractions,
    st.one_of(st.none(), st.floats(min_value=1, max_value=5000)), st.floats(min_value=0, max_value=400),
    st.booleans(), st.sampled_from([0.0, 0.05]), st.booleans(), st.booleans())


@given(calls)
def test_a_recorded_call_decides_again_exactly_as_the_gate_did(c: GateCall) -> None:
    live = evaluate(c.policy, c.windows, c.fleet, c.candidate, accounts_averaged=c.accounts_averaged,
                    accounts_in_pool=c.accounts_in_pool, failure=RuntimeError("pool unreadable"),
                    reserve_margin=c.reserve_margin)
    assert live.call is not None
    again = evaluate_call(call_of(json.loads(json.dumps(call_json(live.call)))))
    assert again == live and again.sentence == live.sentence and again.windows == live.windows


def test_a_call_of_another_version_is_refused_by_name() -> None:
    data = call_json(call())
    for broken in ({**data, "v": 2}, {**data, "fleet": {}}, {**data, "windows": [{"window": "monthly"}]}):
        try:
            call_of(broken)
        except UnreadableCall:
            continue
        raise AssertionError(f"read {broken}")


# ---- a replay at the recorded settings --------------------------------------------------------

steps = st.lists(st.tuples(st.integers(1, 4), st.floats(min_value=0, max_value=9), fractions, st.integers(0, 12),
                           money, st.sampled_from(["turn", "turn", "ceiling_resume", "ceiling_pause", "ceiling_kept"]),
                           st.booleans()), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps, st.integers(1, 10))
def test_a_replay_at_the_recorded_settings_reproduces_every_decision(steps: list, max_sessions: int) -> None:  # type: ignore[type-arg]  # hypothesis' tuples
    minute, asks, edges, sweeps = 0.0, [], [], []
    running: set[int] = set()
    for i, (sid, gap, u5, slots, burn, event, flip) in enumerate(steps):
        minute += gap
        c = call(u5, slots=slots, burn=burn, max_sessions=max_sessions, running=sid in running)
        a = asked(i, sid, minute, c, event)
        asks.append(a)
        if a.allowed and sid not in running:
            running.add(sid)
            edges.append(edge(sid, minute, True))
        elif flip and sid in running:
            running.discard(sid)
            edges.append(edge(sid, minute + 1, False))
        if i % 5 == 0:
            sweep = call(u5, slots=slots, burn=burn, cand=0.0, max_sessions=max_sessions)
            sweeps.append(Swept(T0 + timedelta(minutes=minute), sweep, evaluate_call(sweep).reason.value))
    answer = replay(record(asks, edges, sweeps, hours=7), Settings())
    assert (answer.decisions_changed, answer.reasons_changed, answer.sessions_changed) == (0, 0, 0)
    assert answer.decisions_replayed == len(asks)
    for h in answer.hours:
        assert h.recorded == h.replayed
        assert (h.held_instead, h.admitted_instead) == (0, 0)


# ---- other settings --------------------------------------------------------------------------

def test_a_lower_reserve_admits_what_the_spot_budget_held_and_a_higher_one_holds_it() -> None:
    # 75% spent of the 5-hour window: with the recorded 20% reserve the spot budget (80%) has
    # room for 5 points; the candidate's 10 minutes at $10/min on $1,000 is 10 points: held.
    held = asked(1, 7, 10, call(0.75, cand=10.0))
    assert (held.allowed, held.ceiling) == (False, "spot_budget")
    lower = replay(record([held], [edge(7, 70, True), edge(7, 100, False)]), Settings(reserve_five_hour=0.1))
    assert (lower.decisions_changed, lower.hours[0].admitted_instead) == (1, 1)
    assert lower.differently[0].replayed == "admitted"
    assert lower.hours[0].replayed.held_minutes == {} and lower.hours[0].recorded.held_minutes["spot_budget"] == 50

    admitted = asked(1, 7, 10, call(0.5, cand=1.0))
    assert admitted.allowed
    higher = replay(record([admitted], [edge(7, 10, True), edge(7, 40, False)]), Settings(reserve_five_hour=0.6))
    assert (higher.decisions_changed, higher.hours[0].held_instead) == (1, 1)
    assert higher.hours[0].replayed.held_minutes["spot_budget"] > 0
    assert higher.hours[0].replayed.peak_running == 0 and higher.hours[0].recorded.peak_running == 1


def test_gating_off_holds_nothing() -> None:
    asks = [asked(i, i, 5 * i, call(0.95, slots=9, max_sessions=9)) for i in range(1, 6)]
    assert not any(a.allowed for a in asks)
    answer = replay(record(asks), Settings(gating_enabled=False))
    assert answer.decisions_changed == 5 and sum(h.replayed.held for h in answer.hours) == 0


def test_what_the_replay_runs_differently_is_carried_to_the_next_decision() -> None:
    """Session 1 held by the spot budget at 10:00 (admitted at 10:40 in the record); session 2 finds
    the fleet empty at 10:20. A lower reserve admits session 1 at 10:00, so with one slot session 2
    finds it taken: held for the fleet cap, a decision its own recorded call never saw."""
    one = asked(1, 1, 0, call(0.7995, cand=0.1, max_sessions=1))
    two = asked(2, 2, 20, call(0.3, cand=0.1, max_sessions=1))
    assert not one.allowed and two.allowed
    edges = [edge(2, 20, True), edge(2, 35, False), edge(1, 40, True), edge(1, 100, False)]
    answer = replay(record([one, two], edges), Settings(reserve_five_hour=0.1))
    assert answer.decisions_changed == 2
    kinds = {(d.session_id, d.recorded, d.replayed) for d in answer.differently}
    assert kinds == {(1, "held", "admitted"), (2, "admitted", "held")}
    # Held from 0:20, re-checked on the ladder at 0:30:30 and 0:51 (session 1 runs its 60 minutes
    # to 1:00), let through at 1:21:30 (the fleet cap's 30-minute rung): 61.5 minutes held.
    assert answer.hours[0].replayed.held_minutes == {"fleet_cap": 40.0}
    assert answer.hours[1].replayed.held_minutes == {"fleet_cap": 21.5}
    assert answer.hours[1].replayed.admitted == 1


def test_a_session_the_replay_holds_rechecks_on_the_ladder_and_runs_its_recorded_length() -> None:
    """Admitted at 0:00 and run 30 minutes in the record; a higher reserve holds it; the windows read
    lower from 0:05 on (a sweep), so the ladder's first re-check (10 min + 30 s) admits it, and it
    then runs its 30 minutes: the replay's peak is still one, and it waited 10.5 minutes."""
    first = asked(1, 1, 0, call(0.45))
    sweep = call(0.1, cand=0.0)
    answer = replay(record([first], [edge(1, 0, True), edge(1, 30, False)],
                           [Swept(T0 + timedelta(minutes=5), sweep, Reason.WITHIN_LIMITS.value)]),
                    Settings(reserve_five_hour=0.6))
    wait = hold_delay(Reason.AT_UTILIZATION_LIMIT, 1, LADDER_JITTER).total_seconds() / 60
    assert answer.hours[0].replayed.held_minutes == {"spot_budget": wait}
    assert answer.hours[0].replayed.admitted == 1 and answer.hours[0].replayed.held == 1
    assert answer.hours[0].replayed.peak_running == 1


def test_a_sweep_the_replay_pauses_on_pauses_the_spot_work_it_has_running() -> None:
    """The record's sweep at 0:30 found room; at a 70% reserve it has none, so the replay pauses
    the running spot session (not the priority one); a sweep with room at 1:00 resumes it."""
    start = asked(1, 1, 0, call(0.2, reserve5=0.2))
    tight, roomy = call(0.5, cand=0.0), call(0.05, cand=0.0)
    sweeps = [Swept(T0 + timedelta(minutes=30), tight, evaluate_call(tight).reason.value),
              Swept(T0 + timedelta(minutes=60), roomy, evaluate_call(roomy).reason.value)]
    edges = [edge(1, 0, True), edge(9, 0, True, exempt="priority"), edge(1, 90, False), edge(9, 90, False)]
    answer = replay(record([start], edges, sweeps), Settings(reserve_five_hour=0.7))
    assert answer.hours[0].replayed.paused == 1 and answer.hours[0].replayed.paused_minutes == 30
    assert answer.hours[0].held_instead == 1 and answer.differently[0].session_id == 1
    assert answer.hours[1].replayed.admitted == 1  # resumed by the sweep at 1:00
    assert answer.hours[0].recorded.paused == 0


def test_an_hour_boundary_splits_the_minutes_held() -> None:
    held = asked(1, 1, 45, call(0.95))
    answer = replay(record([held], [edge(1, 75, True), edge(1, 80, False)]), Settings())
    assert answer.hours[0].recorded.held_minutes == {"spot_budget": 15}
    assert answer.hours[1].recorded.held_minutes == {"spot_budget": 15}


def test_what_a_window_had_left_when_it_reset_in_both_histories() -> None:
    before = asked(1, 1, 0, call(0.6, mins5=20))
    after = asked(2, 1, 30, call(0.05, mins5=290))
    answer = replay(record([before, after]), Settings(reserve_five_hour=0.1))
    [reset] = [r for r in answer.resets if r.left.window is FIVE]
    assert reset.at == T0 + timedelta(minutes=20)
    assert (reset.left.recorded, reset.left.replayed) == (200.0, 300.0)  # (0.8 - 0.6) and (0.9 - 0.6) of $1,000


def test_gaps_name_what_the_record_lacks() -> None:
    until = T0 + timedelta(hours=2)
    assert gaps(T0, until, None, []) == [(T0, until, NO_SWEEP)]
    sweeps = [T0 + timedelta(minutes=m) for m in range(60, 121, 5)]
    last_unrecorded = T0 + timedelta(minutes=30)
    recorded = last_unrecorded + timedelta(microseconds=1)
    assert gaps(T0, until, last_unrecorded, sweeps) == [(T0, recorded, NOT_RECORDED), (recorded, sweeps[0], NO_SWEEP)]
    assert gaps(T0, until, None, sweeps[:1] + sweeps) == [(T0, sweeps[0], NO_SWEEP)]


def test_a_decision_recorded_without_its_call_is_counted_and_not_asked() -> None:
    c = call(0.95)
    old = asked(1, 1, 5, c)
    old = Asked(old.id, old.session_id, old.at, old.event, old.allowed, old.reason, old.ceiling, None)
    # Started without asking the gate: not a gate decision at all.
    passed = Asked(2, 1, T0 + timedelta(minutes=50), "turn", True, "passed", None, None)
    answer = replay(record([old, passed, asked(3, 2, 60, call(0.1))]), Settings(reserve_five_hour=0.0))
    assert (answer.not_replayed, answer.not_recorded_until, answer.decisions_replayed) == (1, old.at, 1)
