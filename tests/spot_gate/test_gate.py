"""The gate's arithmetic and reasons (seed 004 "The gate", "Fail-open"; DESIGN §9)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.gate import Candidate, FleetState, Policy, Snapshot, WindowState, decide, evaluate
from zimmer_spot_gate.domain.model import Ceiling, Reason, Window

FIVE, SEVEN = Window.FIVE_HOUR, Window.SEVEN_DAY
IDLE = FleetState(running_slots=0, burn_dollars_per_minute=0.0)


def snap(u5: float = 0.1, u7: float = 0.1, *, fleet: FleetState = IDLE, cand: Candidate | None = None,
         cap5: float | None = 1000.0, cap7: float | None = 10000.0, policy: Policy | None = None,
         minutes5: float = 240, minutes7: float = 2000, rate: float = 0.0) -> Snapshot:
    return Snapshot(policy or Policy(),
                    (WindowState(FIVE, u5, minutes5, cap5, rate), WindowState(SEVEN, u7, minutes7, cap7, rate)),
                    fleet, cand or Candidate(burn_dollars_per_minute=2.0), accounts_averaged=3, accounts_in_pool=4)


def test_fail_open_reasons() -> None:
    assert decide(snap(policy=Policy(gating_enabled=False), u5=1.0)).reason is Reason.GATING_DISABLED
    empty = Snapshot(Policy(), (), IDLE, Candidate())
    d = decide(empty)
    assert (d.allowed, d.reason) == (True, Reason.NO_SNAPSHOT)

    d = evaluate(Policy(), None, IDLE, Candidate(), failure=RuntimeError("pool unreadable"))
    assert (d.allowed, d.reason) == (True, Reason.UNAVAILABLE) and "pool unreadable" in d.sentence


FULL = FleetState(running_slots=3, burn_dollars_per_minute=0.0)


def test_a_blind_gate_keeps_the_cap() -> None:
    """Seed 004 "A free slot": "Skipped only for a session that is already running when the gate
    runs." The fail-open rule is about the quota reading ("a monitoring gap must not become an
    outage of all automated work"); keeping max_sessions causes no outage (issue 25 #1)."""
    policy = Policy(max_sessions=3)
    no_reading = decide(Snapshot(policy, (), FULL, Candidate()))
    assert (no_reading.allowed, no_reading.reason, no_reading.ceiling) == (False, Reason.FLEET_AT_CAP, Ceiling.FLEET_CAP)
    unreadable = evaluate(policy, None, FULL, Candidate(), failure=RuntimeError("pool unreadable"))
    assert (unreadable.allowed, unreadable.reason) == (False, Reason.FLEET_AT_CAP)
    # A session already running is counted in the fleet itself: the one exception.
    assert decide(Snapshot(policy, (), FULL, Candidate(already_running=True))).reason is Reason.NO_SNAPSHOT
    # A free slot: the quota checks fail open, and the sentence says how many slots are free.
    roomy = decide(Snapshot(policy, (), FleetState(2, 0.0), Candidate()))
    assert (roomy.allowed, roomy.reason) == (True, Reason.NO_SNAPSHOT) and "1 of 3 session slots are free" in roomy.sentence
    # Turned off, the gate holds nothing at all.
    assert decide(Snapshot(Policy(gating_enabled=False, max_sessions=3), (), FULL, Candidate())).allowed


def test_an_error_deciding_fails_open_on_the_reading_only() -> None:
    """An error while evaluating is `unavailable` for the quota checks, never past the cap."""
    bad = (WindowState(FIVE, 0.1, None, 1000.0),)  # type: ignore[arg-type]  # no time left: max() raises
    assert evaluate(Policy(max_sessions=3), bad, FULL, Candidate()).reason is Reason.FLEET_AT_CAP
    d = evaluate(Policy(max_sessions=3), bad, IDLE, Candidate())
    assert (d.allowed, d.reason) == (True, Reason.UNAVAILABLE) and "TypeError" in d.sentence


def test_within_limits_names_the_pool() -> None:
    d = decide(snap())
    assert (d.allowed, d.reason, d.ceiling) == (True, Reason.WITHIN_LIMITS, None)
    assert "3 of 4 accounts" in d.sentence and "10 of 10 session slots are free" in d.sentence


def test_cap_protects_the_reserve_absolutely() -> None:
    # 5-hour: capacity $1000, reserve 20% → budget $800; $790 spent, +$2/min·10 → $810 > $800.
    d = decide(snap(u5=0.79))
    assert (d.allowed, d.reason, d.ceiling, d.holding_window) == (False, Reason.AT_UTILIZATION_LIMIT, Ceiling.SPOT_BUDGET, FIVE)
    assert "$800.00" in d.sentence


def test_idle_fleet_facing_a_spent_budget_is_still_held() -> None:
    d = decide(snap(u5=0.85))
    assert not d.allowed and d.ceiling is Ceiling.SPOT_BUDGET


def test_room_for_one_when_the_whole_fleet_is_idle() -> None:
    # $100 left over 240 min: sustainable $0.42/min, the session burns $2/min. Idle: pace waived.
    idle = decide(snap(u5=0.7))
    assert idle.allowed and idle.windows[0].pace_waived
    busy = FleetState(running_slots=1, burn_dollars_per_minute=2.0)
    d = decide(snap(u5=0.7, fleet=busy))
    assert (d.allowed, d.ceiling) == (False, Ceiling.PACING_CURVE) and "pacing curve" in d.sentence


def test_priority_work_running_counts_as_the_fleet_not_idle() -> None:
    # A priority session running (not a slot-holding spot one) still un-waives the pace check.
    priority_running = FleetState(running_slots=1, burn_dollars_per_minute=0.0)
    assert decide(snap(u5=0.7, fleet=priority_running)).ceiling is Ceiling.PACING_CURVE


def test_fleet_at_cap_and_running_sessions_skip_the_slot_check() -> None:
    full = FleetState(running_slots=10, burn_dollars_per_minute=0.0)
    d = decide(snap(fleet=full))
    assert (d.allowed, d.reason, d.ceiling) == (False, Reason.FLEET_AT_CAP, Ceiling.FLEET_CAP)
    assert decide(snap(fleet=full, cand=Candidate(2.0, already_running=True))).allowed


def test_utilization_outranks_the_slot_as_the_reason() -> None:
    full = FleetState(running_slots=10, burn_dollars_per_minute=0.0)
    assert decide(snap(u5=0.95, fleet=full)).reason is Reason.AT_UTILIZATION_LIMIT


def test_before_calibration_the_gate_reasons_in_fractions() -> None:
    d = decide(snap(u5=0.79, cap5=None, rate=0.002))  # 0.79 + 0.002·10 = 0.81 > 0.80
    assert not d.allowed and not d.windows[0].calibrated
    assert "%" in d.sentence and "$" not in d.sentence.split("(pool")[0] and "not calibrated" in d.sentence
    assert decide(snap(u5=0.5, cap5=None, rate=0.002)).allowed


def test_resume_margin_needs_five_more_points() -> None:
    # budget $800: $760 + $20 projected fits; with 5 more points kept back (budget $750) it does not.
    assert decide(snap(u5=0.76)).allowed
    assert not decide(snap(u5=0.76), reserve_margin=0.05).allowed


@st.composite
def snapshots(draw):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    running = draw(st.integers(0, 12))
    fleet = FleetState(running, draw(st.floats(0, 20)))
    windows = tuple(WindowState(w, draw(st.floats(0, 1)), draw(st.floats(1, 10080)),
                                draw(st.one_of(st.none(), st.floats(1, 1e5))), draw(st.floats(0, 0.01)))
                    for w in (FIVE, SEVEN))
    policy = Policy(True, {FIVE: draw(st.floats(0, 0.9)), SEVEN: draw(st.floats(0, 0.9))}, draw(st.integers(1, 20)))
    cand = Candidate(draw(st.floats(0, 10)), draw(st.booleans()))
    return Snapshot(policy, windows, fleet, cand, 2, 2)


def with_utilization(s: Snapshot, window: Window, u: float) -> Snapshot:
    windows = tuple(WindowState(w.window, u if w.window is window else w.utilization, w.minutes_to_reset,
                                w.capacity_dollars, w.observed_rate) for w in s.windows)
    return Snapshot(s.policy, windows, s.fleet, s.candidate, 2, 2)


@given(snapshots(), st.sampled_from([FIVE, SEVEN]), st.floats(0, 1))
def test_more_spend_never_admits_what_less_spend_held(s: Snapshot, window: Window, extra: float) -> None:
    w = next(x for x in s.windows if x.window is window)
    more = with_utilization(s, window, min(1.0, w.utilization + extra))
    if not decide(s).allowed:
        assert not decide(more).allowed


@given(snapshots())
def test_an_admission_never_projects_past_the_reserve(s: Snapshot) -> None:
    d = decide(s)
    if d.allowed:
        for n in d.windows:
            assert n.projected <= n.budget + 1e-6


@given(snapshots())
def test_reasons_and_ceilings_agree(s: Snapshot) -> None:
    d = decide(s)
    expected = {Reason.AT_UTILIZATION_LIMIT: {Ceiling.SPOT_BUDGET, Ceiling.PACING_CURVE},
                Reason.FLEET_AT_CAP: {Ceiling.FLEET_CAP}, Reason.WITHIN_LIMITS: {None}}
    assert d.ceiling in expected[d.reason]
    assert d.allowed == (d.reason is Reason.WITHIN_LIMITS)


@pytest.mark.parametrize("running", [0, 3])
def test_pace_waiver_keys_on_the_whole_fleet(running: int) -> None:
    """Seed 004 "There is always room for one session": the waiver keys on the whole fleet being
    idle (priority work running is work happening); what the fleet counts is Claude Code work,
    so Codex and status-summary forks never keep it from being idle (quota.fleet leaves them out)."""
    fleet = FleetState(running_slots=running, burn_dollars_per_minute=0.0)
    assert decide(snap(u5=0.7, fleet=fleet)).windows[0].pace_waived is (running == 0)


def test_sentences_say_what_decided() -> None:
    """Issue 8 #8, sentences that lie. An idle fleet is allowed because the pace check is waived
    (seed 004 "There is always room for one session"), not because it is "inside its pacing
    curve"; an uncalibrated pace sentence says it is in fractions of the window (seed 004 "Before
    the first calibration": an estimate is never presented as a measurement)."""
    idle = decide(snap())
    assert "pace check is waived because nothing at all is running" in idle.sentence
    assert "inside its pacing curve" not in idle.sentence
    busy = decide(snap(fleet=FleetState(running_slots=1, burn_dollars_per_minute=0.0)))
    assert "inside its pacing curve" in busy.sentence and "waived" not in busy.sentence
    running = decide(snap(cand=Candidate(already_running=True)))
    assert "the session is already running, so it needs no free slot" in running.sentence
    ahead = decide(snap(u5=0.5, cap5=None, fleet=FleetState(running_slots=1, burn_dollars_per_minute=0.0), rate=0.005))
    assert ahead.ceiling is Ceiling.PACING_CURVE and "not calibrated" in ahead.sentence
