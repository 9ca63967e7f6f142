"""The seed's three queue incidents, replayed on real JetStream and PostgreSQL with a frozen clock
(issue 15): the ten-hour stall (2026-08-13) pages "Nothing is executing" within its first check
window; the queue-blind page (2026-09-02) does not fire, while a real single-lane starvation pages
naming the lane and its oldest age; the wedge (2026-09-04) is told apart from a slow lane.

JetStream stamps messages and acks with the real time, so the frozen clock starts at the real
"now" and is advanced past it: a message published at the start is then as old as the advance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from alerting import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from incidents import enqueue, heartbeat, lane_consumer, monitor_of, paged, pages, started  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.handlers.health import HealthReporter
from zimmer_alerts.handlers.monitor import HealthMonitor
from zimmer_alerts.service import build
from zimmer_alerts.store import health_records
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import ops
from zimmer_common.settings import Environment
from zimmer_common.unit_of_work import UnitsOfWork


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
async def alerts(settings_factory, clock):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    service = build(settings_factory(env=Environment.PRODUCTION), clock=clock,
                    alert_settings=AlertSettings(alert_check_seconds=3600, health_check_seconds=3600))
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def test_the_ten_hour_stall_pages_nothing_is_executing_within_its_first_check_window(alerts, clock) -> None:
    sub = await lane_consumer(alerts, "spot", "default", pool=2)
    await enqueue(alerts, "spot", "default", ["recheck_due"])
    [msg] = await sub.fetch(1, timeout=5)
    await msg.ack_sync()  # the last thing that finished: now
    await enqueue(alerts, "spot", "default", ["fire_wakes", "hold_repair"])  # fast-lane work nobody takes
    await heartbeat(alerts, clock)  # the worker's heartbeat is fresh: the stall is not a dead process
    monitor = monitor_of(alerts, clock)

    clock.advance(9 * 60)
    report = await monitor.check_once()
    assert report.verdict.status != "critical", report.verdict  # nine minutes is a slow deploy, not an outage
    await heartbeat(alerts, clock)
    clock.advance(61 + 5)  # just past ten minutes: nothing finished, a fast lane's head ten minutes old
    report = await monitor.check_once()
    assert (report.verdict.code, report.verdict.title) == ("execution_stalled", "Nothing is executing")
    assert report.overall_status == "critical"
    assert await pages(alerts, "Nothing is executing") == []  # one critical check is not a page
    clock.advance(60)
    await monitor.check_once()
    await eventually(lambda: paged(alerts, "Nothing is executing"), "the execution_stalled page")
    [issue] = await pages(alerts, "Nothing is executing")
    assert issue.last_message.startswith("Ready (waiting on a worker): 2")
    assert "get_system_health" in issue.last_message


async def test_a_deployment_that_never_finished_anything_is_not_stalled(alerts, clock) -> None:
    await lane_consumer(alerts, "spot", "default", pool=2)
    await enqueue(alerts, "spot", "default", ["recheck_due", "fire_wakes"])
    clock.advance(3600)
    report = await monitor_of(alerts, clock).check_once()
    assert report.verdict.code != "execution_stalled"


async def test_the_queue_blind_shape_does_not_page_and_a_starved_lane_names_itself(alerts, clock) -> None:
    await lane_consumer(alerts, "spot", "inference", pool=2)
    await lane_consumer(alerts, "spot", "maintenance", pool=2)
    await lane_consumer(alerts, "backlog", "pollers", pool=1)
    await enqueue(alerts, "spot", "inference", [f"title_{i}" for i in range(68)])
    await enqueue(alerts, "spot", "maintenance", [f"install_{i}" for i in range(23)])
    monitor = monitor_of(alerts, clock)
    clock.advance(57 * 60)
    await heartbeat(alerts, clock)
    await enqueue(alerts, "backlog", "pollers", ["github_snapshot"])  # fresh work beside the old
    for _ in range(3):
        report = await monitor.check_once()
        # 91 ready across lanes beside a 57-minute head: the old rule's two operands, neither a stall.
        assert report.verdict.status != "critical", report.verdict
    assert report.queue.head_of_line is not None and report.queue.head_of_line.lane == "inference"

    await enqueue(alerts, "spot", "inference", [f"summary_{i}" for i in range(90)])  # 158 deep
    clock.advance(5 * 60)  # the head is now 62 minutes old (a hair under): past inference's own 150 / 60 m
    await heartbeat(alerts, clock)
    report = await monitor.check_once()
    assert (report.verdict.code, report.verdict.title) == ("backlog_lane:inference", "Queue backlog critical")
    await monitor.check_once()
    await eventually(lambda: paged(alerts, "Queue backlog critical"), "the starved-lane page")
    [issue] = await pages(alerts, "Queue backlog critical")
    first_line = issue.last_message.splitlines()[0]
    assert "inference" in first_line and "1h 1m" in first_line, first_line


async def test_a_wedge_is_told_apart_from_a_slow_lane(alerts, clock) -> None:
    sub = await lane_consumer(alerts, "spot", "maintenance", pool=2)
    await enqueue(alerts, "spot", "maintenance", ["docker_prune", "bundle_install"])
    held = await sub.fetch(2, timeout=5)  # both threads taken, never acked
    assert len(held) == 2
    await enqueue(alerts, "spot", "maintenance", ["transcript_archive", "token_backfill"])  # ready behind them
    t0 = clock.now()
    await started(alerts, "docker_prune", "maintenance", t0, "1")
    await started(alerts, "bundle_install", "maintenance", t0 + timedelta(minutes=65), "2")
    monitor = monitor_of(alerts, clock)

    clock.advance(95 * 60)  # the oldest is past the 90-minute ceiling, the youngest (30 min) is not
    await heartbeat(alerts, clock)
    slow = await monitor.check_once()
    assert not (slow.verdict.code or "").startswith("wedged_lane"), slow.verdict  # one hung thread is a slow lane
    lane = next(x for x in slow.queue.lanes if x.lane == "maintenance")
    assert (lane.claimed, lane.ready) == (2, 2)  # the lane's pool also counts alerts' own maintenance consumer

    clock.advance(65 * 60)  # now every thread is past the ceiling, with ready work behind them
    await heartbeat(alerts, clock)
    wedged = await monitor.check_once()
    assert (wedged.verdict.code, wedged.verdict.title) == ("wedged_lane:maintenance", "Queue lane wedged")
    for msg in held:
        await msg.ack_sync()


async def test_a_wedge_needs_a_live_worker(alerts, clock) -> None:
    sub = await lane_consumer(alerts, "spot", "maintenance", pool=1)
    await enqueue(alerts, "spot", "maintenance", ["docker_prune"])
    [held] = await sub.fetch(1, timeout=5)
    await enqueue(alerts, "spot", "maintenance", ["bundle_install"])
    await started(alerts, "docker_prune", "maintenance", clock.now(), "1")
    clock.advance(3 * 3600)  # no heartbeat of spot-gate: its claims are a dead process's, not a wedge
    report = await monitor_of(alerts, clock).check_once()
    assert not (report.verdict.code or "").startswith("wedged_lane"), report.verdict
    await held.ack_sync()


async def test_a_schedule_that_stopped_producing_pages_cron_schedule_stale(alerts, clock) -> None:
    """#619's silence: spot-gate is alive, its recheck_due has produced nothing for three hours,
    and other keys' ticks witness that the scheduler was firing. A disabled key is never judged."""
    start = clock.now()
    async with alerts.engine.begin() as conn:
        for minute in range(180):  # backlog.recover_starting ticked every minute: the witnesses
            at = start + timedelta(minutes=minute, seconds=45)
            await health_records.record_job_run(conn, ops.JobRun(
                service="backlog", job="recover_starting", lane="default", run_id=str(minute + 1),
                state=ops.JobRunState.FINISHED, at=at, instance_id="backlog-1", enqueued_at=at, started_at=at,
                finished_at=at))
    await heartbeat(alerts, clock)  # spot-gate's instance started an hour before `start`
    clock.advance(3 * 3600)
    await heartbeat(alerts, clock)
    reporter = HealthReporter(BusLink(alerts), UnitsOfWork(alerts, "alerts"), clock, Environment.PRODUCTION,
                              disabled_keys={"spot-gate.fire_wakes"})
    monitor = HealthMonitor(reporter, alerts.pager, reporter.units)
    report = await monitor.check_once()
    keys = {k.key: k for k in report.cron.keys}
    assert keys["spot-gate.recheck_due"].state == "stale", keys["spot-gate.recheck_due"]
    assert "Not produced" in keys["spot-gate.recheck_due"].reason
    assert keys["spot-gate.fire_wakes"].state == "disabled"
    assert keys["backlog.recover_starting"].state == "fresh"
    assert report.cron.status == "critical" and report.overall_status == "critical"
    await monitor.check_once()
    await eventually(lambda: paged(alerts, "Cron schedule stale"), "the cron page")
    [issue] = await pages(alerts, "Cron schedule stale")
    assert "spot-gate.recheck_due" in issue.last_message


async def test_concurrent_callers_share_one_report(alerts, clock) -> None:
    import asyncio

    from prometheus_client import CollectorRegistry

    from zimmer_alerts.handlers.health_metrics import HealthMetrics

    registry = CollectorRegistry()
    metrics = HealthMetrics(registry)
    reporter = HealthReporter(BusLink(alerts), UnitsOfWork(alerts, "alerts"), clock, Environment.TEST,
                              metrics=metrics)
    reports = await asyncio.gather(*(reporter.report() for _ in range(10)))
    assert len({id(r) for r in reports}) == 1 and reports[0].queue.readable
    assert registry.get_sample_value("zimmer_health_report_seconds_count") == 1  # computed once
    await reporter.report()
    assert registry.get_sample_value("zimmer_health_report_seconds_count") == 2  # a later caller: a new one


async def test_a_per_host_sweep_silent_on_one_host_is_stale_there_only(alerts, clock) -> None:
    """One sweeper runs beside each runtime host's disk (DESIGN §9), each on its own ticks: cron
    freshness judges each host's key apart, so a host whose sweeps stopped is noticed while the
    other host's run ("A sweep that stops is noticed": per key)."""
    from zimmer_common.schedule import ScheduleEntry

    entry = ScheduleEntry("sweeper", "disk_sweep", "0 */10 * * * *", "maintenance",
                          frozenset({Environment.PRODUCTION}), per_host=True)
    witness = ScheduleEntry("backlog", "recover_starting", "45 * * * * *", "default",
                            frozenset({Environment.PRODUCTION}))
    for host in ("host-a", "host-b"):  # what each host's JobRunner.install_schedules publishes
        await alerts.bus.publish(f"zimmer.jobs.schedule.sweeper-{host}.disk_sweep", b'{"job": "disk_sweep"}',
                                 headers={"Nats-Schedule": "@every 24h",
                                          "Nats-Schedule-Target": f"zimmer.jobs.sweeper-{host}.maintenance.disk_sweep"})
    start = clock.now()
    async with alerts.engine.begin() as conn:
        for minute in range(180):
            at = start + timedelta(minutes=minute, seconds=45)
            await health_records.record_job_run(conn, ops.JobRun(
                service="backlog", job="recover_starting", lane="default", run_id=str(minute + 1),
                state=ops.JobRunState.FINISHED, at=at, instance_id="backlog-1", enqueued_at=at, started_at=at,
                finished_at=at))
            if minute % 10 == 0:  # host-a's disk sweep ran every ten minutes; host-b's never
                await health_records.record_job_run(conn, ops.JobRun(
                    service="sweeper@host-a", job="disk_sweep", lane="maintenance", run_id=str(minute + 1),
                    state=ops.JobRunState.FINISHED, at=at, instance_id="sweeper-a", enqueued_at=at,
                    started_at=at, finished_at=at))
    await heartbeat(alerts, clock, "sweeper")
    clock.advance(3 * 3600)
    await heartbeat(alerts, clock, "sweeper")
    reporter = HealthReporter(BusLink(alerts), UnitsOfWork(alerts, "alerts"), clock, Environment.PRODUCTION,
                              schedule=(entry, witness))
    report = await reporter.report()
    keys = {k.key: k for k in report.cron.keys}
    assert set(keys) == {"sweeper@host-a.disk_sweep", "sweeper@host-b.disk_sweep", "backlog.recover_starting"}
    assert keys["sweeper@host-a.disk_sweep"].state == "fresh", keys["sweeper@host-a.disk_sweep"]
    assert keys["sweeper@host-b.disk_sweep"].state == "stale", keys["sweeper@host-b.disk_sweep"]
    disabled = HealthReporter(BusLink(alerts), UnitsOfWork(alerts, "alerts"), clock, Environment.PRODUCTION,
                              schedule=(entry, witness), disabled_keys={"sweeper.disk_sweep"})
    keys = {k.key: k for k in (await disabled.report()).cron.keys}
    assert {keys[f"sweeper@{h}.disk_sweep"].state for h in ("host-a", "host-b")} == {"disabled"}


# ---- issue 26: a lane that stops draining, and conditions that outlive a restart -------------------

SWEEP = "orphan_clone_sweep"


def sweeper_schedule() -> tuple:  # type: ignore[type-arg]  # of ScheduleEntry, imported lazily
    from zimmer_common.schedule import ScheduleEntry

    return (ScheduleEntry("sweeper", SWEEP, "0 0 */6 * * *", "maintenance", frozenset({Environment.PRODUCTION}),
                          per_host=True),)


async def dead_host_lane(alerts, clock, host: str = "host-b"):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """A runtime host's sweeper that finished one sweep and then died: its schedule keeps ticking into
    its lane (one coalesced tick waiting), and nothing takes it."""
    await alerts.bus.publish(f"zimmer.jobs.schedule.sweeper-{host}.{SWEEP}", b'{"job": "sweep"}', headers={
        "Nats-Schedule": "0 0 */6 * * *", "Nats-Schedule-Target": f"zimmer.jobs.sweeper-{host}.maintenance.{SWEEP}"})
    sub = await lane_consumer(alerts, f"sweeper-{host}", "maintenance", pool=2)
    await enqueue(alerts, f"sweeper-{host}", "maintenance", [SWEEP])
    [msg] = await sub.fetch(1, timeout=5)
    await msg.ack_sync()  # the last sweep this host finished
    await enqueue(alerts, f"sweeper-{host}", "maintenance", [SWEEP])  # the tick nobody takes
    return sub


async def test_a_dead_sweeper_host_pages_within_its_lanes_ceiling_and_resolves(alerts, clock) -> None:
    """Seed 003 cron freshness: a waiting copy reads "overdue" because "a queue that is not draining is
    what the lane thresholds … page on"; but ticks coalesce, so a dead lane's depth stays at its number
    of jobs and its head is the newest tick's age: no threshold ever fires (issue 26 #2). A tick that
    has waited with nothing finished on its lane past the lane's ceiling (maintenance: 90 minutes) is
    stale and pages."""
    sub = await dead_host_lane(alerts, clock)
    reporter = HealthReporter(BusLink(alerts), UnitsOfWork(alerts, "alerts"), clock, Environment.PRODUCTION,
                              schedule=sweeper_schedule())
    monitor = HealthMonitor(reporter, alerts.pager, reporter.units)
    clock.advance(80 * 60)
    key = (await monitor.check_once()).cron.keys[0]
    assert key.key == "sweeper@host-b.orphan_clone_sweep" and key.state != "stale", key  # inside the ceiling
    clock.advance(11 * 60)  # 91 minutes: past the ceiling, whatever the tick's own timestamp says
    report = await monitor.check_once()
    [key] = report.cron.keys
    assert key.state == "stale" and "past the maintenance lane's 1h 30m ceiling" in key.reason, key
    lane = next(lane for lane in report.queue.lanes if lane.lane == "maintenance")
    assert lane.oldest_ready_age_seconds is not None and lane.oldest_ready_age_seconds >= 90 * 60
    clock.advance(60)
    await monitor.check_once()
    await eventually(lambda: paged(alerts, "Cron schedule stale"), "the cron page")
    [issue] = await pages(alerts, "Cron schedule stale")
    assert "sweeper@host-b.orphan_clone_sweep" in issue.last_message

    [msg] = await sub.fetch(1, timeout=5)  # the host is back: it takes its tick
    await msg.ack_sync()
    assert (await monitor.check_once()).cron.keys[0].state == "fresh"
    await eventually(lambda: _resolved(alerts, "health:cron_stale"), "the cron condition resolved")


async def _resolved(alerts, key: str) -> bool:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    from incidents import condition  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

    found = await condition(alerts, key)
    return found is not None and not found.still_true


async def _open(alerts, key: str) -> bool:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    from incidents import condition  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

    found = await condition(alerts, key)
    return found is not None and found.still_true


async def test_services_stopped_around_a_running_monitor_page_nothing_is_executing(alerts, clock) -> None:
    """Seed 003 "When nothing is executing": "No job has finished anywhere in the last 10 minutes,
    and either a lane that should turn work over in milliseconds has picked nothing up for that
    long, or no worker is alive." Issue 26 #1: with every other service stopped, the alerts
    service's own every-minute job and heartbeat are not the fleet's: the page fires, and it
    resolves once the lanes drain again."""
    spot = await lane_consumer(alerts, "spot", "default", pool=2)
    await enqueue(alerts, "spot", "default", ["sweep"])
    [msg] = await spot.fetch(1, timeout=5)
    await msg.ack_sync()
    await alerts.runner.enqueue("queue_recovery_expiry")  # the monitor's own job, on its own runner

    async def own_lane_finished() -> bool:
        info = await alerts.bus.js_api("CONSUMER.INFO.ZIMMER_JOBS.jobs_alerts_auth")
        return int(info.get("ack_floor", {}).get("consumer_seq", 0)) > 0

    await eventually(own_lane_finished, "the alerts service's own job finished")
    await enqueue(alerts, "spot", "default", ["recheck_due", "fire_wakes"])  # its ticks keep coming; nobody takes them
    await heartbeat(alerts, clock)  # spot-gate's last beat, then it stops
    monitor = monitor_of(alerts, clock)
    for _ in range(12):  # the monitor's own lane and heartbeat stay alive throughout
        clock.advance(60)
        await heartbeat(alerts, clock, "alerts")
        report = await monitor.check_once()
    assert (report.verdict.code, report.verdict.title) == ("execution_stalled", "Nothing is executing"), report.verdict
    await eventually(lambda: paged(alerts, "Nothing is executing"), "the execution_stalled page")

    for _ in range(2):  # the services are back: the lane drains
        [msg] = await spot.fetch(1, timeout=5)
        await msg.ack_sync()
    await heartbeat(alerts, clock)
    assert (await monitor.check_once()).verdict.status != "critical"
    await eventually(lambda: _resolved(alerts, "health:execution_stalled"), "the stall resolved")


async def test_a_restart_mid_incident_resolves_what_no_longer_holds(alerts, clock, settings_factory) -> None:
    """Issue 26 #4: a condition the monitor opened before the alerts service restarted was never
    resolved by the new process (its firing state lived in memory) and re-paged every repeat
    interval until someone resolved it by hand. The new process reads the conditions it owns from
    the ledger and resolves those whose check now passes."""
    await dead_host_lane(alerts, clock)
    schedule = sweeper_schedule()
    units = UnitsOfWork(alerts, "alerts")
    monitor = HealthMonitor(HealthReporter(BusLink(alerts), units, clock, Environment.PRODUCTION, schedule=schedule),
                            alerts.pager, units)
    clock.advance(92 * 60)
    await monitor.check_once()
    clock.advance(60)
    await monitor.check_once()
    await eventually(lambda: _open(alerts, "health:cron_stale"), "the cron condition open")

    await alerts.stop()  # the restart: a new process, nothing carried over in memory
    again = build(alerts.settings, clock=clock,
                  alert_settings=AlertSettings(alert_check_seconds=3600, health_check_seconds=3600))
    await again.start()
    try:
        sub = await again.bus.js.pull_subscribe_bind("jobs_sweeper-host-b_maintenance", stream="ZIMMER_JOBS")
        [msg] = await sub.fetch(1, timeout=5)  # the host is back meanwhile
        await msg.ack_sync()
        units = UnitsOfWork(again, "alerts")
        fresh = HealthMonitor(HealthReporter(BusLink(again), units, clock, Environment.PRODUCTION, schedule=schedule),
                              again.pager, units)
        await fresh.check_once()
        await eventually(lambda: _resolved(again, "health:cron_stale"), "resolved by the new process")
    finally:
        await again.stop()
