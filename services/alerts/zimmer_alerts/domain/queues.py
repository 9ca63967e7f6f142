"""Queue health as plain functions of the readings (seed 003 "What 'queue backlog' counts", "When
nothing is executing", "When a lane is wedged", "The page says which queue, of what, and how old
there"; DESIGN §4).

A lane is a set of durable consumers: each service's job-runner consumer `jobs_<ctx>_<lane>` of a
job lane, and the `events`, `ingest` and `commands` lanes. ready = num_pending, claimed =
num_ack_pending, pool = max_ack_pending (shared by every replica of the service, so it already is
"threads × live workers").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from zimmer_alerts.domain.lanes import MONITOR_SERVICE
from zimmer_alerts.domain.readings import ClaimedRun, ConsumerReading, Readings
from zimmer_alerts.domain.workers import live_instances_by_service
from zimmer_common.contracts.health import (
    READY_BREAKDOWN_LIMIT,
    Age,
    Count,
    HeadOfLine,
    LaneStatistics,
    QueueStatistics,
    QueueVerdict,
    WorkerStatistics,
)
from zimmer_common.lanes import LANES


@dataclass(frozen=True)
class LaneThreshold:
    depth: int  # ready messages
    stall_age: timedelta  # age of the lane's head of line


DEFAULT_LANE_THRESHOLD = LaneThreshold(100, timedelta(minutes=10))
# Only the lanes whose thread counts and job durations deviate from the original calibration.
LANE_OVERRIDES: dict[str, LaneThreshold] = {
    "inference": LaneThreshold(150, timedelta(minutes=60)),  # 2 threads × 90 s calls: 80 jobs/hour
    "maintenance": LaneThreshold(100, timedelta(minutes=60)),  # minutes-long installs and scans
    "auth": LaneThreshold(100, timedelta(minutes=30)),  # a login holds its thread up to 12 minutes
    "agents": LaneThreshold(100, timedelta(hours=4)),  # the seed's; no such lane here, kept for parity
}
NON_JOB_LANES = ("events", "ingest", "commands")
LANE_THRESHOLDS: dict[str, LaneThreshold] = {
    **{name: DEFAULT_LANE_THRESHOLD for name in (*LANES, *NON_JOB_LANES)},
    **LANE_OVERRIDES,
}
QUEUE_DEPTH_CRITICAL_THRESHOLD = 100
WORKER_STALL_MIN_LANES = 2
EXECUTION_STALL_CRITICAL_AGE = timedelta(minutes=10)
# Job lanes that turn work over in milliseconds and are fed by cron every 30 s: a 10-minute head
# there is unambiguous, unlike the global maximum, which a slow lane keeps old routinely.
FAST_LANES = frozenset(name for name in LANES if name not in LANE_OVERRIDES)
UNKNOWN_SUBJECT = "(unknown)"
LIVE_ROUTE = "get_system_health MCP tool (and GET /api/v1/health)"


def threshold_for(lane: str) -> LaneThreshold:
    """A lane nobody has sized keeps 100 ready and 10 minutes."""
    return LANE_THRESHOLDS.get(lane, DEFAULT_LANE_THRESHOLD)


def execution_ceiling(lane: str, ceilings: Mapping[str, timedelta] | None = None) -> timedelta | None:
    """Only job lanes have a designed hold; a lane without one is never judged wedged. `ceilings`:
    the deployment's own, where it set one (a drill's short ceiling), else the seed's."""
    if ceilings and lane in ceilings:
        return ceilings[lane]
    return LANES[lane].execution_ceiling if lane in LANES else None


# ---- statistics -----------------------------------------------------------------------------

def _age(now: datetime, at: datetime) -> float:
    return max(0.0, (now - at).total_seconds())


def _counts(counts: dict[str, int]) -> list[Count]:
    """Biggest first, ties by name; a zero is absent (an idle lane is not a draining one)."""
    return [Count(name=name, count=n) for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n > 0]


def _ages(ages: dict[str, float]) -> list[Age]:
    return [Age(name=name, age_seconds=a) for name, a in sorted(ages.items(), key=lambda kv: (-kv[1], kv[0]))]


def capped_breakdown(counts: dict[str, int], limit: int = READY_BREAKDOWN_LIMIT) -> list[Count]:
    """The biggest `limit` and an "other (N more)" remainder, so the list still adds up to the total."""
    items = _counts(counts)
    if len(items) <= limit:
        return items
    rest = items[limit:]
    return [*items[:limit], Count(name=f"other ({len(rest)} more)", count=sum(c.count for c in rest))]


def subject_label(subject: str | None) -> str:
    """A job tick `zimmer.jobs.<ctx>.<lane>.<job>` reads as `<ctx>.<job>`; other subjects as they are."""
    if not subject:
        return UNKNOWN_SUBJECT
    parts = subject.split(".")
    if len(parts) == 5 and parts[:2] == ["zimmer", "jobs"]:
        return f"{parts[2]}.{parts[4]}"
    return subject


def _ready_subjects(c: ConsumerReading, into: Counter[str]) -> None:
    if c.ready <= 0:
        return
    if c.ready_by_subject is not None:
        # The split is a second read and may disagree with num_pending: it is clipped to the
        # count (biggest first) and any shortfall is "(unknown)", so it always adds up.
        left = c.ready
        for subject, n in sorted(c.ready_by_subject.items(), key=lambda kv: (-kv[1], kv[0])):
            taken = min(max(n, 0), left)
            into[subject_label(subject)] += taken
            left -= taken
        into[UNKNOWN_SUBJECT] += left
        return
    # Only the head is known: one message under its subject, the rest unattributed.
    into[subject_label(c.oldest_ready_subject)] += 1
    into[UNKNOWN_SUBJECT] += c.ready - 1


def _runs_of(c: ConsumerReading, runs: list[ClaimedRun]) -> list[ClaimedRun]:
    return sorted((r for r in runs if r.service == c.service and r.lane == c.lane), key=lambda r: r.started_at)


def _claimed_subjects(c: ConsumerReading, runs: list[ClaimedRun], into: Counter[str]) -> None:
    """The consumer's claims by job, oldest runs first; claims no run event explains are "(unknown)"."""
    if c.claimed <= 0:
        return
    named = _runs_of(c, runs)[: c.claimed]
    for r in named:
        into[f"{r.service}.{r.job}"] += 1
    into[UNKNOWN_SUBJECT] += c.claimed - len(named)


def waiting_at(c: ConsumerReading) -> datetime | None:
    """Since when the consumer's ready work has waited: the lane's own reckoning for a job lane
    (`domain.lanes.waiting_since`: its ticks coalesce), else the head message's time."""
    if c.ready <= 0:
        return None
    return c.waiting_since or c.oldest_ready_at


def _lane_statistics(lane: str, consumers: list[ConsumerReading], runs: list[ClaimedRun], readings: Readings,
                     ) -> LaneStatistics:
    now = readings.now
    heads = [(at, c) for c in consumers if (at := waiting_at(c)) is not None]
    head_at, head = min(heads, key=lambda h: (h[0], h[1].consumer), default=(None, None))
    runs = sorted(runs, key=lambda r: r.started_at)
    pools = [c.pool for c in consumers]
    finished = [c.last_finished_at for c in consumers if c.last_finished_at is not None]
    last_finished = max(finished, default=None)
    threshold = threshold_for(lane)
    ceiling = execution_ceiling(lane, readings.ceilings)
    rate = readings.finished_last_hour_by_lane.get(lane)
    return LaneStatistics(
        lane=lane,
        consumers=len(consumers),
        ready=sum(c.ready for c in consumers),
        claimed=sum(c.claimed for c in consumers),
        pool=None if not pools or None in pools else sum(p for p in pools if p is not None),
        oldest_ready_age_seconds=_age(now, head_at) if head_at is not None else None,
        head_subject=subject_label(head.oldest_ready_subject) if head else None,
        oldest_claimed_age_seconds=_age(now, runs[0].started_at) if runs else None,
        youngest_claimed_age_seconds=_age(now, runs[-1].started_at) if runs else None,
        oldest_claimed_job=f"{runs[0].service}.{runs[0].job}" if runs else None,
        last_finished_at=last_finished,
        seconds_since_last_finished=_age(now, last_finished) if last_finished else None,
        processing_rate_per_hour=float(rate) if rate is not None else None,
        paused=bool(consumers) and all(c.paused for c in consumers),
        depth_threshold=threshold.depth,
        stall_age_seconds=threshold.stall_age.total_seconds(),
        execution_ceiling_seconds=ceiling.total_seconds() if ceiling else None,
    )


def queue_statistics(readings: Readings) -> QueueStatistics:
    """Every figure folded out of one set of readings, so the global figures and the lane figures
    can never disagree about a message that drained between two reads."""
    if not readings.readable:
        return QueueStatistics(readable=False, problem=readings.problem or "JetStream could not be read")
    consumers_by_lane: dict[str, list[ConsumerReading]] = defaultdict(list)
    for c in readings.consumers:
        consumers_by_lane[c.lane].append(c)
    runs_by_lane: dict[str, list[ClaimedRun]] = defaultdict(list)
    for r in readings.claimed_runs:
        runs_by_lane[r.lane].append(r)
    lanes = [_lane_statistics(name, consumers_by_lane.get(name, []), runs_by_lane.get(name, []), readings)
             for name in sorted(consumers_by_lane.keys() | runs_by_lane.keys())]

    ready_subjects: Counter[str] = Counter()
    claimed_subjects: Counter[str] = Counter()
    for c in readings.consumers:
        _ready_subjects(c, ready_subjects)
        _claimed_subjects(c, readings.claimed_runs, claimed_subjects)

    ready_ages = {lane.lane: lane.oldest_ready_age_seconds for lane in lanes
                  if lane.ready > 0 and lane.oldest_ready_age_seconds is not None}
    oldest_lane = min(ready_ages, key=lambda name: (-ready_ages[name], name), default=None)
    head_of_line = None
    if oldest_lane is not None:
        lane_stats = next(lane for lane in lanes if lane.lane == oldest_lane)
        head_of_line = HeadOfLine(lane=oldest_lane, subject=lane_stats.head_subject or UNKNOWN_SUBJECT,
                                  age_seconds=ready_ages[oldest_lane])
    claimed_oldest = {lane.lane: lane.oldest_claimed_age_seconds for lane in lanes
                      if lane.oldest_claimed_age_seconds is not None}
    claimed_youngest = {lane.lane: lane.youngest_claimed_age_seconds for lane in lanes
                        if lane.youngest_claimed_age_seconds is not None}
    # Job lanes only: event consumers ack every 30 s heartbeat, so they would keep "last finished"
    # fresh through a job runner that has stopped completing anything. And never the monitor's own
    # lanes: its queue recovery expiry finishes every minute, and a monitor fed by its own work can
    # never see that nothing else is executing.
    finished = [c.last_finished_at for c in readings.consumers
                if c.lane in LANES and c.last_finished_at and c.service != MONITOR_SERVICE]
    last_finished = max(finished, default=None)
    rates = readings.finished_last_hour_by_lane
    return QueueStatistics(
        ready_count=sum(lane.ready for lane in lanes),
        claimed_count=sum(lane.claimed for lane in lanes),
        oldest_ready_age_seconds=max(ready_ages.values(), default=None),
        oldest_claimed_age_seconds=max(claimed_oldest.values(), default=None),
        head_of_line=head_of_line,
        ready_count_by_lane=_counts({lane.lane: lane.ready for lane in lanes}),
        ready_count_by_subject=capped_breakdown(ready_subjects),
        oldest_ready_age_seconds_by_lane=_ages(ready_ages),
        claimed_count_by_lane=_counts({lane.lane: lane.claimed for lane in lanes}),
        claimed_count_by_subject=capped_breakdown(claimed_subjects),
        oldest_claimed_age_seconds_by_lane=_ages(claimed_oldest),
        youngest_claimed_age_seconds_by_lane=_ages(claimed_youngest),
        oldest_claimed_job_by_lane={lane.lane: lane.oldest_claimed_job for lane in lanes if lane.oldest_claimed_job},
        last_finished_at=last_finished,
        seconds_since_last_finished=_age(readings.now, last_finished) if last_finished else None,
        processing_rate_per_hour=float(sum(rates.values())) if rates else None,
        lanes=lanes,
    )


# ---- the verdict ------------------------------------------------------------------------------

def _head_age(lane: LaneStatistics) -> float | None:
    return lane.oldest_ready_age_seconds if lane.ready > 0 else None


def _past_own_stall(lane: LaneStatistics) -> bool:
    age = _head_age(lane)
    return age is not None and age >= lane.stall_age_seconds


def _execution_stalled(stats: QueueStatistics, workers: WorkerStatistics) -> QueueVerdict | None:
    """Nothing finished on any job lane for 10 minutes (the monitor's own aside), and a fast lane
    has had work waiting with nothing finished for as long (its coalesced ticks reckoned from its
    last finish: `domain.lanes`), or no worker but the monitor is heartbeating. A fresh deployment
    (nothing ever finished) never fires."""
    limit = EXECUTION_STALL_CRITICAL_AGE.total_seconds()
    since = stats.seconds_since_last_finished
    if stats.last_finished_at is None or since is None or since < limit:
        return None
    fast = [lane for lane in stats.lanes if lane.lane in FAST_LANES and (_head_age(lane) or 0.0) >= limit]
    # The monitor's own process is not a worker of the lanes it watches.
    no_workers = not any(i.service != MONITOR_SERVICE for i in workers.instances if i.active)
    if not fast and not no_workers:
        return None
    heads = ", ".join(f"{lane.lane} {format_age(_head_age(lane) or 0.0)}" for lane in fast)
    why = f"fast lanes picked nothing up: {heads}" if fast else "no worker is reporting a heartbeat"
    summary = f"No job has finished on any lane for {format_age(since)}; {why}."
    # Stalled ready work: a fast lane past 10 minutes, any other lane past its own stall age.
    fast_names = {lane.lane for lane in fast}
    stalled = [lane for lane in stats.lanes if lane.lane in fast_names or _past_own_stall(lane)]
    if not no_workers and stalled and all(lane.paused for lane in stalled):
        names = [lane.lane for lane in stalled]
        return QueueVerdict(status="warning", code="execution_paused", title="Nothing is executing: lanes paused",
                            summary=f"{summary} Every lane holding stalled work is paused: {', '.join(names)}.",
                            paused_lanes=names)
    return QueueVerdict(status="critical", code="execution_stalled", title="Nothing is executing", summary=summary)


@dataclass(frozen=True)
class _Wedge:
    consumer: ConsumerReading
    oldest: float
    youngest: float
    oldest_job: str
    ceiling: timedelta


def _wedge_of(c: ConsumerReading, readings: Readings, live_ids: set[str]) -> _Wedge | None:
    """The five conjuncts, judged on one consumer (its max_ack_pending is the pool its replicas share)."""
    ceiling = execution_ceiling(c.lane, readings.ceilings)
    if ceiling is None or c.pool is None or c.ready <= 0 or c.claimed < c.pool or not live_ids:
        return None
    # Runs of live instances only: a dead process's claims are JetStream's to redeliver, not a wedge.
    runs = [r for r in _runs_of(c, readings.claimed_runs) if r.instance_id in live_ids]
    if len(runs) < c.pool:  # a claim no run explains cannot be aged: not every thread is known past it
        return None
    oldest = _age(readings.now, runs[0].started_at)
    youngest = _age(readings.now, runs[-1].started_at)
    limit = ceiling.total_seconds()
    if oldest < limit or youngest < limit:
        return None
    return _Wedge(c, oldest, youngest, f"{runs[0].service}.{runs[0].job}", ceiling)


def _wedged_lane(readings: Readings, workers: WorkerStatistics) -> QueueVerdict | None:
    live = live_instances_by_service(workers)
    wedges = [w for c in readings.consumers
              if (w := _wedge_of(c, readings, {i.instance_id for i in live.get(c.service or "", [])}))]
    if not wedges:
        return None
    w = min(wedges, key=lambda w: (-w.oldest, w.consumer.lane, w.consumer.consumer))
    c = w.consumer
    return QueueVerdict(
        status="critical", code=f"wedged_lane:{c.lane}", title="Queue lane wedged",
        summary=(f"{c.lane} ({c.service}) holds {c.claimed}/{c.pool} threads on work running "
                 f"{format_age(w.youngest)} to {format_age(w.oldest)}, past its "
                 f"{format_age(w.ceiling.total_seconds())} ceiling (oldest {w.oldest_job}), "
                 f"with {c.ready} ready behind it."))


def _starved_lane(stats: QueueStatistics) -> QueueVerdict | None:
    starved = [lane for lane in stats.lanes if lane.ready >= lane.depth_threshold and _past_own_stall(lane)]
    if not starved:
        return None
    lane = min(starved, key=lambda lane: (-(_head_age(lane) or 0.0), lane.lane))
    return QueueVerdict(
        status="critical", code=f"backlog_lane:{lane.lane}", title="Queue backlog critical",
        summary=(f"{lane.lane}: {lane.ready} ready (threshold {lane.depth_threshold}), oldest waiting "
                 f"{format_age(_head_age(lane) or 0.0)} (stall age {format_age(lane.stall_age_seconds)}), "
                 f"head {lane.head_subject or UNKNOWN_SUBJECT}."))


def _cross_lane_stall(stats: QueueStatistics) -> QueueVerdict | None:
    """Several lanes each past their own stall age, their own depth summed: the stalled-worker shape.
    The sum is of the stalled lanes only; a draining lane is not part of this backlog."""
    stalled = sorted((lane for lane in stats.lanes if _past_own_stall(lane)),
                     key=lambda lane: (-(_head_age(lane) or 0.0), lane.lane))
    depth = sum(lane.ready for lane in stalled)
    if (len(stalled) < WORKER_STALL_MIN_LANES or depth < QUEUE_DEPTH_CRITICAL_THRESHOLD
            or any(lane.ready >= lane.depth_threshold for lane in stalled)):
        return None
    parts = ", ".join(f"{lane.lane} {lane.ready} ({format_age(_head_age(lane) or 0.0)})" for lane in stalled)
    return QueueVerdict(status="critical", code="backlog_cross_lane", title="Queue backlog critical",
                        summary=f"{len(stalled)} lanes picked nothing up past their own stall age, "
                                f"{depth} ready between them: {parts}.")


def _draining(stats: QueueStatistics) -> QueueVerdict | None:
    deep = [lane for lane in stats.lanes if lane.ready >= lane.depth_threshold]
    if not deep:
        return None
    parts = ", ".join(f"{lane.lane} {lane.ready} ready, head {format_age(_head_age(lane) or 0.0)}" for lane in deep)
    return QueueVerdict(status="warning", code="lane_draining", title="Queue backlog elevated",
                        summary=f"Deep but still draining: {parts}.")


def queue_verdict(stats: QueueStatistics, readings: Readings, workers: WorkerStatistics) -> QueueVerdict:
    """The seed's gates in its order: nothing executing, a wedged lane, a starved lane, a
    cross-lane stall; then a deep lane still draining (warning); else ok."""
    paused = [lane.lane for lane in stats.lanes if lane.paused]
    if not stats.readable:
        return QueueVerdict(status="critical", code="queue_unreadable", title="Queue health unreadable",
                            summary=f"The queues could not be read: {stats.problem or 'no reason given'}.")
    verdict = (_execution_stalled(stats, workers) or _wedged_lane(readings, workers) or _starved_lane(stats)
               or _cross_lane_stall(stats) or _draining(stats))
    if verdict is not None:
        return verdict if verdict.paused_lanes else verdict.model_copy(update={"paused_lanes": paused})
    finished = (f"last finished {format_age(stats.seconds_since_last_finished)} ago"
                if stats.seconds_since_last_finished is not None else "nothing finished yet")
    return QueueVerdict(status="ok", title="Queue processing normally", paused_lanes=paused,
                        summary=f"{stats.ready_count} ready, {stats.claimed_count} claimed; {finished}.")


# ---- the page -----------------------------------------------------------------------------------

def format_age(seconds: float) -> str:
    """41m, 18s, 2h 5m (whole units, rounded down)."""
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    hours, minutes = divmod(s // 60, 60)
    return f"{hours}h {minutes}m" if minutes else f"{hours}h"


def format_breakdown(items: list[Count] | None) -> str:
    """"unavailable" when the breakdown never arrived, "none" when it read as empty."""
    if items is None:
        return "unavailable"
    return ", ".join(f"{c.name} {c.count}" for c in items) if items else "none"


def format_ages(items: list[Age] | None) -> str:
    if items is None:
        return "unavailable"
    return ", ".join(f"{a.name} {format_age(a.age_seconds)}" for a in items) if items else "none"


def ready_line(stats: QueueStatistics) -> str:
    if not stats.readable:
        return f"Ready (waiting on a worker): unavailable ({stats.problem or 'JetStream could not be read'})"
    line = f"Ready (waiting on a worker): {stats.ready_count}"
    head = stats.head_of_line
    if head is not None:
        line += f", oldest waiting {format_age(head.age_seconds)} ({head.lane} / {head.subject})"
    return line


def page_body(stats: QueueStatistics, verdict: QueueVerdict, workers: WorkerStatistics) -> str:
    """Every line folded out of the statistics the gate already computed: no second read to fail."""
    def part(items: list) -> list | None:
        return items if stats.readable else None

    lines = [
        ready_line(stats),
        f"Ready by lane: {format_breakdown(part(stats.ready_count_by_lane))}",
        f"Ready by subject: {format_breakdown(part(stats.ready_count_by_subject))}",
        f"Oldest ready by lane: {format_ages(part(stats.oldest_ready_age_seconds_by_lane))}",
        f"Claimed (executing) by lane: {format_breakdown(part(stats.claimed_count_by_lane))}",
        f"Oldest claimed by lane: {format_ages(part(stats.oldest_claimed_age_seconds_by_lane))}",
        f"{verdict.title or verdict.status}: {verdict.summary}",
        f"Workers: {workers.active} active / {workers.registered} registered",
        f"Every number here is live in the {LIVE_ROUTE}: re-read it as the incident moves.",
    ]
    return "\n".join(lines)
