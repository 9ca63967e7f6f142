"""The health records on real PostgreSQL (issue 15): job_run events merge idempotently and in any
order; open runs, per-key records, throughput, cron witnesses, heartbeats, NATS servers, prune."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from alerting import T0  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_alerts.store import health_records as hr
from zimmer_alerts.store.health_tables import job_runs
from zimmer_common.contracts.ops import Heartbeat, JobRun, JobRunState
from zimmer_common.db import create_engine, migrate

S = timedelta(seconds=1)
M = timedelta(minutes=1)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    await migrate(database_url, "alerts", "zimmer_alerts.migrations")
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


def run_events(service: str, job: str, run_id: str, enqueued: object, *, lane: str = "default",
               scheduled: bool = True, fail: bool = False, instance: str = "w1") -> dict[str, JobRun]:
    """The three lifecycle events JobRunner publishes for one run, a second apart."""
    started, ended = enqueued + S, enqueued + 2 * S  # type: ignore[operator]  # a datetime, typed loosely for the callers
    common = dict(service=service, job=job, lane=lane, run_id=run_id, instance_id=instance, enqueued_at=enqueued,
                  scheduled=scheduled)
    return {
        "enqueued": JobRun(state=JobRunState.ENQUEUED, at=enqueued, **common),  # type: ignore[arg-type]  # pydantic validates the loosely typed values
        "started": JobRun(state=JobRunState.STARTED, at=started, started_at=started, **common),  # type: ignore[arg-type]  # pydantic validates the loosely typed values
        "ended": JobRun(state=JobRunState.FAILED if fail else JobRunState.FINISHED, at=ended, started_at=started,
                        finished_at=ended, error="RuntimeError: no" if fail else None, **common),  # type: ignore[arg-type]  # pydantic validates the loosely typed values
    }


async def record(engine: AsyncEngine, *events: JobRun) -> None:
    for event in events:
        async with engine.begin() as conn:
            await hr.record_job_run(conn, event)


async def rows(engine: AsyncEngine) -> list[dict[str, object]]:
    async with engine.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(select(job_runs).order_by(job_runs.c.run_id))]


async def test_events_merge_idempotently_and_out_of_order_never_regress(engine: AsyncEngine) -> None:
    ev = run_events("backlog", "outbox_prune", "7", T0, lane="maintenance")
    await record(engine, ev["ended"], ev["started"], ev["enqueued"], ev["started"], ev["ended"])
    once = await rows(engine)
    assert len(once) == 1
    row = once[0]
    assert row["state"] == "finished"  # a late `started` does not reopen it
    assert (row["enqueued_at"], row["started_at"], row["finished_at"]) == (T0, T0 + S, T0 + 2 * S)
    assert row["lane"] == "maintenance" and row["scheduled"] is True and row["error"] is None
    await record(engine, *ev.values(), *ev.values())  # delivered again, in order: nothing changes
    assert await rows(engine) == once

    failed = run_events("backlog", "liveness_sweep", "8", T0, fail=True)
    await record(engine, failed["started"], failed["ended"], failed["started"])
    row = (await rows(engine))[1]
    assert row["state"] == "failed" and row["error"] == "RuntimeError: no" and row["finished_at"] == T0 + 2 * S


async def test_claimed_runs_are_the_started_unfinished_ones_not_superseded(engine: AsyncEngine) -> None:
    done = run_events("sweeper", "log_retention", "1", T0, lane="maintenance")
    running = run_events("sweeper", "log_partitions", "2", T0 + M, lane="maintenance", instance="w2")
    # A run whose worker died without a word, after which a later run of the same key started:
    # singletons mean it has ended, whatever its row says.
    died = run_events("spot-gate", "recheck_due", "3", T0)
    later = run_events("spot-gate", "recheck_due", "9", T0 + 10 * M)
    await record(engine, *done.values(), running["started"], died["started"], later["started"])
    async with engine.connect() as conn:
        claimed = await hr.claimed_runs(conn)
    assert [(c.service, c.job, c.lane, c.started_at, c.instance_id) for c in claimed] == [
        ("spot-gate", "recheck_due", "default", T0 + 10 * M + S, "w1"),
        ("sweeper", "log_partitions", "maintenance", T0 + M + S, "w2"),
    ]


async def test_key_records_read_the_newest_of_each_and_what_holds_the_key(engine: AsyncEngine) -> None:
    first = run_events("backlog", "outbox_prune", "1", T0, lane="maintenance")
    second = run_events("backlog", "outbox_prune", "5", T0 + 10 * M, lane="maintenance")
    by_hand = run_events("backlog", "recover_starting", "6", T0 + 2 * M, scheduled=False)
    await record(engine, *first.values(), second["enqueued"], second["started"], by_hand["enqueued"])
    waiting = {"backlog.recover_starting": T0 + 3 * M}
    async with engine.connect() as conn:
        records = await hr.key_records(conn, ["backlog.outbox_prune", "backlog.recover_starting", "alerts.nothing"],
                                       waiting)
    prune = records["backlog.outbox_prune"]
    assert (prune.last_enqueued_at, prune.last_started_at, prune.last_finished_at) == (
        T0 + 10 * M, T0 + 10 * M + S, T0 + 2 * S)
    assert prune.running_since == T0 + 10 * M + S and prune.last_enqueued_scheduled and prune.waiting_since is None
    recover = records["backlog.recover_starting"]
    assert recover.last_enqueued_at == T0 + 2 * M and recover.last_enqueued_scheduled is False
    assert recover.last_started_at is None and recover.running_since is None
    assert recover.waiting_since == T0 + 3 * M
    nothing = records["alerts.nothing"]
    assert (nothing.last_enqueued_at, nothing.last_started_at, nothing.last_finished_at, nothing.running_since) == (
        None, None, None, None)


async def test_finished_last_hour_counts_ended_runs_per_lane(engine: AsyncEngine) -> None:
    now = T0 + 2 * timedelta(hours=1)
    await record(engine, *run_events("a", "x", "1", now - 90 * M).values(),  # ended before the hour
                 *run_events("a", "x", "2", now - 30 * M).values(),
                 *run_events("a", "y", "3", now - 20 * M, fail=True).values(),
                 *run_events("a", "z", "4", now - 10 * M, lane="maintenance").values(),
                 run_events("a", "w", "5", now - 5 * M)["started"])  # still running
    async with engine.connect() as conn:
        assert await hr.finished_last_hour_by_lane(conn, now) == {"default": 2, "maintenance": 1}


async def test_a_fire_time_is_witnessed_only_by_another_keys_scheduled_tick(engine: AsyncEngine) -> None:
    # The every-minute key fired at T0 and T0+1m; then nothing until T0+5m (a deploy, say).
    await record(engine, run_events("spot-gate", "fire_wakes", "1", T0 + 5 * S)["started"],
                 run_events("spot-gate", "fire_wakes", "2", T0 + M + 5 * S)["started"],
                 run_events("spot-gate", "fire_wakes", "3", T0 + 5 * M)["started"],
                 # The judged key's own tick is no witness, nor is a copy enqueued by hand.
                 run_events("backlog", "outbox_prune", "4", T0 + 2 * M)["started"],
                 run_events("sweeper", "log_retention", "5", T0 + 3 * M, scheduled=False)["started"])
    ticks = [T0 + n * M for n in range(6)]
    async with engine.connect() as conn:
        seen = await hr.witnessed(conn, "backlog.outbox_prune", ticks, window=timedelta(seconds=30))
        assert await hr.witnessed(conn, "backlog.outbox_prune", []) == set()
    assert seen == {T0, T0 + M, T0 + 5 * M}


async def test_heartbeats_keep_each_instances_newest_and_read_since(engine: AsyncEngine) -> None:
    def beat(instance: str, at: object, uptime: float, version: str = "1.0") -> Heartbeat:
        return Heartbeat(service="backlog", instance_id=instance, version=version, at=at,  # type: ignore[arg-type]  # pydantic validates the loosely typed values
                         uptime_seconds=uptime, lanes=["default", "maintenance"])

    for b in (beat("a", T0, 60), beat("a", T0 + 15 * S, 75, "1.1"), beat("a", T0 + 5 * S, 65),  # late: ignored
              beat("b", T0 - timedelta(hours=2), 10)):
        async with engine.begin() as conn:
            await hr.record_heartbeat(conn, b)
    async with engine.connect() as conn:
        recent = await hr.heartbeats(conn, T0 - M)
        everyone = await hr.heartbeats(conn, T0 - timedelta(hours=3))
    assert [(h.instance_id, h.version, h.at, h.started_at, h.lanes) for h in recent] == [
        ("a", "1.1", T0 + 15 * S, T0 - M, ("default", "maintenance"))]
    assert [h.instance_id for h in everyone] == ["a", "b"]


async def test_a_servers_first_sighting_stays_and_prune_bounds_the_records(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await hr.record_server(conn, "NSERVER1", T0)
        await hr.record_server(conn, "NSERVER1", T0 + M)
        assert await hr.nats_started_at(conn, "NSERVER1") == T0
        assert await hr.nats_started_at(conn, "NOTSEEN") is None
        await hr.record_heartbeat(conn, Heartbeat(service="a", instance_id="old", version="1", lanes=[],
                                                  at=T0 - timedelta(days=2), uptime_seconds=1))
    await record(engine, *run_events("a", "x", "1", T0 - timedelta(days=15)).values(),
                 *run_events("a", "x", "2", T0 - timedelta(days=13)).values())
    async with engine.begin() as conn:
        assert await hr.prune(conn, T0) == (1, 1)
        assert await hr.nats_started_at(conn, "NSERVER1") == T0
    assert [r["run_id"] for r in await rows(engine)] == ["2"]


async def test_a_graceful_stop_retires_the_instance_and_a_restart_brings_it_back(engine: AsyncEngine) -> None:
    # A gracefully stopped instance stayed registered for an hour (10 processes read 18/18).
    def beat(at: object, *, stopping: bool = False) -> Heartbeat:
        return Heartbeat(service="spot-gate", instance_id="spot-gate-2", version="1", at=at,  # type: ignore[arg-type]  # pydantic validates the loosely typed values
                         uptime_seconds=30, lanes=[], interval_seconds=5.0, stopping=stopping)

    async def seen() -> list[tuple[str, float]]:
        async with engine.connect() as conn:
            return [(h.instance_id, h.interval_seconds) for h in await hr.heartbeats(conn, T0 - M)]

    for b in (beat(T0), beat(T0 + 5 * S, stopping=True)):
        async with engine.begin() as conn:
            await hr.record_heartbeat(conn, b)
    assert await seen() == []
    async with engine.begin() as conn:
        await hr.record_heartbeat(conn, beat(T0 + 2 * S))  # a beat older than the stop, arriving late
    assert await seen() == []
    async with engine.begin() as conn:
        await hr.record_heartbeat(conn, beat(T0 + 40 * S))  # the same stable id, started again
    assert await seen() == [("spot-gate-2", 5.0)]
