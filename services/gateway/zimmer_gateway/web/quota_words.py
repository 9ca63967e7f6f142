"""The Quotas page's words for numbers that can look wrong (issue 32 #3), as pure functions over
the `get_spot_policy` answer: a negative budget said as how far into the reserve it went, a
running count above the cap and held sessions under "Work is not blocked" explained, "no reset
recorded" instead of a window's length, each account's status, windows and reading age.

Seed 004: "an estimate is never presented as a measurement" (the template marks every dollar
figure "estimate, calibrated at …"; `money` says "not calibrated", never $0.00) and the page
reads the same answer the gate decides on, so nothing here decides anything."""

from __future__ import annotations

from zimmer_common.contracts import spot_policy as p
from zimmer_gateway.web.words import duration

WINDOW_NAMES = {"five_hour": "5-hour", "seven_day": "7-day"}
WINDOW_LENGTHS = {"five_hour": "5 hours", "seven_day": "7 days"}
STATUS_WORDS = {
    "active": "active",
    "quota_exceeded": "quota exceeded",
    "needs_reauth": "needs sign-in",
}
STATUS_NOTES = {
    "active": "",
    "quota_exceeded": "The runtime reported it out of quota.",
    "needs_reauth": ("Needs a human to sign in again: Zimmer cannot serve from it now. Its windows still count in "
                     "the pool average (they keep draining while it waits), and its room is real again once someone "
                     "signs it back in."),
}
# A held session's re-check backs off (seed 004 "Consecutive holds back off"): 10 min doubling to
# these ceilings, by hold reason.
RECHECK_CEILING = {"at_utilization_limit": "1 h", "fleet_at_cap": "30 min"}
_EPS = 0.005  # half a cent, or half a hundredth of a percent: below this a figure is zero


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def usd(x: float) -> str:
    return f"${round(abs(x), 2) + 0.0:,.2f}"


def percent(x: float, digits: int = 1) -> str:
    return f"{round(x * 100, digits) + 0.0:.{digits}f}%"


def money(window: p.WindowPosture, dollars: float | None) -> str:
    """Dollars once calibrated; never $0.00 for "not calibrated" (seed 004)."""
    return "not calibrated" if not window.calibrated or dollars is None else usd(dollars)


def budget_left(w: p.WindowPosture) -> str:
    """Spot budget left: a figure below zero is how far spend went past the spot budget, into the
    priority reserve, never a bare "-$12.00"."""
    if w.calibrated and w.spot_budget_left_dollars is not None:
        left = w.spot_budget_left_dollars
        return f"{usd(left)} into the priority reserve" if left < -_EPS else ("none left" if left < _EPS else usd(left))
    f = w.spot_budget_left_fraction
    if f < -_EPS / 100:
        return f"{percent(-f)} of the window into the priority reserve"
    return "none left" if f < _EPS / 100 else f"{percent(f)} of the window"


def budget_left_note(w: p.WindowPosture) -> str | None:
    """Why the figure reads as it does, when it is at or below zero."""
    name = WINDOW_NAMES[w.window]
    if w.spot_budget_left_fraction >= _EPS / 100:
        return None
    if w.spot_budget_left_fraction > -_EPS / 100:
        return (f"The {name} window's spot budget is spent: spot work waits for the window to reset, "
                "and the priority reserve is untouched.")
    return (f"Spend in the {name} window has passed the spot budget: priority work (which the gate never holds) "
            f"or spot work already running when the budget ran out has used part of the {percent(w.reserve_percent / 100, 0)} "
            "priority reserve (or the reserve was raised above what was left). Spot work waits for the window to reset; "
            "priority work keeps running.")


def rate(w: p.WindowPosture, value: float) -> str:
    return f"${value:,.4f}/min" if w.calibrated else f"{percent(value, 4)} of the window/min"


def fleet_burn_note(v: p.PolicyView, w: p.WindowPosture) -> str | None:
    """Why the fleet's burn reads zero while sessions run."""
    if w.fleet_burn > 0 or v.running_slots == 0:
        return None
    if w.calibrated:
        return (f"Zero with {plural(v.running_slots, 'session')} running: no burn rate has been measured yet (rates "
                "come from sessions' recorded spend, recomputed every 20 minutes), so the gate projects no spend for them.")
    return ("Zero: the pool's readings have not climbed over the last 30 minutes (or span less than 5), so no burn is "
            "estimated from them.")


def sustainable(w: p.WindowPosture) -> str:
    """The pacing curve's rate: spot budget left ÷ time left, so a spent budget has none."""
    if w.sustainable_rate <= 0 or w.spot_budget_left_fraction <= 0:
        return "none: the spot budget is spent"
    return rate(w, w.sustainable_rate)


def resets_in(w: p.WindowPosture) -> str:
    """When the window resets, or that nothing recorded it: the minutes the pace assumes are then
    the whole window's length, which is not a time anything recorded."""
    return f"in {duration(w.minutes_to_reset * 60)}" if w.reset_recorded else "no reset recorded"


def resets_note(w: p.WindowPosture) -> str:
    name = WINDOW_NAMES[w.window]
    if not w.reset_recorded:
        return (f"No account recorded when its {name} window resets, so the pacing curve assumes the whole "
                f"{WINDOW_LENGTHS[w.window]} remain (the slowest pace).")
    if w.accounts_averaged > 1:
        return f"The mean over the {w.accounts_averaged} accounts read; each account's own reset is in the table above."
    return "As the account recorded it."


def running_note(v: p.PolicyView) -> str | None:
    """Why more sessions run than the cap allows (seed 004 "The concurrency limit": checked when a
    session starts and never again; priority sessions start even with every slot taken)."""
    over = v.running_slots - v.max_sessions
    if over <= 0:
        return None
    priority = v.running.get("priority", 0)
    waits = ("no spot session starts while it is 0" if v.max_sessions == 0 else
             "no spot session starts until none is running" if v.max_sessions == 1 else
             f"no spot session starts until fewer than {v.max_sessions} are running")
    return (f"{plural(over, 'session')} over the cap of {v.max_sessions}. The cap is checked only when a session "
            "starts: sessions already running when it was lowered keep running (lowering it never interrupts work "
            f"underway), and priority sessions start even with every slot taken ({priority} priority running now). "
            f"Nothing is stopped; {waits}.")


def _held_why(v: p.PolicyView) -> str:
    d = v.decision
    if d.reason == "fleet_at_cap":
        return (f"every session slot is taken ({v.running_slots} running, cap {v.max_sessions}); they start as "
                "slots free")
    if d.ceiling == "spot_budget":
        return ("the pool's spot budget is spent: the gate decides on the average of every account, and that "
                "average has reached the priority reserve even though one account alone still has room")
    if d.ceiling == "pacing_curve":
        return ("the fleet is spending faster than the pacing curve allows (spot budget left ÷ time left); "
                "they start as the curve catches up, usually within minutes")
    return f"the gate says {d.reason}"


def held_note(v: p.PolicyView) -> str | None:
    """Reconciles the banner with the held counts: "Work is not blocked" says an account has room on
    both windows now; the gate decides for the whole pool (average, reserve, pace, slots), and a
    held session waits for its own backed-off re-check."""
    held = sum(v.held.values())
    if held == 0:
        return None
    who = plural(held, "spot session")
    lead = ("“Work is not blocked” means an account has room on both windows right now; "
            if v.unblock.state == "not_blocked" else "")
    if v.decision.allowed:
        ceilings = " and ".join(f"{RECHECK_CEILING[r]} for {r}" for r, n in sorted(v.held.items())
                                if n and r in RECHECK_CEILING)
        return (f"{lead}{who} still wait{'s' if held == 1 else ''} because each was held earlier and starts at "
                f"its next re-check: the gate would admit a new one now, and a held session re-checks on a "
                f"backed-off timer (10 min, doubling up to {ceilings or '1 h'}). Start now on the Ranked page "
                "takes one at once.")
    return f"{lead}{who} {'is' if held == 1 else 'are'} held because {_held_why(v)}."


# ---- each account -------------------------------------------------------------------------------


def reading_age(a: p.AccountView) -> str:
    if a.reading_age_seconds is None:
        return "never read"
    return "just now" if a.reading_age_seconds < 1 else f"{duration(a.reading_age_seconds)} ago"


def stale_note(a: p.AccountView, stale_after_minutes: float) -> str | None:
    if a.read_at is None:
        return "No reading yet: it is left out of every average until the sampler reads it."
    if not a.stale:
        return None
    return (f"Stale: older than {duration(stale_after_minutes * 60)}, when the usage sampler re-reads an account, "
            "so its last sample failed. The average still uses this reading.")


def account_window(w: p.AccountWindowView | None, window: str) -> str:
    """An account's window as read, and what the pool average counts when that differs."""
    if w is None:
        return "not read"
    read = percent(w.utilization)
    if window == "five_hour" and w.counted_as >= 1 and w.utilization < 1:
        return f"{read}; counted as 100%: its week is spent, so this room cannot be served"
    if w.rolled_over:
        return f"{read} before its reset; counted as 0% until read again"
    if w.utilization > 1:
        return f"{read}: past the window's cap, counted as 100%"
    return read


def account_note(a: p.AccountView) -> str:
    """Its status in a sentence, and when it serves again if it is out."""
    parts = [STATUS_NOTES[a.status]] if STATUS_NOTES[a.status] else []
    if a.out_of_capacity and a.back_at is None:
        parts.append("A spent window recorded no reset, so nothing says when it serves again.")
    return " ".join(parts)


def accounts_line(v: p.PolicyView) -> str:
    """Every account in one line, for get_spot_policy's summary (the page's table in words)."""
    if not v.accounts:
        return "Accounts: none has reported a quota reading yet."

    def one(a: p.AccountView) -> str:
        status = STATUS_WORDS[a.status] + (" (cannot serve until a human signs in again)"
                                           if a.status == "needs_reauth" else "")
        read = "never read" if a.read_at is None else f"read {reading_age(a)}" + (", stale" if a.stale else "")
        return (f"{a.account}{' (serving)' if a.serving else ''}: {status}; 5-hour {account_window(a.five_hour, 'five_hour')}; "
                f"7-day {account_window(a.seven_day, 'seven_day')}; {read}")

    return "Accounts: " + " | ".join(one(a) for a in v.accounts) + "."
