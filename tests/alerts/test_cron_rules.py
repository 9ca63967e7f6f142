"""Cron freshness rules (seed 003 "A sweep that stops is noticed: cron freshness"): the grace table,
the owed ticks and their witnesses, the held-by table, the lower bounds and the per-key streak.
Fixed datetimes throughout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zimmer_alerts.domain.cron import (
    CONSECUTIVE_CRITICAL_TO_ALERT,
    CRON_STARTUP_SLACK,
    GRACE_CAP,
    GRACE_FLOOR,
    WITNESS_PROBES,
    CronStreaks,
    cron_health,
    grace_for,
    interval_of,
    judge_key,
    lower_bound_for,
    owed_ticks,
)
from zimmer_alerts.domain.readings import KeyRecord
from zimmer_common.contracts.health import CronKeyReading
from zimmer_common.schedule import SCHEDULE, Environment, ScheduleEntry, ScheduleError

T0 = datetime(2026, 9, 10, 6, 0, tzinfo=UTC)
M = timedelta(minutes=1)
ENVS = frozenset({Environment.PRODUCTION})
TEN_MINUTELY = ScheduleEntry("backlog", "outbox_prune", "0 */10 * * * *", "maintenance", ENVS)
DAILY = ScheduleEntry("backlog", "nightly", "0 0 6 * * *", "default", ENVS)
EVERY_30S = ScheduleEntry("spot-gate", "recheck", "@every 30s", "default", ENVS)


def record(last: datetime | None, *, scheduled: bool = True, running: datetime | None = None,
           waiting: datetime | None = None, finished: datetime | None = None) -> KeyRecord:
    return KeyRecord(key="backlog.outbox_prune", last_enqueued_at=last, last_enqueued_scheduled=scheduled,
                     last_started_at=last, last_finished_at=finished or last, running_since=running,
                     waiting_since=waiting)


def every_minute(start: datetime, end: datetime) -> set[datetime]:
    """What an every-minute key's ticks witness: every minute boundary the scheduler fired."""
    out, t = set(), start
    while t <= end:
        out.add(t)
        t += M
    return out


def judge(entry: ScheduleEntry, rec: KeyRecord | None, now: datetime, *, witnessed: set[datetime] | None = None,
          lower_bound: datetime | None = None, disabled: bool = False, exempt: str | None = None,
          ceiling: timedelta | None = timedelta(minutes=90)) -> CronKeyReading:
    seen = every_minute(now - 24 * 60 * M, now) if witnessed is None else witnessed
    return judge_key(entry, rec, now, lower_bound, seen, disabled=disabled, exempt=exempt, ceiling=ceiling)


# ---- grace -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("cadence", "interval", "grace"), [
    ("@every 30s", timedelta(seconds=30), GRACE_FLOOR),
    ("*/15 * * * * *", timedelta(seconds=15), GRACE_FLOOR),
    ("0 */15 * * * *", 15 * M, GRACE_FLOOR),
    ("0 */20 * * * *", 20 * M, 40 * M),
    ("0 */30 * * * *", 30 * M, 60 * M),
    ("0 7 * * * *", 60 * M, GRACE_CAP),
    ("0 0 6 * * *", timedelta(days=1), GRACE_CAP),
])
def test_the_grace_table(cadence: str, interval: timedelta, grace: timedelta) -> None:
    assert interval_of(cadence) == interval
    assert grace_for(cadence) == grace


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3 * 86400), st.integers(1, 3 * 86400))
def test_grace_is_monotone_and_bounded(a: int, b: int) -> None:
    ga, gb = grace_for(f"@every {a}s"), grace_for(f"@every {b}s")
    assert GRACE_FLOOR <= ga <= GRACE_CAP and GRACE_FLOOR <= gb <= GRACE_CAP
    if a <= b:
        assert ga <= gb


# ---- owed ticks -----------------------------------------------------------------------------------------

def test_no_ticks_are_owed_within_grace() -> None:
    last = T0 - 35 * M  # owed since T0 - 25m: inside the 30-minute grace
    assert owed_ticks(TEN_MINUTELY, record(last), T0, None) == []


def test_owed_ticks_are_the_newest_ten_fire_times() -> None:
    last = T0 - 5 * 60 * M
    ticks = owed_ticks(TEN_MINUTELY, record(last), T0, None)
    assert len(ticks) == WITNESS_PROBES
    assert ticks[-1] == T0 - 10 * M and ticks[0] == T0 - 100 * M  # a tick at exactly now is not yet owed
    assert ticks == sorted(ticks)


def test_every_cadence_owes_from_its_last_tick() -> None:
    ticks = owed_ticks(EVERY_30S, record(T0 - 31 * M), T0, None)
    assert len(ticks) == WITNESS_PROBES
    assert (ticks[0], ticks[-1]) == (T0 - 5 * M, T0 - timedelta(seconds=30))  # every 30 s after T0 - 31m


def test_the_lower_bound_counts_when_newer_than_the_last_tick() -> None:
    # The NATS server started (or the schedule was reinstalled) 20 minutes ago: a week-old tick is not a week late.
    assert owed_ticks(TEN_MINUTELY, record(T0 - 7 * 24 * 60 * M), T0, T0 - 20 * M) == []


def test_lower_bound_for() -> None:
    server, installed, worker = T0 - 60 * M, T0 - 30 * M, T0 - 10 * M
    assert lower_bound_for(record(T0 - 5 * M), server_started_at=server, installed_at=installed,
                           newest_worker_start=worker) == installed
    # A key with no record at all is counted from its service's newest live worker, plus the slack.
    assert lower_bound_for(None, server_started_at=server, installed_at=installed,
                           newest_worker_start=worker) == worker + CRON_STARTUP_SLACK
    assert lower_bound_for(None, server_started_at=None, installed_at=None, newest_worker_start=None) is None


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["@every 15s", "@every 7m", "*/15 * * * * *", "0 */10 * * * *", "0 7 * * * *",
                        "0 0 6 * * *", "0 */20 * * * *"]),
       st.integers(0, 3 * 24 * 3600), st.none() | st.integers(0, 3 * 24 * 3600))
def test_owed_ticks_never_exceed_the_probes(cadence: str, since: int, bound: int | None) -> None:
    entry = ScheduleEntry("backlog", "x", cadence, "default", ENVS)
    lower = T0 - timedelta(seconds=bound) if bound is not None else None
    ticks = owed_ticks(entry, record(T0 - timedelta(seconds=since)), T0, lower)
    assert len(ticks) <= WITNESS_PROBES
    assert all(t <= T0 for t in ticks) and ticks == sorted(ticks)


# ---- the held-by table ------------------------------------------------------------------------------------

def test_fresh_within_grace() -> None:
    reading = judge(TEN_MINUTELY, record(T0 - 12 * M), T0)
    assert reading.state == "fresh" and reading.grace_seconds == 1800 and reading.last_produced_at == T0 - 12 * M


def test_nothing_holds_it_and_the_scheduler_fired_is_stale() -> None:
    reading = judge(TEN_MINUTELY, record(T0 - 60 * M), T0)
    assert reading.state == "stale" and reading.reason.startswith("Not produced")
    assert reading.owed_since == T0 - 50 * M and reading.held_by is None


def test_owed_ticks_nobody_witnessed_are_excused() -> None:
    # A deploy spanning 06:00: the daily key's tick fell while nothing was firing.
    reading = judge(DAILY, record(T0 - 24 * 60 * M), T0 + 3 * 60 * M, witnessed=every_minute(T0 + M, T0 + 180 * M))
    assert reading.state == "fresh" and reading.reason.startswith("Excused")
    assert judge(DAILY, record(T0 - 24 * 60 * M), T0 + 3 * 60 * M).state == "stale"


def test_a_witness_is_matched_to_the_second() -> None:
    jittered = {t + timedelta(milliseconds=4) for t in every_minute(T0 - 120 * M, T0)}
    assert judge(TEN_MINUTELY, record(T0 - 60 * M), T0, witnessed=jittered).state == "stale"


def test_a_run_past_its_lane_ceiling_is_stale_inside_it_overdue() -> None:
    hung = judge(TEN_MINUTELY, record(T0 - 100 * M, running=T0 - 100 * M), T0, ceiling=90 * M)
    assert (hung.state, hung.held_by) == ("stale", "running") and "past its lane's 1h 30m ceiling" in hung.reason
    slow = judge(TEN_MINUTELY, record(T0 - 60 * M, running=T0 - 60 * M), T0, ceiling=90 * M)
    assert (slow.state, slow.held_by) == ("overdue", "running")
    unbounded = judge(TEN_MINUTELY, record(T0 - 600 * M, running=T0 - 600 * M), T0, ceiling=None)
    assert unbounded.state == "overdue"


def test_a_tick_waiting_for_a_worker_is_overdue() -> None:
    reading = judge(TEN_MINUTELY, record(T0 - 60 * M, waiting=T0 - 50 * M), T0)
    assert (reading.state, reading.held_by) == ("overdue", "waiting")


def test_the_reason_says_the_copy_was_enqueued_outside_the_schedule() -> None:
    reading = judge(TEN_MINUTELY, record(T0 - 100 * M, scheduled=False, running=T0 - 100 * M), T0, ceiling=90 * M)
    assert reading.state == "stale" and "enqueued outside the schedule" in reading.reason
    assert "outside" not in judge(TEN_MINUTELY, record(T0 - 100 * M, running=T0 - 100 * M), T0).reason


def test_a_key_with_no_record_counts_from_its_newest_worker() -> None:
    worker = T0 - 20 * M
    bound = lower_bound_for(None, server_started_at=T0 - 600 * M, installed_at=None, newest_worker_start=worker)
    assert judge(TEN_MINUTELY, None, T0, lower_bound=bound).state == "fresh"
    assert judge(TEN_MINUTELY, None, T0 + 60 * M, lower_bound=bound).state == "stale"
    assert judge(TEN_MINUTELY, None, T0).state == "fresh"  # nothing to count from


def test_disabled_and_exempt_are_never_judged() -> None:
    dead = record(T0 - 600 * M)
    assert judge(TEN_MINUTELY, dead, T0, disabled=True).state == "disabled"
    why = "It runs only while a migration is in flight."
    exempt = judge(TEN_MINUTELY, dead, T0, exempt=why)
    assert (exempt.state, exempt.reason) == ("exempt", why)
    entry = ScheduleEntry("backlog", "rare", "0 */10 * * * *", "default", ENVS, freshness_exempt=why)
    assert judge(entry, dead, T0).state == "exempt"


def test_freshness_exempt_must_be_a_sentence() -> None:
    for bad in ("", "too short.", "A long reason without a full stop at the end"):
        with pytest.raises(ScheduleError):
            ScheduleEntry("backlog", "rare", "0 */10 * * * *", "default", ENVS, freshness_exempt=bad)
    assert all(e.freshness_exempt is None for e in SCHEDULE)  # no entry needs one today


def test_cron_health_status() -> None:
    def reading(state: str) -> CronKeyReading:
        return judge(TEN_MINUTELY, record(T0), T0).model_copy(update={"state": state})

    assert cron_health([reading("fresh"), reading("exempt"), reading("disabled")]).status == "ok"
    assert cron_health([reading("fresh"), reading("overdue")]).status == "warning"
    assert cron_health([reading("overdue"), reading("stale")]).status == "critical"
    assert cron_health([]).status == "ok"


# ---- the streak ----------------------------------------------------------------------------------------

def stale(key: str, held_by: str | None = None) -> CronKeyReading:
    return CronKeyReading(key=key, service="backlog", job=key, cadence="0 */10 * * * *", lane="default",
                          state="stale", reason="x", grace_seconds=1800, last_produced_at=None, owed_since=None,
                          held_by=held_by)


def test_a_streak_is_per_key() -> None:
    assert CONSECUTIVE_CRITICAL_TO_ALERT == 2
    streaks = CronStreaks()
    assert streaks.observe([stale("a")]) == []
    assert streaks.observe([stale("b")]) == []  # two unconfirmed readings, not a finding about b
    assert streaks.observe([stale("b")]) == ["b"]
    assert streaks.observe([]) == []
    assert streaks.observe([stale("b")]) == []  # a clear check resets it


def test_a_running_holder_is_held_back_while_the_backlog_pages() -> None:
    streaks = CronStreaks()
    assert streaks.observe([stale("a", "running")], backlog_critical=True) == []
    assert streaks.observe([stale("a", "running")], backlog_critical=True) == []
    assert streaks.observe([stale("a", "running")]) == []  # the streak starts once the backlog clears
    assert streaks.observe([stale("a", "running")]) == ["a"]
    assert CronStreaks().observe([stale("n")], backlog_critical=True) == []


def test_a_streak_also_takes_the_stale_keys_themselves() -> None:
    streaks = CronStreaks()
    assert streaks.observe(["a"]) == [] and streaks.observe(["a", "b"]) == ["a"]
    assert streaks.observe([judge(TEN_MINUTELY, record(T0), T0)]) == []  # a fresh reading ends the streak
