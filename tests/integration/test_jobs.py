"""The job runner on JetStream: schedules, lanes, singletons, coalescing, shutdown (DESIGN §4)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

import nats
import pytest
from sqlalchemy import text

from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.ops import JOB_RUN
from zimmer_common.contracts.subjects import Stream, job_subject, schedule_subject
from zimmer_common.db import create_engine, migrate
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.schedule import ScheduleEntry
from zimmer_common.service import Service
from zimmer_common.settings import Environment

TEST_ONLY = frozenset({Environment.TEST})


async def eventually(check: Callable[[], Awaitable[bool]], *, within: float = 20.0, what: str = "condition") -> None:
    """Poll until `check` holds; fail (not hang) when the bound passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def runs_table(database_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    await migrate(database_url, "backlog", None)
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE backlog.test_runs (job text, run_id text, instance text, "
                                "started_at timestamptz, finished_at timestamptz)"))
    yield engine
    await engine.dispose()


def recording_job(name: str, lane: str, engine, *, hold: Callable[[], Awaitable[None]] | None = None,  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
                  instance: str = "?") -> JobSpec:
    async def run(ctx: JobContext) -> None:
        started = ctx.clock.now()
        if hold:
            await hold()
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO backlog.test_runs VALUES (:j, :r, :i, :s, now())"),
                               {"j": name, "r": ctx.run_id, "i": instance, "s": started})

    return JobSpec(name, lane, run)


async def rows(engine, job: str | None = None) -> list:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with engine.connect() as conn:
        q = "SELECT job, run_id, instance, started_at, finished_at FROM backlog.test_runs"
        q += " WHERE job = :j ORDER BY started_at" if job else " ORDER BY started_at"
        return (await conn.execute(text(q), {"j": job})).all()


async def waiting_ticks(service: Service, subject: str) -> int:
    assert service.bus
    info = await service.bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}", {"subjects_filter": subject})
    return int((info["state"].get("subjects") or {}).get(subject, 0))


async def test_scheduled_job_ticks_once_per_tick_across_two_replicas(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    schedule = (ScheduleEntry("backlog", "tick", "@every 1s", "default", TEST_ONLY),)
    replicas = []
    for i in range(2):
        async def slow() -> None:
            # Longer than the cadence: the next tick replaces the running tick's message,
            # which frees the consumer's ack slot; only the singleton guard stops a second copy.
            await asyncio.sleep(1.5)

        replicas.append(Service("backlog", settings_factory(instance_id=f"replica-{i}"), schema="backlog",
                                jobs=[recording_job("tick", "default", runs_table, hold=slow, instance=f"replica-{i}")],
                                schedule=schedule, serve_metrics=False))
    for r in replicas:
        await r.start()
    try:
        async def four_runs() -> bool:
            return len(await rows(runs_table)) >= 4

        await eventually(four_runs, within=40, what="four ticks")
    finally:
        for r in replicas:
            await r.stop()
    runs = await rows(runs_table)
    run_ids = [r.run_id for r in runs]
    assert len(run_ids) == len(set(run_ids)), "a tick ran twice"
    for earlier, later in zip(runs, runs[1:], strict=False):
        assert later.started_at >= earlier.finished_at, "two copies of a singleton job overlapped"


async def test_long_job_holds_its_lane_and_waiting_ticks_coalesce(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    release = asyncio.Event()
    long_started = asyncio.Event()

    async def hold() -> None:
        if not long_started.is_set():
            long_started.set()
            await release.wait()

    service = Service("backlog", settings_factory(), schema="backlog", schedule=(), serve_metrics=False, jobs=[
        recording_job("long", "pollers", runs_table, hold=hold),
        recording_job("quick", "pollers", runs_table)])
    await service.start()
    assert service.runner
    try:
        await service.runner.enqueue("long")
        await asyncio.wait_for(long_started.wait(), timeout=20)
        for _ in range(3):
            await service.runner.enqueue("long")  # ticks arriving while one runs
        await service.runner.enqueue("quick")
        # At most one tick waits per job, however many arrived.
        assert await waiting_ticks(service, job_subject("backlog", "pollers", "long")) == 1
        await asyncio.sleep(1.0)
        assert await rows(runs_table, "quick") == [], "the pollers lane has one thread and it is held"
        release.set()

        async def drained() -> bool:
            return len(await rows(runs_table, "long")) == 2 and len(await rows(runs_table, "quick")) == 1

        await eventually(drained, what="the coalesced tick and the quick job")
        await asyncio.sleep(1.5)  # give a wrongly queued third copy the chance to show up
    finally:
        await service.stop()
    long_runs, quick_runs = await rows(runs_table, "long"), await rows(runs_table, "quick")
    assert len(long_runs) == 2, "three waiting ticks coalesce into one run, not three"
    assert quick_runs[0].started_at >= long_runs[0].finished_at


async def test_graceful_shutdown_finishes_the_job_in_flight(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    started = asyncio.Event()

    async def hold() -> None:
        started.set()
        await asyncio.sleep(1.0)

    service = Service("backlog", settings_factory(shutdown_grace_seconds=10), schema="backlog", schedule=(),
                      serve_metrics=False, jobs=[recording_job("inflight", "default", runs_table, hold=hold)])
    await service.start()
    assert service.runner
    observer = await nats.connect(service.settings.nats_url)
    events = await observer.subscribe(JOB_RUN)
    await observer.flush()  # the server knows the subscription before the first event is published
    await service.runner.enqueue("inflight")
    await asyncio.wait_for(started.wait(), timeout=20)
    await service.stop()  # SIGTERM path: stop fetching, finish in-flight, close
    assert len(await rows(runs_table, "inflight")) == 1
    states = []
    while True:
        try:
            msg = await events.next_msg(timeout=0.2)
        except Exception:  # noqa: BLE001 - no more buffered events
            break
        states.append(EventEnvelope.model_validate_json(msg.data).data["state"])
    await observer.close()
    assert states == ["enqueued", "started", "finished"]


async def test_failed_job_is_reported_and_acked_not_retried_in_a_loop(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    attempts = 0

    async def broken(ctx: JobContext) -> None:
        nonlocal attempts
        attempts += 1
        raise ValueError("broken job")

    service = Service("backlog", settings_factory(), schema="backlog", schedule=(), serve_metrics=False,
                      jobs=[JobSpec("broken", "default", broken)])
    await service.start()
    assert service.runner and service.bus
    try:
        events = await service.bus.nc.subscribe(JOB_RUN)
        await service.runner.enqueue("broken")
        failed = None
        for _ in range(100):
            msg = await events.next_msg(timeout=10)
            env = EventEnvelope.model_validate_json(msg.data)
            if env.data["state"] == "failed":
                failed = env
                break
        assert failed is not None and "ValueError: broken job" in failed.data["error"]
        await asyncio.sleep(1.0)
        assert attempts == 1
        assert await waiting_ticks(service, job_subject("backlog", "default", "broken")) == 0
        sample = service.metrics.registry.get_sample_value(
            "zimmer_job_runs_total", {"service": "backlog", "job": "broken", "lane": "default", "outcome": "failed"})
        assert sample == 1
    finally:
        await service.stop()


async def test_schedule_install_is_idempotent_and_removes_dropped_entries(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    jobs = [recording_job("a", "default", runs_table), recording_job("b", "default", runs_table)]
    service = Service("backlog", settings_factory(), schema="backlog", schedule=(), serve_metrics=False, jobs=jobs)
    await service.start()
    assert service.runner and service.bus
    bus = service.bus
    try:
        a = ScheduleEntry("backlog", "a", "0 0 3 * * *", "default", TEST_ONLY)
        b = ScheduleEntry("backlog", "b", "@every 1h", "default", TEST_ONLY)

        async def seq(job: str) -> int | None:
            resp = await bus.js_api(f"STREAM.MSG.GET.{Stream.JOBS.value}", {"last_by_subj": schedule_subject("backlog", job)})
            return resp.get("message", {}).get("seq")

        await service.runner.install_schedules([a, b])
        first = (await seq("a"), await seq("b"))
        await service.runner.install_schedules([a, b])
        assert (await seq("a"), await seq("b")) == first, "re-installing an unchanged schedule must not restart it"
        await service.runner.install_schedules([a])
        assert await seq("a") == first[0] and await seq("b") is None
        with pytest.raises(RuntimeError, match="implements no such job"):
            await service.runner.install_schedules([ScheduleEntry("backlog", "ghost", "@every 1h", "default", TEST_ONLY)])
    finally:
        await service.stop()


async def test_six_field_cron_is_accepted_by_the_server(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Every second: the server must read the leading seconds field, or this never ticks."""
    schedule = (ScheduleEntry("backlog", "cron", "* * * * * *", "default", TEST_ONLY),)
    service = Service("backlog", settings_factory(), schema="backlog", schedule=schedule, serve_metrics=False,
                      jobs=[recording_job("cron", "default", runs_table)])
    await service.start()
    try:
        async def two() -> bool:
            return len(await rows(runs_table, "cron")) >= 2

        await eventually(two, within=20, what="two cron ticks")
    finally:
        await service.stop()
    runs = await rows(runs_table, "cron")
    assert isinstance(runs[0].started_at, datetime)


async def test_a_per_host_job_runs_on_every_host_and_a_shared_one_once(settings_factory, runs_table) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """One sweeper runs beside each runtime host's disk (DESIGN §9): a per-host job's schedule
    ticks on each host's own subject, so two hosts each run it (on their own disk), two replicas
    on one host share it, and a shared job still runs once per tick across all of them."""
    schedule = (ScheduleEntry("backlog", "disk", "@every 1s", "default", TEST_ONLY, per_host=True),
                ScheduleEntry("backlog", "shared", "@every 1s", "default", TEST_ONLY))
    services = []
    for instance, host in (("a1", "host-a"), ("a2", "host-a"), ("b1", "host-b")):
        disk = recording_job("disk", "default", runs_table, instance=instance)
        services.append(Service("backlog", settings_factory(instance_id=instance, host=host), schema="backlog",
                                jobs=[JobSpec("disk", "default", disk.fn, per_host=True),
                                      recording_job("shared", "default", runs_table, instance=instance)],
                                schedule=schedule, serve_metrics=False))
    for s in services:
        await s.start()
    try:
        async def both_hosts_ran() -> bool:
            ran = {r.instance for r in await rows(runs_table, "disk")}
            return bool(ran & {"a1", "a2"}) and "b1" in ran and len(await rows(runs_table, "shared")) >= 2

        await eventually(both_hosts_ran, within=40, what="the per-host job on both hosts")
        assert services[0].bus is not None
        info = await services[0].bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}",
                                            {"subjects_filter": "zimmer.jobs.schedule.>"})
        subjects = set((info["state"].get("subjects") or {}).keys())
        assert {"zimmer.jobs.schedule.backlog-host-a.disk", "zimmer.jobs.schedule.backlog-host-b.disk",
                "zimmer.jobs.schedule.backlog.shared"} <= subjects, subjects
        assert "zimmer.jobs.schedule.backlog.disk" not in subjects
        await services[2].enqueue("disk")  # by hand: on its own host
    finally:
        for s in services:
            await s.stop()
    shared = await rows(runs_table, "shared")
    assert len({r.run_id for r in shared}) == len(shared), "a shared tick ran on two hosts"


async def test_a_retired_host_is_forgotten_with_its_schedules_and_consumers(settings_factory, runs_table,  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
                                                                           nats_url: str) -> None:
    """`zimmer jobs hosts` lists the hosts running per-host jobs; `zimmer jobs forget-host` removes a
    retired one's schedules and lane consumers (cron freshness judges every installed host, so a
    host retired on purpose must be forgotten on purpose), leaving the other host's alone."""
    import sys
    from pathlib import Path

    schedule = (ScheduleEntry("sweeper", "disk", "@every 1h", "maintenance", TEST_ONLY, per_host=True),)
    services = [Service("sweeper", settings_factory(instance_id=host, host=host), schema="backlog",
                        jobs=[JobSpec("disk", "maintenance", recording_job("disk", "maintenance", runs_table).fn,
                                      per_host=True)], schedule=schedule, serve_metrics=False)
                for host in ("host-a", "host-b")]
    for s in services:
        await s.start()
    zimmer = str(Path(sys.executable).with_name("zimmer"))

    async def cli(*args: str, exit_code: int = 0) -> str:
        proc = await asyncio.create_subprocess_exec(zimmer, "jobs", *args, "--nats-url", nats_url,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == exit_code, err.decode()
        return out.decode() if exit_code == 0 else err.decode()

    try:
        assert (await cli("hosts")).splitlines() == ["host-a: disk", "host-b: disk"]
        # A tick for a host no sweeper runs on would wait forever: refused, nothing enqueued.
        before = (await services[0].bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}", {}))["state"]["messages"]
        refused = await cli("run", "sweeper.orphan_clone_sweep", "--host", "nope", exit_code=1)
        assert refused.strip() == ("error: no sweeper on host 'nope' has per-host schedules installed (the hosts "
                                   "with them: host-a, host-b); a tick for it would wait forever"), refused
        after = (await services[0].bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}", {}))["state"]["messages"]
        assert after == before
    finally:
        for s in services:
            await s.stop()
    assert "forgot host-b: 1 schedule(s), 1 lane consumer(s) removed" in await cli("forget-host", "host-b")
    assert (await cli("hosts")).splitlines() == ["host-a: disk"]
    nc = await nats.connect(nats_url)
    try:
        names = (await nc.jetstream().consumers_info(Stream.JOBS.value))
        assert {c.name for c in names} == {"jobs_sweeper-host-a_maintenance"}
    finally:
        await nc.close()
