"""The queue health rules (seed 003 "What 'queue backlog' counts" to "The page says which queue"):
every gate, each conjunct's absence, and the three incidents. Fixed datetimes throughout."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from zimmer_alerts.domain.overall import overall_status, summary_prose
from zimmer_alerts.domain.queues import (
    FAST_LANES,
    LANE_THRESHOLDS,
    format_age,
    format_ages,
    format_breakdown,
    page_body,
    queue_statistics,
    queue_verdict,
    threshold_for,
)
from zimmer_alerts.domain.readings import ClaimedRun, ConsumerReading, Heartbeat, Readings
from zimmer_alerts.domain.workers import worker_statistics
from zimmer_common.contracts.health import (
    Age,
    Count,
    CronHealth,
    CronKeyReading,
    QueueRecoveryStatus,
    QueueStatistics,
    QueueVerdict,
)

T0 = datetime(2026, 9, 2, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def consumer(lane: str, *, service: str = "backlog", ready: int = 0, claimed: int = 0, pool: int | None = 2,
             head_age: timedelta | None = None, subject: str | None = None, finished_ago: timedelta | None = M,
             paused: bool = False, now: datetime = T0, by_subject: dict[str, int] | None = None) -> ConsumerReading:
    return ConsumerReading(
        stream="ZIMMER_JOBS", consumer=f"jobs_{service}_{lane}", lane=lane, service=service, ready=ready,
        claimed=claimed, pool=pool,
        oldest_ready_at=now - head_age if head_age is not None and ready else None,
        oldest_ready_subject=subject or (f"zimmer.jobs.{service}.{lane}.sweep" if ready else None),
        last_finished_at=now - finished_ago if finished_ago is not None else None,
        acked_total=100, paused=paused, ready_by_subject=by_subject)


def run(lane: str, job: str, started_ago: timedelta, *, service: str = "backlog", instance: str = "b1",
        now: datetime = T0) -> ClaimedRun:
    return ClaimedRun(service=service, job=job, lane=lane, started_at=now - started_ago, instance_id=instance)


def beat(service: str = "backlog", instance: str = "b1", ago: timedelta = timedelta(seconds=20),
         now: datetime = T0) -> Heartbeat:
    return Heartbeat(service=service, instance_id=instance, version="1", at=now - ago, started_at=now - 3 * 60 * M)


def judge(consumers: list[ConsumerReading], runs: list[ClaimedRun] = (), heartbeats: list[Heartbeat] | None = None,
          now: datetime = T0) -> tuple[QueueStatistics, QueueVerdict, Readings]:
    readings = Readings(now=now, consumers=consumers, claimed_runs=list(runs),
                        heartbeats=[beat(now=now)] if heartbeats is None else heartbeats)
    stats = queue_statistics(readings)
    return stats, queue_verdict(stats, readings, worker_statistics(readings.heartbeats, now)), readings


# ---- thresholds ---------------------------------------------------------------------------------

def test_thresholds_are_the_seeds() -> None:
    assert (threshold_for("inference").depth, threshold_for("inference").stall_age) == (150, 60 * M)
    assert (threshold_for("maintenance").depth, threshold_for("maintenance").stall_age) == (100, 60 * M)
    assert (threshold_for("auth").depth, threshold_for("auth").stall_age) == (100, 30 * M)
    assert (threshold_for("agents").depth, threshold_for("agents").stall_age) == (100, 240 * M)
    for lane in ("default", "pollers", "triggers", "events", "ingest", "commands", "never-sized"):
        assert (threshold_for(lane).depth, threshold_for(lane).stall_age) == (100, 10 * M)
    assert FAST_LANES == {"default", "pollers", "triggers"}
    assert all(t.depth >= 100 and t.stall_age >= 10 * M for t in LANE_THRESHOLDS.values())


# ---- statistics ---------------------------------------------------------------------------------

def test_a_lane_with_nothing_ready_is_absent_not_zero() -> None:
    stats, _, _ = judge([consumer("default", ready=3, head_age=M), consumer("pollers", claimed=1)])
    assert [c.name for c in stats.ready_count_by_lane] == ["default"]
    assert [a.name for a in stats.oldest_ready_age_seconds_by_lane] == ["default"]
    assert [c.name for c in stats.claimed_count_by_lane] == ["pollers"]


def test_by_lane_lists_deepest_and_oldest_first_ties_by_name() -> None:
    stats, _, _ = judge([consumer("triggers", ready=5, head_age=2 * M), consumer("default", ready=5, head_age=9 * M),
                         consumer("events", service="spot-gate", ready=40, head_age=2 * M)])
    assert stats.ready_count_by_lane == [Count(name="events", count=40), Count(name="default", count=5),
                                         Count(name="triggers", count=5)]
    assert [a.name for a in stats.oldest_ready_age_seconds_by_lane] == ["default", "events", "triggers"]
    assert stats.oldest_ready_age_seconds == 9 * 60
    assert stats.head_of_line is not None
    assert (stats.head_of_line.lane, stats.head_of_line.subject) == ("default", "backlog.sweep")


def test_one_lane_folds_every_services_consumer() -> None:
    stats, _, _ = judge([consumer("default", ready=2, head_age=3 * M, pool=2),
                         consumer("default", service="spot-gate", ready=1, head_age=7 * M, pool=2)])
    lane = stats.lanes[0]
    assert (lane.lane, lane.consumers, lane.ready, lane.pool) == ("default", 2, 3, 4)
    assert lane.oldest_ready_age_seconds == 7 * 60 and lane.head_subject == "spot-gate.sweep"


def test_subject_breakdown_is_capped_with_a_remainder_that_adds_up() -> None:
    split = {f"zimmer.events.x.e{i}": 10 - i for i in range(8)}  # 10, 9, ..., 3
    stats, _, _ = judge([consumer("events", ready=sum(split.values()) + 4, head_age=M, by_subject=split)])
    names = [c.name for c in stats.ready_count_by_subject]
    assert names[:5] == ["zimmer.events.x.e0", "zimmer.events.x.e1", "zimmer.events.x.e2", "zimmer.events.x.e3",
                         "zimmer.events.x.e4"]
    assert names[5] == "other (4 more)"  # e5, e6, e7 and the 4 the split left "(unknown)"
    assert sum(c.count for c in stats.ready_count_by_subject) == stats.ready_count == 56


def test_without_a_split_only_the_head_is_attributed() -> None:
    stats, _, _ = judge([consumer("default", ready=3, head_age=M)])
    assert stats.ready_count_by_subject == [Count(name="(unknown)", count=2), Count(name="backlog.sweep", count=1)]


def test_claimed_ages_come_from_the_runs() -> None:
    runs = [run("maintenance", "install", 40 * M), run("maintenance", "archive", 3 * M)]
    stats, _, _ = judge([consumer("maintenance", claimed=2)], runs)
    lane = stats.lanes[0]
    assert (lane.oldest_claimed_age_seconds, lane.youngest_claimed_age_seconds) == (40 * 60, 3 * 60)
    assert stats.oldest_claimed_job_by_lane == {"maintenance": "backlog.install"}
    assert stats.claimed_count_by_subject == [Count(name="backlog.archive", count=1),
                                              Count(name="backlog.install", count=1)]
    assert stats.oldest_claimed_age_seconds == 40 * 60


def test_last_finished_reads_job_lanes_only() -> None:
    # The event consumer acks a heartbeat every 30 s: it must not keep "last finished" fresh.
    stats, _, _ = judge([consumer("default", finished_ago=40 * M),
                         consumer("events", service="alerts", finished_ago=timedelta(seconds=5))])
    assert stats.last_finished_at == T0 - 40 * M
    assert stats.seconds_since_last_finished == 40 * 60


def test_processing_rate_and_unreadable() -> None:
    readings = Readings(now=T0, consumers=[consumer("default")], claimed_runs=[], heartbeats=[],
                        finished_last_hour_by_lane={"default": 700, "pollers": 379})
    assert queue_statistics(readings).processing_rate_per_hour == 1079
    down = Readings(now=T0, consumers=[], claimed_runs=[], heartbeats=[], readable=False, problem="timeout")
    stats = queue_statistics(down)
    assert not stats.readable and stats.problem == "timeout"
    verdict = queue_verdict(stats, down, worker_statistics([], T0))
    assert verdict.status == "critical" and verdict.code == "queue_unreadable"
    body = page_body(stats, verdict, worker_statistics([], T0))
    assert "Ready by lane: unavailable" in body and "Ready (waiting on a worker): unavailable (timeout)" in body


# ---- nothing is executing ---------------------------------------------------------------------------

def test_nothing_finished_and_a_fast_lane_stale_is_critical() -> None:
    _, verdict, _ = judge([consumer("triggers", ready=4, head_age=10 * M, finished_ago=11 * M)])
    assert (verdict.status, verdict.code, verdict.title) == ("critical", "execution_stalled", "Nothing is executing")


def test_the_2026_08_13_ten_hour_stall_fires_on_the_first_check_past_ten_minutes() -> None:
    stopped = T0  # the last job finished; a trigger tick arrived the same moment and was never taken
    fired = []
    for minute in range(0, 16):
        now = stopped + minute * M
        _, verdict, _ = judge([consumer("triggers", ready=1, head_age=now - stopped, finished_ago=now - stopped,
                                        now=now),
                               consumer("default", ready=2, head_age=now - stopped, finished_ago=now - stopped,
                                        now=now)], heartbeats=[beat(now=now)], now=now)
        fired.append(verdict.code == "execution_stalled")
    assert fired.index(True) == 10 and all(fired[10:])


def test_a_dead_worker_with_an_empty_queue_fires_on_the_heartbeat_arm() -> None:
    _, verdict, _ = judge([consumer("default", finished_ago=12 * M)], heartbeats=[beat(ago=12 * M)])
    assert verdict.code == "execution_stalled" and "no worker" in verdict.summary


def test_execution_stall_conjuncts_each_prevent_it() -> None:
    stale = dict(ready=3, head_age=15 * M)
    # something finished 9 minutes ago
    assert judge([consumer("default", finished_ago=9 * M, **stale)])[1].code != "execution_stalled"
    # a fresh deployment: nothing ever finished, even with no worker at all
    assert judge([consumer("default", finished_ago=None, **stale)], heartbeats=[])[1].code != "execution_stalled"
    # a worker mid-restart: the fast lane's head is 9 minutes old
    assert judge([consumer("default", ready=3, head_age=9 * M, finished_ago=12 * M)])[1].status == "ok"
    # only a slow lane is old (inference inside its 60 minutes): not a fast lane
    assert judge([consumer("inference", ready=3, head_age=40 * M, finished_ago=12 * M)])[1].status == "ok"


def test_the_monitors_own_work_never_feeds_it() -> None:
    """Issue 26 #1, the 13-minute stop: backlog, spot-gate, sweeper and gateway stopped; their fast
    lanes hold coalesced ticks (the newest 145 s old) with nothing finished for 805 s; the alerts
    service's own queue_recovery_expiry on the auth lane finished a minute ago and its heartbeat is
    the one live worker. "A monitor must never be fed by its own work" (the issue's words)."""
    stopped = 805 * timedelta(seconds=1)

    def lane(name: str, service: str) -> ConsumerReading:
        c = consumer(name, service=service, ready=3, head_age=145 * timedelta(seconds=1), finished_ago=stopped)
        return replace(c, waiting_since=T0 - stopped + 30 * timedelta(seconds=1))  # the first tick owed after

    fleet = [lane("default", "spot-gate"), lane("pollers", "backlog")]
    own = consumer("auth", service="alerts", finished_ago=M)
    _, verdict, _ = judge([*fleet, own], heartbeats=[beat(service="alerts", instance="alerts-1")])
    assert (verdict.code, verdict.title) == ("execution_stalled", "Nothing is executing"), verdict
    # The lanes' age is the time since they last finished with work waiting, not the newest tick's.
    stats, _, _ = judge(fleet)
    assert {(a.name, int(a.age_seconds)) for a in stats.oldest_ready_age_seconds_by_lane} == {
        ("default", 775), ("pollers", 775)}
    # And a live worker of the fleet with its fast lane draining: not stalled.
    assert judge([consumer("default", service="spot-gate", finished_ago=M), own])[1].status == "ok"


def test_a_deliberate_halt_is_a_warning_naming_the_paused_lanes() -> None:
    _, verdict, _ = judge([consumer("triggers", ready=5, head_age=15 * M, finished_ago=15 * M, paused=True),
                           consumer("default", finished_ago=15 * M)])
    assert (verdict.status, verdict.code, verdict.paused_lanes) == ("warning", "execution_paused", ["triggers"])


def test_a_stray_paused_lane_does_not_disarm_the_page_for_another() -> None:
    _, verdict, _ = judge([consumer("pollers", ready=1, head_age=15 * M, finished_ago=15 * M, paused=True),
                           consumer("default", ready=5, head_age=15 * M, finished_ago=15 * M)])
    assert (verdict.status, verdict.code) == ("critical", "execution_stalled")
    assert verdict.paused_lanes == ["pollers"]


def test_a_halt_does_not_excuse_a_dead_worker() -> None:
    _, verdict, _ = judge([consumer("triggers", ready=5, head_age=15 * M, finished_ago=15 * M, paused=True)],
                          heartbeats=[beat(ago=15 * M)])
    assert (verdict.status, verdict.code) == ("critical", "execution_stalled")


# ---- a wedged lane ---------------------------------------------------------------------------------

def wedge(ready: int = 30, claimed: int = 2, pool: int | None = 2, ages: tuple[timedelta, ...] = (35 * M, 31 * M),
          lane: str = "inference", heartbeats: list[Heartbeat] | None = None) -> QueueVerdict:
    runs = [run(lane, f"summary{i}", age) for i, age in enumerate(ages)]
    return judge([consumer(lane, ready=ready, claimed=claimed, pool=pool, head_age=20 * M),
                  consumer("default", finished_ago=timedelta(seconds=10))], runs, heartbeats)[1]


def test_the_2026_09_04_wedge_is_named() -> None:
    verdict = wedge()
    assert (verdict.status, verdict.code, verdict.title) == ("critical", "wedged_lane:inference", "Queue lane wedged")
    assert "2/2 threads" in verdict.summary and "31m to 35m" in verdict.summary and "30 ready" in verdict.summary


def test_a_slow_lane_is_not_a_wedge() -> None:
    assert wedge(ages=(35 * M, 5 * M)).code is None  # the youngest thread is inside the ceiling
    assert wedge(ready=0).code is None  # nothing is waiting behind the full pool
    assert wedge(claimed=1, ages=(35 * M,)).code is None  # a thread is free
    assert wedge(pool=None).code is None  # no known pool to be full against
    assert wedge(ages=(14 * M, 14 * M)).code is None  # nobody is past the ceiling
    assert wedge(ages=(35 * M,)).code is None  # a claim no run explains cannot be aged


def test_no_live_worker_is_never_a_wedge() -> None:
    verdict = wedge(heartbeats=[beat(ago=6 * M), beat(service="alerts", instance="a1")])
    assert verdict.code is None or not verdict.code.startswith("wedged_lane")


def test_a_lane_without_a_ceiling_is_never_wedged() -> None:
    runs = [run("events", "x", 5 * 60 * M), run("events", "y", 5 * 60 * M)]
    _, verdict, _ = judge([consumer("events", ready=30, claimed=2, pool=2, head_age=M)], runs)
    assert verdict.status == "ok"


def test_a_wedge_is_checked_before_the_backlog_it_causes() -> None:
    runs = [run("inference", "a", 80 * M), run("inference", "b", 70 * M)]
    _, verdict, _ = judge([consumer("inference", ready=200, claimed=2, pool=2, head_age=65 * M),
                           consumer("default")], runs)
    assert verdict.code == "wedged_lane:inference"


# ---- the backlog branches ---------------------------------------------------------------------------

def test_a_starved_lane_is_named_with_its_oldest_age() -> None:
    _, verdict, _ = judge([consumer("inference", ready=160, head_age=75 * M), consumer("default", ready=2,
                                                                                       head_age=timedelta(seconds=3))])
    assert (verdict.code, verdict.title) == ("backlog_lane:inference", "Queue backlog critical")
    assert "inference: 160 ready" in verdict.summary and "oldest waiting 1h 15m" in verdict.summary


def test_starved_lane_needs_both_its_own_depth_and_its_own_age() -> None:
    assert judge([consumer("inference", ready=149, head_age=75 * M)])[1].status == "ok"
    draining = judge([consumer("inference", ready=160, head_age=59 * M)])[1]
    assert (draining.status, draining.title) == ("warning", "Queue backlog elevated")
    assert judge([consumer("default", ready=120, head_age=10 * M)])[1].code == "backlog_lane:default"


def test_the_2026_09_02_queue_blind_firing_does_not_recur() -> None:
    lanes = [consumer("inference", ready=68, head_age=57 * M), consumer("maintenance", ready=23, head_age=56 * M),
             consumer("triggers", ready=18, head_age=4 * M)]
    stats, verdict, _ = judge(lanes)
    assert stats.ready_count == 109 and stats.oldest_ready_age_seconds == 57 * 60  # the old rule's two operands
    assert verdict.status == "ok"
    # The other lane reading 12m instead of 4m does not re-fire it: it is the only lane past its own age.
    lanes[2] = consumer("triggers", ready=18, head_age=12 * M)
    assert judge(lanes)[1].status == "ok"


def test_a_stalled_worker_across_lanes() -> None:
    lanes = [consumer("default", ready=60, head_age=12 * M), consumer("pollers", ready=45, head_age=11 * M),
             consumer("triggers", ready=1, head_age=timedelta(seconds=0))]  # just handed a job: not silencing
    _, verdict, _ = judge(lanes)
    assert (verdict.code, verdict.title) == ("backlog_cross_lane", "Queue backlog critical")
    assert "105 ready" in verdict.summary


def test_cross_lane_sums_only_the_stalled_lanes() -> None:
    assert judge([consumer("default", ready=54, head_age=12 * M), consumer("pollers", ready=45, head_age=11 * M)]
                 )[1].status == "ok"  # 99
    assert judge([consumer("default", ready=90, head_age=12 * M), consumer("pollers", ready=50, head_age=M)]
                 )[1].status == "ok"  # one stalled lane; the draining one is not part of the backlog


# ---- the page ------------------------------------------------------------------------------------------

def test_formatting() -> None:
    assert [format_age(s) for s in (18, 41 * 60, 2 * 3600 + 5 * 60, 3600)] == ["18s", "41m", "2h 5m", "1h"]
    assert format_breakdown(None) == "unavailable" and format_breakdown([]) == "none"
    assert format_ages(None) == "unavailable" and format_ages([]) == "none"
    assert format_ages([Age(name="inference", age_seconds=2460), Age(name="default", age_seconds=18)]) == \
        "inference 41m, default 18s"


def test_the_page_body() -> None:
    split = {"zimmer.jobs.backlog.inference.title": 30, "zimmer.jobs.backlog.inference.summary": 10}
    stats, verdict, readings = judge([
        consumer("inference", ready=40, head_age=27 * M, subject="zimmer.jobs.backlog.inference.summary",
                 by_subject=split),
        consumer("default", ready=7, head_age=timedelta(seconds=18))])
    body = page_body(stats, verdict, worker_statistics(readings.heartbeats, T0)).splitlines()
    assert body[0] == "Ready (waiting on a worker): 47, oldest waiting 27m (inference / backlog.summary)"
    assert body[1] == "Ready by lane: inference 40, default 7"
    assert body[2] == "Ready by subject: backlog.title 30, backlog.summary 10, (unknown) 6, backlog.sweep 1"
    assert body[3] == "Oldest ready by lane: inference 27m, default 18s"
    assert "Workers: 1 active / 1 registered" in body
    assert "get_system_health MCP tool" in body[-1] and "GET /api/v1/health" in body[-1]


# ---- overall --------------------------------------------------------------------------------------------

def key(state: str) -> CronKeyReading:
    return CronKeyReading(key=f"backlog.{state}", service="backlog", job=state, cadence="0 */10 * * * *",
                          lane="default", state=state, reason=f"why {state}", grace_seconds=1800,
                          last_produced_at=None, owed_since=None)


def test_overall_status() -> None:
    workers = worker_statistics([beat()], T0)
    ok = QueueVerdict(status="ok", summary="fine")
    assert overall_status(ok, CronHealth(keys=[key("fresh")]), workers, True) == "ok"
    assert overall_status(ok, CronHealth(status="warning", keys=[key("overdue")]), workers, True) == "warning"
    assert overall_status(ok, CronHealth(status="critical", keys=[key("stale")]), workers, True) == "critical"
    assert overall_status(QueueVerdict(status="warning", summary="x"), CronHealth(), workers, True) == "warning"
    assert overall_status(ok, CronHealth(), workers, False) == "critical"


def test_summary_prose() -> None:
    stats, verdict, readings = judge([consumer("default", ready=2, head_age=M)])
    cron = CronHealth(status="critical", keys=[key("fresh"), key("fresh"), key("stale")])
    recovery = QueueRecoveryStatus(active=True, entered_by="ops", reason="burst", lanes=["triggers"],
                                   expires_at=T0 + 60 * M)
    text = summary_prose(overall="critical", stats=stats, verdict=verdict, cron=cron,
                         workers=worker_statistics(readings.heartbeats, T0), recovery=recovery)
    assert text.splitlines()[0] == "Overall: critical"
    assert "Cron freshness: 2 keys fresh, 1 stale" in text and "backlog.stale stale: why stale" in text
    assert "Workers: 1 active / 1 registered" in text and "Queue recovery mode: active" in text


# ---- properties -------------------------------------------------------------------------------------------

LANE_NAMES = ["default", "pollers", "triggers", "auth", "inference", "maintenance", "events", "ingest"]
SUBJECTS = [f"zimmer.events.x.s{i}" for i in range(9)]

consumers_strategy = st.lists(st.builds(
    lambda lane, service, ready, claimed, head, split: consumer(
        lane, service=service, ready=ready, claimed=claimed, head_age=head * M,
        subject=SUBJECTS[0], by_subject=split),
    st.sampled_from(LANE_NAMES), st.sampled_from(["backlog", "spot-gate", "alerts"]),
    st.integers(0, 300), st.integers(0, 5), st.integers(0, 300),
    st.none() | st.dictionaries(st.sampled_from(SUBJECTS), st.integers(0, 40), max_size=9),
), max_size=12)


@settings(max_examples=200, deadline=None)
@given(consumers_strategy)
def test_breakdowns_add_up_to_the_totals(consumers: list[ConsumerReading]) -> None:
    stats, _, _ = judge(consumers)
    ready = sum(c.ready for c in consumers)
    assert stats.ready_count == ready == sum(c.count for c in stats.ready_count_by_lane)
    assert sum(c.count for c in stats.ready_count_by_subject) == ready
    assert len(stats.ready_count_by_subject) <= 6
    assert stats.claimed_count == sum(c.count for c in stats.claimed_count_by_lane)
    assert sum(c.count for c in stats.claimed_count_by_subject) == stats.claimed_count
    assert all(c.count > 0 for c in stats.ready_count_by_lane)
    ages = [a.age_seconds for a in stats.oldest_ready_age_seconds_by_lane]
    assert stats.oldest_ready_age_seconds == max(ages, default=None)
    assert (stats.head_of_line.age_seconds if stats.head_of_line else None) == stats.oldest_ready_age_seconds


@settings(max_examples=300, deadline=None)
@given(consumers_strategy)
def test_backlog_branches_only_narrow_the_queue_blind_rule(consumers: list[ConsumerReading]) -> None:
    stats, verdict, _ = judge(consumers)
    if verdict.code and verdict.code.startswith("backlog_"):
        # the old rule: global ready ≥ 100 and the global oldest head ≥ 10 minutes
        assert stats.ready_count >= 100 and (stats.oldest_ready_age_seconds or 0) >= 600
        stalled = [lane for lane in stats.lanes if lane.ready and lane.oldest_ready_age_seconds is not None
                   and lane.oldest_ready_age_seconds >= lane.stall_age_seconds]
        assert stalled, "no lane past its own stall age, yet a backlog branch fired"
        if verdict.code == "backlog_cross_lane":
            assert len(stalled) >= 2 and sum(lane.ready for lane in stalled) >= 100
        else:
            lane = verdict.code.split(":", 1)[1]
            assert any(s.lane == lane and s.ready >= s.depth_threshold for s in stalled)


shallow_lanes = st.lists(st.builds(
    lambda lane, ready, head: consumer(lane, ready=ready, head_age=head * M),
    st.sampled_from(LANE_NAMES), st.integers(0, 99), st.integers(0, 90)), max_size=8, unique_by=lambda c: c.lane)


@settings(max_examples=300, deadline=None)
@given(shallow_lanes)
def test_with_no_lane_past_its_own_depth_only_a_cross_lane_stall_can_fire(consumers: list[ConsumerReading]) -> None:
    stats, verdict, _ = judge(consumers)
    assert not (verdict.code or "").startswith("backlog_lane")
    stalled = [c for c in consumers if c.ready and (T0 - c.oldest_ready_at) >= threshold_for(c.lane).stall_age]
    expected = len(stalled) >= 2 and sum(c.ready for c in stalled) >= 100
    assert (verdict.code == "backlog_cross_lane") == expected
