"""Cron freshness as plain functions (seed 003 "A sweep that stops is noticed: cron freshness").

A singleton that hangs, or a schedule that stops producing, moves nothing the queue gates read:
its ticks coalesce to one waiting message and the backlog stays flat. So each key's newest
produced tick is read against when its own cadence said the next was due.

Here the schedules are JetStream message schedules (DESIGN §4), so "the cron manager was running"
is "the NATS server was up and firing": a tick counts only when another key's tick witnesses the
same fire time. Lower bounds: the NATS server's start and the key's schedule install time; a key
that never produced anything is counted from its service's newest live worker start plus
CRON_STARTUP_SLACK.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from croniter import croniter

from zimmer_alerts.domain.queues import format_age
from zimmer_alerts.domain.readings import KeyRecord
from zimmer_common.contracts.health import CronHealth, CronKeyReading, Status
from zimmer_common.schedule import ScheduleEntry, next_fire_times

GRACE_FLOOR = timedelta(minutes=30)  # a fast singleton running past a tick or two is not stopped
GRACE_TICKS = 2
GRACE_CAP = timedelta(hours=2)  # a daily key has no legitimate way to miss its tick by two hours
WITNESS_PROBES = 10
CRON_STARTUP_SLACK = timedelta(seconds=60)
CONSECUTIVE_CRITICAL_TO_ALERT = 2

# A fixed instant to measure cadences from, so an interval never depends on the wall clock.
_REFERENCE = datetime(2026, 1, 1, tzinfo=UTC)
_INTERVAL_SAMPLES = 8


@lru_cache(maxsize=256)
@lru_cache(maxsize=256)  # a pure function of the cadence; croniter is most of a report's cost otherwise
def interval_of(cadence: str) -> timedelta:
    """The cadence's period; for a cron expression the longest gap between its next few fires
    (the generous reading: a longer interval only widens the grace)."""
    fires = next_fire_times(cadence, _REFERENCE, _INTERVAL_SAMPLES + 1)
    return max(b - a for a, b in zip(fires, fires[1:], strict=False))


@lru_cache(maxsize=256)
def grace_for(cadence: str) -> timedelta:
    """min(max(GRACE_FLOOR, GRACE_TICKS × interval), GRACE_CAP)."""
    return min(max(GRACE_FLOOR, GRACE_TICKS * interval_of(cadence)), GRACE_CAP)


def lower_bound_for(record: KeyRecord | None, *, server_started_at: datetime | None,
                    installed_at: datetime | None, newest_worker_start: datetime | None) -> datetime | None:
    """The newer of the NATS server's start and the key's schedule install; a key that never
    produced a tick also waits for its service's newest live worker (+ CRON_STARTUP_SLACK)."""
    bounds = [server_started_at, installed_at]
    if (record is None or record.last_enqueued_at is None) and newest_worker_start is not None:
        bounds.append(newest_worker_start + CRON_STARTUP_SLACK)
    return max((b for b in bounds if b is not None), default=None)


def _counted_from(record: KeyRecord | None, lower_bound: datetime | None) -> datetime | None:
    produced = record.last_enqueued_at if record else None
    return max((t for t in (produced, lower_bound) if t is not None), default=None)


def first_owed_tick(entry: ScheduleEntry, record: KeyRecord | None, lower_bound: datetime | None) -> datetime | None:
    """The first fire time after the newest produced tick (or the lower bound, if newer)."""
    since = _counted_from(record, lower_bound)
    return None if since is None else _next_fire(entry.cadence, since)


@lru_cache(maxsize=4096)  # the same (cadence, newest tick) recurs every check until the key ticks again
def _next_fire(cadence: str, since: datetime) -> datetime:
    return next_fire_times(cadence, since, 1)[0]


def _newest_fires(cadence: str, first: datetime, now: datetime, count: int) -> list[datetime]:
    """The newest `count` fire times in [first, now), oldest first, without walking the whole span
    (a tick falling exactly at `now` is not owed yet)."""
    if cadence.startswith("@every"):
        step = interval_of(cadence)
        last = (now - first) // step
        if first + last * step == now:
            last -= 1
        return [first + k * step for k in range(max(0, last - count + 1), last + 1)]
    it = croniter(cadence, now, second_at_beginning=True)
    fires: list[datetime] = []
    while len(fires) < count:
        t = it.get_prev(datetime)
        if t < first:
            break
        fires.append(t)
    return fires[::-1]


def owed_ticks(entry: ScheduleEntry, record: KeyRecord | None, now: datetime,
               lower_bound: datetime | None) -> list[datetime]:
    """The ticks the key owes (its newest WITNESS_PROBES), oldest first; empty unless the first
    owed tick has been owed for longer than the key's grace."""
    first = first_owed_tick(entry, record, lower_bound)
    if first is None or now - first <= grace_for(entry.cadence):
        return []
    return _newest_fires(entry.cadence, first, now, WITNESS_PROBES)


def _second(t: datetime) -> datetime:
    # Witnesses are compared to the second: a schedule's message lands a few ms after its fire time.
    return t.replace(microsecond=0)


def _when(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(d: timedelta) -> str:
    return format_age(d.total_seconds())


def judge_key(entry: ScheduleEntry, record: KeyRecord | None, now: datetime, lower_bound: datetime | None,
              witnessed: set[datetime], *, disabled: bool, exempt: str | None,
              ceiling: timedelta | None, lane_paused: bool = False) -> CronKeyReading:
    """One key's reading. A tick that has waited for a worker past its lane's ceiling (reckoned
    from the lane's last finish, `domain.lanes`) is stale, grace or not: ticks coalesce, so no
    depth or head-age threshold ever sees a lane that stopped draining, and this is the page that
    does (a dead sweeper host's lane, a service whose runner stopped). Otherwise what holds a key
    past its grace decides whether it pages: nothing (witnessed) → stale; a run past its lane
    ceiling → stale; a run inside it, or a tick waiting inside the ceiling or on a paused lane →
    overdue; owed ticks nobody witnessed → fresh, excused (no scheduler was running to fire them)."""
    grace = grace_for(entry.cadence)

    def reading(state: str, reason: str, owed_since: datetime | None = None, held_by: str | None = None,
                ) -> CronKeyReading:
        return CronKeyReading(key=entry.key, service=entry.service, job=entry.job, cadence=entry.cadence,
                              lane=entry.lane, state=state, reason=reason, grace_seconds=grace.total_seconds(),
                              last_produced_at=record.last_enqueued_at if record else None,
                              owed_since=owed_since, held_by=held_by)

    if disabled:
        return reading("disabled", "Disabled: not judged.")
    why_exempt = exempt if exempt is not None else entry.freshness_exempt
    if why_exempt:
        return reading("exempt", why_exempt)
    waited = now - record.waiting_since if record and record.waiting_since is not None else None
    if (waited is not None and ceiling is not None and waited >= ceiling and not lane_paused
            and record is not None and record.running_since is None):
        assert record.waiting_since is not None
        return reading("stale", f"A tick has waited for a worker since {_when(record.waiting_since)} ({_span(waited)}) "
                                f"with nothing finished on its lane, past the {entry.lane} lane's {_span(ceiling)} "
                                "ceiling: the lane is not draining.", record.waiting_since, "waiting")
    first = first_owed_tick(entry, record, lower_bound)
    owed = owed_ticks(entry, record, now, lower_bound)
    if first is None:
        return reading("fresh", "Nothing to count from yet (no tick produced and no lower bound).")
    if not owed:
        return reading("fresh", f"Next tick owed {_when(first)}, within its {_span(grace)} grace.")
    late = f"owed since {_when(first)} ({_span(now - first)}, grace {_span(grace)})"
    outside = (" The newest copy was enqueued outside the schedule."
               if record and record.last_enqueued_at and not record.last_enqueued_scheduled else "")
    if record and record.running_since is not None:
        running = now - record.running_since
        if ceiling is not None and running >= ceiling:
            return reading("stale", f"Held by a run started {_when(record.running_since)}, running {_span(running)}, "
                                    f"past its lane's {_span(ceiling)} ceiling; {late}.{outside}", first, "running")
        inside = f"inside its lane's {_span(ceiling)} ceiling" if ceiling is not None else "on a lane with no ceiling"
        return reading("overdue", f"Held by a run running {_span(running)}, {inside}; {late}.{outside}",
                       first, "running")
    if record and record.waiting_since is not None:
        paused = " on a paused lane" if lane_paused else ""
        return reading("overdue", f"A tick has waited for a worker{paused} since {_when(record.waiting_since)}; "
                                  f"{late}.{outside}", first, "waiting")
    seen = {_second(w) for w in witnessed}
    witnesses = [t for t in owed if _second(t) in seen]
    if witnesses:
        return reading("stale", f"Not produced: {late}; the scheduler fired {len(witnesses)} of the last "
                                f"{len(owed)} owed ticks for other keys.{outside}", first)
    return reading("fresh", f"Excused: none of the last {len(owed)} ticks owed since {_when(first)} has a witness, "
                            "so no scheduler was running to fire them.", first)


def cron_health(readings: list[CronKeyReading], *, readable: bool = True, problem: str | None = None) -> CronHealth:
    """Any stale key is critical, any overdue one a warning."""
    states = {r.state for r in readings}
    status: Status = "critical" if "stale" in states else "warning" if "overdue" in states else "ok"
    return CronHealth(readable=readable, problem=problem, status=status, keys=readings)


@dataclass
class CronStreaks:
    """Consecutive stale checks per key. A key stale on this check and the one before is
    confirmed; one key stale on one check and another on the next are two unconfirmed readings.
    While the backlog page is itself critical, a key held by a running copy is left to it (its
    breakdown already names the holder): held back, so its streak starts once the backlog clears."""

    counts: dict[str, int] = field(default_factory=dict)

    def observe(self, readings: Iterable[CronKeyReading | str], *, backlog_critical: bool = False) -> list[str]:
        """One check: readings (or the keys already judged stale and not held back); returns the
        confirmed keys."""
        stale = {r if isinstance(r, str) else r.key for r in readings
                 if isinstance(r, str) or (r.state == "stale" and not (backlog_critical and r.held_by == "running"))}
        self.counts = {key: self.counts.get(key, 0) + 1 for key in stale}
        return sorted(key for key, n in self.counts.items() if n >= CONSECUTIVE_CRITICAL_TO_ALERT)
