"""The spot gate: one pure function from a snapshot to a decision (seed 004, "The gate",
"There is always room for one session", "Before the first calibration", "The concurrency
limit", "Fail-open"; arithmetic from DESIGN §9). Every surface renders this decision; there is
no second copy of the rule.

Per readable window w: capacity C (dollars, or 1.0 before calibration, when everything is a
fraction of the window), reserve r, budget B = (1 − r)·C, spent S = u·C, left L = B − S, time
left T, sustainable rate L/T. Fleet burn F, candidate burn b (per minute, in the window's unit).
  cap:  S + (F + b)·10 min ≤ B          absolute; protects the priority reserve; never waived
  pace: F + b ≤ L / T                    waived when nothing at all is running (room for one)
  slot: running < max sessions           skipped for a session that is already running

Fail open on the reading, never on the cap (DESIGN §9): `no_snapshot` and `unavailable` are about
the quota reading, so they decide only the cap and the pace. The running count is the service's
own, read under its lock, so the slot check runs whenever it was read; a blind gate still keeps
`max_sessions`. When a window is readable the quota checks name the reason first (a session held
for both waits on the longer ladder, and the ceiling sweep pauses on it).

Every decision carries the call it was made from (`GateCall`: the policy, the windows, the fleet,
the candidate, the margin): the decision log records it, and the policy dry-run (`replay.py`)
asks `evaluate_call` again with other settings, so a replay and the live gate are one function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from zimmer_spot_gate.domain.model import Ceiling, Reason, Window

PROJECTION_MINUTES = 10.0  # the re-check interval the cap projects spend over
RESUME_MARGIN = 0.05  # resuming paused work needs 5 points of the window to spare
_EPS = 1e-9


@dataclass(frozen=True)
class Policy:
    gating_enabled: bool = True
    reserve: dict[Window, float] = field(default_factory=lambda: {Window.FIVE_HOUR: 0.2, Window.SEVEN_DAY: 0.1})
    max_sessions: int = 10


@dataclass(frozen=True)
class WindowState:
    window: Window
    utilization: float  # pooled, 0..1
    minutes_to_reset: float
    capacity_dollars: float | None = None  # None: not calibrated, reason in fractions
    # Before calibration the fleet's burn is the observed utilization rate (fraction/min).
    observed_rate: float = 0.0
    accounts_rolled_over: int = 0  # counted as 0: their window reset after their last reading


@dataclass(frozen=True)
class FleetState:
    """What is running against the Claude windows: Claude Code sessions of any class. Codex
    sessions spend nothing against a Claude window and status-summary forks are Zimmer's own
    seconds-long bookkeeping, so neither takes a slot, adds to the burn, or keeps the fleet
    from being idle."""

    running_slots: int
    burn_dollars_per_minute: float  # sum of those sessions' burn rates


@dataclass(frozen=True)
class Candidate:
    burn_dollars_per_minute: float = 0.0
    already_running: bool = False


@dataclass(frozen=True)
class Snapshot:
    policy: Policy
    windows: tuple[WindowState, ...]  # only the windows some account could read
    fleet: FleetState
    candidate: Candidate
    accounts_averaged: int = 0
    accounts_in_pool: int = 0


@dataclass(frozen=True)
class WindowNumbers:
    window: Window
    calibrated: bool
    utilization: float
    capacity: float
    reserve_fraction: float
    budget: float
    spent: float
    left: float
    minutes_to_reset: float
    sustainable_rate: float
    fleet_burn: float
    candidate_burn: float
    projected: float
    cap_ok: bool
    pace_ok: bool
    pace_waived: bool


@dataclass(frozen=True)
class GateCall:
    """Everything one decision is made from: what the decision log records and a replay asks again.
    `windows` None: the pool could not be read (`failure` says why, as the sentence words it)."""

    policy: Policy
    windows: tuple[WindowState, ...] | None
    fleet: FleetState
    candidate: Candidate
    accounts_averaged: int = 0
    accounts_in_pool: int = 0
    failure: str | None = None
    reserve_margin: float = 0.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: Reason
    ceiling: Ceiling | None
    sentence: str
    windows: tuple[WindowNumbers, ...] = ()
    accounts_averaged: int = 0
    accounts_in_pool: int = 0
    holding_window: Window | None = None
    call: GateCall | None = field(default=None, compare=False)  # what it was decided from (None: built by hand)


def window_numbers(w: WindowState, policy: Policy, fleet: FleetState, candidate: Candidate,
                   reserve_margin: float = 0.0) -> WindowNumbers:
    calibrated = w.capacity_dollars is not None and w.capacity_dollars > 0
    capacity = float(w.capacity_dollars) if calibrated else 1.0
    reserve = min(1.0, max(0.0, policy.reserve.get(w.window, 0.0) + reserve_margin))
    u = min(1.0, max(0.0, w.utilization))
    budget = (1.0 - reserve) * capacity
    spent = u * capacity
    left = budget - spent
    minutes = max(w.minutes_to_reset, 1.0)
    sustainable = left / minutes
    if calibrated:
        fleet_burn, candidate_burn = fleet.burn_dollars_per_minute, candidate.burn_dollars_per_minute
    else:
        # Only the burn-rate projection is unavailable before calibration: the fleet's burn is
        # what utilization is observed to climb by, and the candidate's own share is unknown.
        fleet_burn, candidate_burn = max(0.0, w.observed_rate), 0.0
    if candidate.already_running:
        candidate_burn = 0.0  # already inside the fleet's burn
    projected = spent + (fleet_burn + candidate_burn) * PROJECTION_MINUTES
    cap_ok = projected <= budget + _EPS and left > _EPS
    waived = fleet.running_slots == 0
    pace_ok = waived or fleet_burn + candidate_burn <= sustainable + _EPS
    return WindowNumbers(w.window, calibrated, u, capacity, reserve, budget, spent, left, minutes, sustainable,
                         fleet_burn, candidate_burn, projected, cap_ok, pace_ok, waived)


def decide(snap: Snapshot, *, reserve_margin: float = 0.0) -> Decision:
    """The decision for one spot candidate (priority, Codex and status-summary forks never ask)."""
    common = {"accounts_averaged": snap.accounts_averaged, "accounts_in_pool": snap.accounts_in_pool}
    if not snap.policy.gating_enabled:
        return Decision(True, Reason.GATING_DISABLED, None, "Allowed: spot gating is turned off.", **common)
    if not snap.windows:
        return _blind(snap.policy, snap.fleet, snap.candidate, Reason.NO_SNAPSHOT,
                      "there is no Claude Code quota reading to decide on", common)
    numbers = tuple(window_numbers(w, snap.policy, snap.fleet, snap.candidate, reserve_margin) for w in snap.windows)
    rolled = max((w.accounts_rolled_over for w in snap.windows), default=0)
    pooled = (f" (pool average of {snap.accounts_averaged} of {snap.accounts_in_pool} accounts"
              + (f"; {rolled} whose window reset since its last reading counted as 0 until read again" if rolled else "")
              + ")")
    for n in numbers:
        if not n.cap_ok:
            return Decision(False, Reason.AT_UTILIZATION_LIMIT, Ceiling.SPOT_BUDGET, _cap_sentence(n) + pooled,
                            numbers, holding_window=n.window, **common)
    for n in numbers:
        if not n.pace_ok:
            return Decision(False, Reason.AT_UTILIZATION_LIMIT, Ceiling.PACING_CURVE, _pace_sentence(n) + pooled,
                            numbers, holding_window=n.window, **common)
    full = _slots_full(snap.policy, snap.fleet, snap.candidate, numbers, common)
    if full is not None:
        return full
    if all(n.pace_waived for n in numbers):
        room = ("every window has room for the next 10 minutes, and the pace check is waived because nothing at "
                "all is running (there is always room for one session)")
    else:
        room = "every window has room and is inside its pacing curve"
    return Decision(True, Reason.WITHIN_LIMITS, None,
                    f"Allowed: {room}; {_free(snap.policy, snap.fleet, snap.candidate)}{pooled}.", numbers, **common)


def _slots_full(policy: Policy, fleet: FleetState, candidate: Candidate, numbers: tuple[WindowNumbers, ...],
                common: dict[str, int]) -> Decision | None:
    """The slot check: held when every slot is taken, unless the session is already running (it
    is counted in the fleet itself)."""
    slots, cap = fleet.running_slots, policy.max_sessions
    if candidate.already_running or slots < cap:
        return None
    return Decision(False, Reason.FLEET_AT_CAP, Ceiling.FLEET_CAP,
                    f"Held: all {cap} session slots are taken ({slots} running), by spot work, priority work or both.",
                    numbers, **common)


def _free(policy: Policy, fleet: FleetState, candidate: Candidate) -> str:
    if candidate.already_running:
        return "the session is already running, so it needs no free slot"
    return f"{policy.max_sessions - fleet.running_slots} of {policy.max_sessions} session slots are free"


def _blind(policy: Policy, fleet: FleetState, candidate: Candidate, reason: Reason, why: str,
           common: dict[str, int]) -> Decision:
    """No quota reading to decide on: the slot check still holds, the quota checks fail open."""
    full = _slots_full(policy, fleet, candidate, (), common)
    if full is not None:
        return full
    return Decision(True, reason, None, f"Allowed: {why}, so the quota checks fail open; "
                    f"{_free(policy, fleet, candidate)}.", **common)


def failure_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def decide_unreadable(policy: Policy, fleet: FleetState, candidate: Candidate, exc: BaseException | str) -> Decision:
    """The pool's side of the gate's inputs could not be read (or the decision could not be
    evaluated): `unavailable` for the quota checks, while the slot check, on the running count
    read under the lock, still holds. `exc` is the error, or its words as a call recorded them."""
    if not policy.gating_enabled:
        return Decision(True, Reason.GATING_DISABLED, None, "Allowed: spot gating is turned off.")
    why = exc if isinstance(exc, str) else failure_text(exc)
    return _blind(policy, fleet, candidate, Reason.UNAVAILABLE, f"the quota reading could not be evaluated ({why})", {})


def evaluate(policy: Policy, windows: tuple[WindowState, ...] | None, fleet: FleetState, candidate: Candidate, *,
             accounts_averaged: int = 0, accounts_in_pool: int = 0, failure: BaseException | None = None,
             reserve_margin: float = 0.0) -> Decision:
    """The one evaluation every caller makes (admissions, the ceiling sweep, start now, the policy
    view): `windows` None means the pool could not be read (`failure` says why). An error while
    deciding fails open on the quota checks as `unavailable`, never on the slot check."""
    why = None if windows is not None else failure_text(failure or RuntimeError("no pool reading"))
    return evaluate_call(GateCall(policy, windows, fleet, candidate, accounts_averaged, accounts_in_pool, why,
                                  reserve_margin))


def evaluate_call(call: GateCall) -> Decision:
    """`evaluate` over one recorded call: the live gate and the dry-run's replay both end here."""
    if call.windows is None:
        d = decide_unreadable(call.policy, call.fleet, call.candidate, call.failure or "RuntimeError: no pool reading")
    else:
        try:
            d = decide(Snapshot(call.policy, call.windows, call.fleet, call.candidate, call.accounts_averaged,
                                call.accounts_in_pool), reserve_margin=call.reserve_margin)
        except Exception as exc:  # noqa: BLE001 - fail open on the reading, and say why
            d = decide_unreadable(call.policy, call.fleet, call.candidate, exc)
    return replace(d, call=call)


WINDOW_NAMES = {Window.FIVE_HOUR: "5-hour", Window.SEVEN_DAY: "7-day"}
_NOT_CALIBRATED = " (not calibrated: fractions of the window, the fleet burn estimated from the pool readings)"


def _amount(n: WindowNumbers, value: float) -> str:
    return f"${value:,.2f}" if n.calibrated else f"{value * 100:.1f}%"


def _rate(n: WindowNumbers, value: float) -> str:
    return f"${value:,.2f}/min" if n.calibrated else f"{value * 100:.2f}%/min"


def _cap_sentence(n: WindowNumbers) -> str:
    name = WINDOW_NAMES[n.window]
    projected = "projected" if n.calibrated else "estimated"
    return (f"Held: the {name} window's spot budget has no room: {_amount(n, n.spent)} spent and "
            f"{_amount(n, n.projected)} {projected} over the next 10 minutes against a budget of "
            f"{_amount(n, n.budget)}, with {n.reserve_fraction * 100:.0f}% kept for priority work"
            f"{'' if n.calibrated else _NOT_CALIBRATED}")


def _pace_sentence(n: WindowNumbers) -> str:
    name = WINDOW_NAMES[n.window]
    burn = "would burn" if n.calibrated else "is estimated to burn"
    return (f"Held: the fleet {burn} {_rate(n, n.fleet_burn + n.candidate_burn)} against the {name} window's "
            f"sustainable {_rate(n, n.sustainable_rate)} ({_amount(n, n.left)} left over "
            f"{n.minutes_to_reset:.0f} minutes): ahead of the pacing curve"
            f"{'' if n.calibrated else _NOT_CALIBRATED}")
