"""Queue recovery mode on real NATS and PostgreSQL (issue 15; seed 003 "Queue recovery mode"):
entering pauses exactly the demand-side job consumers (auth keeps running), ticks still arrive but
are not delivered, re-entering extends, exit resumes (hand-paused ones too), JetStream's own pause
deadline lifts it, the expiry job lifts it and pages that it was the TTL, status is inactive once
the window elapsed even before either path ran, and a server without consumer pause is refused."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alerting import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.service import build
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import health as h
from zimmer_common.contracts.alerts import LIST_ALERTS, AlertQuery
from zimmer_common.errors import ZimmerError
from zimmer_common.jobs import JobContext, JobRunner, JobSpec
from zimmer_common.settings import Environment

DEMO_JOBS = [("poll", "pollers"), ("work", "default"), ("login", "auth")]


@pytest.fixture
def clock() -> FrozenClock:
    # JetStream's pause deadline is on the server's real clock, so the frozen clock starts at real now.
    return FrozenClock(datetime.now(UTC))


async def start(settings_factory: Any, clock: FrozenClock) -> tuple[Any, JobRunner, list[str]]:
    service = build(settings_factory(env=Environment.TEST), clock=clock,
                    alert_settings=AlertSettings(alert_check_seconds=3600, health_check_seconds=3600))
    await service.start()
    ran: list[str] = []

    def job(name: str) -> Any:
        async def run(_ctx: JobContext) -> None:
            ran.append(name)
        return run

    runner = JobRunner(service.bus, ctx="demo", service="demo", instance_id="demo-1", engine=None,
                       jobs=[JobSpec(name, lane, job(name)) for name, lane in DEMO_JOBS])
    await runner.start()
    return service, runner, ran


async def stop(service: Any, runner: JobRunner) -> None:
    await runner.stop(grace=1)
    await service.stop()


async def paused(service: Any) -> dict[str, bool]:
    listing = await service.bus.js_api("CONSUMER.LIST.ZIMMER_JOBS", {})
    return {c["name"]: bool(c.get("paused")) for c in listing["consumers"]}


async def page_titles(service: Any) -> dict[str, str]:
    issues = (await service.bus.request(LIST_ALERTS, AlertQuery())).issues
    return {i.title: i.last_message for i in issues}


def enter(reason: str = "runaway pollers", ttl: int = 60, actor: str = "ops") -> h.EnterQueueRecoveryMode:
    return h.EnterQueueRecoveryMode(reason=reason, ttl_minutes=ttl, actor=actor)


async def test_enter_pauses_the_demand_side_extend_then_exit_resumes(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, runner, ran = await start(settings_factory, clock)
    try:
        status = await service.bus.request(h.ENTER_QUEUE_RECOVERY, enter())
        assert status.active and status.entered_by == "ops" and status.expires_at == clock.now() + timedelta(hours=1)
        assert status.paused_consumers == ["jobs_alerts_maintenance", "jobs_demo_default", "jobs_demo_pollers"]
        assert await paused(service) == {"jobs_alerts_maintenance": True, "jobs_demo_default": True,
                                         "jobs_demo_pollers": True, "jobs_demo_auth": False, "jobs_alerts_auth": False}
        registry = service.metrics.registry
        assert registry.get_sample_value("zimmer_queue_recovery_mode_active") == 1
        assert registry.get_sample_value("zimmer_queue_recovery_mode_expires_at_seconds") == \
            status.expires_at.timestamp()

        await runner.enqueue("poll")  # enqueue keeps working: the tick waits in the stream
        await runner.enqueue("login")  # auth is never paused
        await eventually(lambda: _true("login" in ran), "the auth job to run")
        await asyncio.sleep(1.5)
        assert "poll" not in ran
        subjects = (await service.bus.js_api("STREAM.INFO.ZIMMER_JOBS", {"subjects_filter": "zimmer.jobs.demo.>"}))
        assert "zimmer.jobs.demo.pollers.poll" in subjects["state"]["subjects"]

        clock.advance(60)
        extended = await service.bus.request(h.ENTER_QUEUE_RECOVERY, enter("still draining", ttl=120, actor="ops2"))
        assert extended.expires_at == clock.now() + timedelta(minutes=120)
        assert extended.entered_at == status.entered_at and "extended by ops2" in (extended.reason or "")
        info = await service.bus.js_api("CONSUMER.INFO.ZIMMER_JOBS.jobs_demo_pollers")
        assert datetime.fromisoformat(info["config"]["pause_until"]) == extended.expires_at

        lifted = await service.bus.request(h.EXIT_QUEUE_RECOVERY, h.ExitQueueRecoveryMode(actor="ops"))
        assert not lifted.active and lifted.resumed_by_hand == []
        assert lifted.resumed_consumers == ["jobs_alerts_maintenance", "jobs_demo_default", "jobs_demo_pollers"]
        assert not any((await paused(service)).values())
        await eventually(lambda: _true("poll" in ran), "the waiting poller tick to drain once lifted")
        assert not (await service.bus.request(h.QUEUE_RECOVERY_STATUS, h.HealthQuery())).active
        assert registry.get_sample_value("zimmer_queue_recovery_mode_active") == 0

        async def all_paged() -> bool:
            titles = await page_titles(service)
            return {"Queue recovery mode entered", "Queue recovery mode extended",
                    "Queue recovery mode lifted"} <= set(titles)
        await eventually(all_paged, "enter, extend and exit pages")
        titles = await page_titles(service)
        assert "lifted by ops" in titles["Queue recovery mode lifted"]
    finally:
        await stop(service, runner)


async def test_exit_resumes_consumers_paused_by_hand_and_reports_them(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, runner, _ran = await start(settings_factory, clock)
    try:
        until = (datetime.now(UTC) + timedelta(minutes=30)).isoformat().replace("+00:00", "Z")
        await service.bus.js_api("CONSUMER.PAUSE.ZIMMER_JOBS.jobs_demo_default", {"pause_until": until})
        lifted = await service.bus.request(h.EXIT_QUEUE_RECOVERY, h.ExitQueueRecoveryMode(actor="anonymous"))
        assert lifted.resumed_consumers == lifted.resumed_by_hand == ["jobs_demo_default"]
        assert not any((await paused(service)).values())
    finally:
        await stop(service, runner)


async def test_jetstream_deadline_and_the_expiry_job_each_lift_it(settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # Entered "5 minutes ago" by the frozen clock with the minimum TTL: the pause ends in 2 s of real time.
    clock = FrozenClock(datetime.now(UTC) - timedelta(minutes=10))
    service, runner, ran = await start(settings_factory, clock)
    try:
        clock.advance((datetime.now(UTC) - timedelta(minutes=5) + timedelta(seconds=2) - clock.now()).total_seconds())
        status = await service.bus.request(h.ENTER_QUEUE_RECOVERY, enter(ttl=5))
        assert status.active
        await runner.enqueue("work")
        await asyncio.sleep(0.5)
        assert "work" not in ran
        # Path 1: JetStream resumes the consumer by itself at pause_until, nobody calling anything.
        await eventually(lambda: _true("work" in ran), "JetStream to lift the pause at its deadline", tries=200)
        assert not any((await paused(service)).values())

        clock.advance(5 * 60)  # past expires_at: status says off before either path has touched the row
        assert not (await service.bus.request(h.QUEUE_RECOVERY_STATUS, h.HealthQuery())).active
        # Path 2: the expiry job (called as its tick would) stamps the exit as the TTL's and pages so.
        assert await service.recovery.expire() == "lifted"
        assert await service.recovery.expire() == "off"

        async def ttl_paged() -> bool:
            return "not a person" in (await page_titles(service)).get("Queue recovery mode lifted", "")
        await eventually(ttl_paged, "the TTL's lift page")
    finally:
        await stop(service, runner)


async def test_the_expiry_job_lifts_a_halt_jetstream_still_holds(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, runner, ran = await start(settings_factory, clock)
    try:
        await service.bus.request(h.ENTER_QUEUE_RECOVERY, enter(ttl=5))
        await runner.enqueue("poll")
        assert await service.recovery.expire() == "on"
        clock.advance(5 * 60)  # the frozen clock says it elapsed; JetStream's real deadline is minutes away
        assert await service.recovery.expire() == "lifted"
        await eventually(lambda: _true("poll" in ran), "the tick to drain after the job lifted the halt")
    finally:
        await stop(service, runner)


async def test_a_consumer_created_during_the_halt_is_paused_by_the_expiry_job(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, runner, _ran = await start(settings_factory, clock)
    late = JobRunner(service.bus, ctx="late", service="late", instance_id="late-1", engine=None,
                     jobs=[JobSpec("sweep", "maintenance", _noop)])
    try:
        await service.bus.request(h.ENTER_QUEUE_RECOVERY, enter())
        await late.start()
        assert (await paused(service))["jobs_late_maintenance"] is False
        assert await service.recovery.expire() == "repaused 1"
        assert (await paused(service))["jobs_late_maintenance"] is True
    finally:
        await late.stop(grace=1)
        await stop(service, runner)


async def test_a_server_without_consumer_pause_is_refused_and_nothing_is_written(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, runner, _ran = await start(settings_factory, clock)
    try:
        service.bus.nc._server_info["version"] = "2.10.22"  # what the version check reads
        with pytest.raises(ZimmerError) as refused:
            await service.recovery.enter(enter())
        assert refused.value.code.value == "refused" and "2.11" in refused.value.message
        assert not any((await paused(service)).values())
        assert not (await service.recovery.status()).active
        async with service.engine.connect() as conn:
            from sqlalchemy import text
            assert (await conn.execute(text("SELECT count(*) FROM alerts.queue_recovery_mode"))).scalar_one() == 0
    finally:
        await stop(service, runner)


async def _noop(_ctx: JobContext) -> None:
    return None


async def _true(value: bool) -> bool:
    return value
