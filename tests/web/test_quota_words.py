"""The Quotas page's explanations of numbers that can look wrong (issue 32 #3), as pure functions:
a negative budget said as how far into the reserve it went, "no reset recorded" instead of the
window's length, a running count over the cap explained, held sessions reconciled with "Work is
not blocked", each account's status, windows and reading age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_gateway.web import quota_words as words

NOW = datetime(2026, 8, 20, 10, 0, tzinfo=UTC)


def window(calibrated: bool = True, left: float = 0.3, **changes: Any) -> p.WindowPosture:
    fields: dict[str, Any] = dict(
        window="five_hour", calibrated=calibrated, capacity_dollars=400.0 if calibrated else None, utilization=0.5,
        accounts_averaged=3, reserve_percent=20, reserve_dollars=80.0 if calibrated else None,
        spot_budget_dollars=320.0 if calibrated else None,
        spot_budget_left_dollars=left * 400 if calibrated else None, spot_budget_left_fraction=left,
        minutes_to_reset=138, sustainable_rate=left * 400 / 138 if calibrated else left / 138, fleet_burn=0.1,
        calibrated_at=NOW if calibrated else None)
    return p.WindowPosture(**{**fields, **changes})


def policy(*, running: int = 3, cap: int = 6, priority: int = 1, held: dict[str, int] | None = None,
           reason: str = "within_limits", ceiling: str | None = None, unblock: str = "not_blocked") -> p.PolicyView:
    return p.PolicyView(
        gating_enabled=True, max_sessions=cap, windows=[window()], reserve_percent={"five_hour": 20.0},
        accounts_in_pool=3, running={"priority": priority, "spot": running - priority},
        held={"at_utilization_limit": 0, "fleet_at_cap": 0, **(held or {})}, running_slots=running,
        decision=c.DecisionView(allowed=reason not in ("fleet_at_cap", "at_utilization_limit"), reason=reason,
                                ceiling=ceiling, sentence="…"),
        unblock=p.UnblockView(state=unblock, at=None, accounts_out=0, accounts_read=3, sentence="…",  # type: ignore[arg-type]  # the test's states are the literal's
                              next_weekly_reset_at=None, accounts_week_spent=0),
        genesis_classes=[], triggers=[])


def test_a_negative_budget_says_how_far_into_the_reserve_it_went() -> None:
    over = window(left=-0.03)  # $12 past the spot budget
    assert words.budget_left(over) == "$12.00 into the priority reserve"
    assert "-" not in words.budget_left(over)
    note = words.budget_left_note(over) or ""
    assert "passed the spot budget" in note and "20%" in note and "priority reserve" in note
    assert words.budget_left(window(left=0.3)) == "$120.00" and words.budget_left_note(window(left=0.3)) is None
    assert words.budget_left(window(left=0.0)) == "none left"
    assert "spend it" not in (words.budget_left_note(window(left=0.0)) or "") and \
        "untouched" in (words.budget_left_note(window(left=0.0)) or "")
    uncalibrated = window(calibrated=False, left=-0.03)
    assert words.budget_left(uncalibrated) == "3.0% of the window into the priority reserve"
    assert words.budget_left(window(calibrated=False, left=0.25)) == "25.0% of the window"
    # The pacing curve's rate for a spent budget is none, never a negative $/min.
    assert words.sustainable(over) == "none: the spot budget is spent"
    assert words.sustainable(window(left=0.3)) == "$0.8696/min"


def test_not_calibrated_is_said_never_zero_dollars() -> None:
    assert words.money(window(calibrated=False), 0.0) == "not calibrated"
    assert words.money(window(), 400.0) == "$400.00"


def test_resets_in_says_when_no_reset_was_recorded() -> None:
    assert words.resets_in(window()) == "in 2 h 18 min"
    assert "mean over the 3 accounts" in words.resets_note(window())
    none = window(reset_recorded=False, minutes_to_reset=300)
    assert words.resets_in(none) == "no reset recorded"  # not "in 5 h", the window's length
    assert "assumes the whole 5 hours remain" in words.resets_note(none)


def test_running_over_the_cap_is_explained() -> None:
    assert words.running_note(policy(running=6, cap=6)) is None
    note = words.running_note(policy(running=11, cap=6, priority=4)) or ""
    assert note.startswith("5 sessions over the cap of 6.")
    assert "already running when it was lowered keep running" in note and "4 priority running now" in note
    assert "until fewer than 6 are running" in note
    assert "while it is 0" in (words.running_note(policy(running=2, cap=0)) or "")
    assert "until none is running" in (words.running_note(policy(running=2, cap=1)) or "")


def test_held_sessions_are_reconciled_with_work_is_not_blocked() -> None:
    assert words.held_note(policy()) is None  # nothing held: nothing to reconcile
    cap = words.held_note(policy(running=11, cap=6, held={"fleet_at_cap": 4}, reason="fleet_at_cap")) or ""
    assert cap.startswith("“Work is not blocked” means an account has room on both windows right now; 4 spot sessions")
    assert "every session slot is taken (11 running, cap 6)" in cap
    budget = words.held_note(policy(held={"at_utilization_limit": 1}, reason="at_utilization_limit",
                                     ceiling="spot_budget")) or ""
    assert "1 spot session is held because the pool's spot budget is spent" in budget and "average" in budget
    pace = words.held_note(policy(held={"at_utilization_limit": 2}, reason="at_utilization_limit",
                                   ceiling="pacing_curve", unblock="countdown")) or ""
    assert pace.startswith("2 spot sessions are held because the fleet is spending faster than the pacing curve")
    admitted = words.held_note(policy(held={"at_utilization_limit": 2, "fleet_at_cap": 1})) or ""
    assert "would admit a new one now" in admitted and "next re-check" in admitted
    assert "1 h for at_utilization_limit and 30 min for fleet_at_cap" in admitted


def account(status: str = "active", **changes: Any) -> p.AccountView:
    fields: dict[str, Any] = dict(
        account="acct-1", status=status, serving=False, read_at=NOW - timedelta(minutes=12),
        reading_age_seconds=720.0, stale=False, five_hour=None, seven_day=None, out_of_capacity=False, back_at=None)
    return p.AccountView(**{**fields, **changes})


def aw(utilization: float, counted: float, rolled: bool = False) -> p.AccountWindowView:
    return p.AccountWindowView(utilization=utilization, resets_at=NOW, rolled_over=rolled, counted_as=counted)


def test_an_account_says_its_status_windows_and_reading_age() -> None:
    reauth = words.account_note(account("needs_reauth"))
    assert "sign in again" in reauth and "still count in the pool average" in reauth
    assert words.STATUS_WORDS["needs_reauth"] == "needs sign-in"
    assert words.account_note(account()) == ""
    assert "nothing says when" in words.account_note(account(out_of_capacity=True))
    assert words.account_window(None, "five_hour") == "not read"
    assert words.account_window(aw(0.42, 0.42), "five_hour") == "42.0%"
    assert words.account_window(aw(1.2, 1.0), "seven_day") == "120.0%: past the window's cap, counted as 100%"
    assert words.account_window(aw(0.1, 1.0), "five_hour") == \
        "10.0%; counted as 100%: its week is spent, so this room cannot be served"
    assert words.account_window(aw(0.9, 0.0, rolled=True), "five_hour") == \
        "90.0% before its reset; counted as 0% until read again"
    assert words.reading_age(account()) == "12 min ago"
    assert words.reading_age(account(read_at=None, reading_age_seconds=None)) == "never read"
    assert words.stale_note(account(), 60) is None
    stale = words.stale_note(account(stale=True, reading_age_seconds=7300.0), 60) or ""
    assert stale.startswith("Stale: older than 1 h") and "sample failed" in stale


def test_the_mcp_summary_names_every_account() -> None:
    v = policy().model_copy(update={"accounts": [
        account("needs_reauth", account="acct-2", five_hour=aw(0.2, 1.0), stale=True),
        account(account="acct-1", serving=True, read_at=None, reading_age_seconds=None)]})
    line = words.accounts_line(v)
    assert line == ("Accounts: acct-2: needs sign-in (cannot serve until a human signs in again); 5-hour 20.0%; "
                    "counted as 100%: its week is spent, so this room cannot be served; 7-day not read; read 12 min ago, "
                    "stale | acct-1 (serving): active; 5-hour not read; 7-day not read; never read.")
    assert words.accounts_line(policy()) == "Accounts: none has reported a quota reading yet."


def test_a_zero_fleet_burn_with_sessions_running_is_explained() -> None:
    assert words.fleet_burn_note(policy(running=0), window(fleet_burn=0.0)) is None  # nothing runs: zero is right
    assert words.fleet_burn_note(policy(running=3), window(fleet_burn=0.5)) is None
    calibrated = words.fleet_burn_note(policy(running=3), window(fleet_burn=0.0)) or ""
    assert calibrated.startswith("Zero with 3 sessions running: no burn rate has been measured yet")
    estimated = words.fleet_burn_note(policy(running=3), window(calibrated=False, fleet_burn=0.0)) or ""
    assert "readings have not climbed" in estimated
