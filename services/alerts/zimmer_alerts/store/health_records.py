"""The records the alerts service keeps for the health rules (issue 15), and the reads over them.

Written by the `alerts_job_runs` and `alerts_heartbeats` consumers and the health read; read into
zimmer_alerts.domain.readings values. Every read is an index probe or a short index range, so it
costs the same with fourteen days of runs as with one (see migration 0002 for the indexes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import ARRAY, and_, case, delete, exists, func, literal, or_, select, true, values
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.types import Text

from zimmer_alerts.domain.readings import ClaimedRun, Heartbeat, KeyRecord
from zimmer_alerts.store.health_tables import heartbeats as heartbeat_rows
from zimmer_alerts.store.health_tables import job_runs, nats_servers
from zimmer_common.columns import TIMESTAMPTZ
from zimmer_common.contracts import ops

KEEP_RUNS = timedelta(days=14)
KEEP_HEARTBEATS = timedelta(days=1)
FINISHED_WINDOW = timedelta(hours=1)

# A run's state only moves forward: a late or redelivered `started` never reopens a finished run.
_RANK = {"enqueued": 0, "started": 1, "finished": 2, "failed": 2}


def _rank(state_column):  # type: ignore[no-untyped-def]  # SQLAlchemy column expressions in and out
    return case(_RANK, value=state_column, else_=0)


def split_key(key: str) -> tuple[str, str]:
    """"spot-gate.recheck_due" → ("spot-gate", "recheck_due"): service names carry no dot."""
    service, _, job = key.partition(".")
    return service, job


# ---- writes -------------------------------------------------------------------------------------


async def record_job_run(conn: AsyncConnection, event: ops.JobRun) -> None:
    """Merge one lifecycle event into its run's row. Idempotent and order-free: each timestamp is
    kept once set, the state takes the furthest along, so a duplicate changes nothing and a
    `started` arriving after `finished` only fills in what was missing."""
    state = event.state.value
    ended = state in ("finished", "failed")
    row = dict(service=event.service, job=event.job, run_id=event.run_id, lane=event.lane,
               instance_id=event.instance_id, scheduled=event.scheduled,
               enqueued_at=event.enqueued_at or event.started_at or event.at,
               started_at=event.started_at or (event.at if state == "started" else None),
               finished_at=event.finished_at or (event.at if ended else None),
               state=state, error=event.error)
    stmt = insert(job_runs).values(**row)
    new, old = stmt.excluded, job_runs.c
    moves_forward = _rank(new.state) > _rank(old.state)
    stmt = stmt.on_conflict_do_update(
        index_elements=[old.service, old.job, old.run_id],
        set_={
            "enqueued_at": func.least(old.enqueued_at, new.enqueued_at),
            "started_at": func.coalesce(old.started_at, new.started_at),
            "finished_at": func.coalesce(old.finished_at, new.finished_at),
            "state": case((moves_forward, new.state), else_=old.state),
            "error": func.coalesce(old.error, new.error),
            # The worker that ran it, not whoever enqueued it by hand.
            "instance_id": case((new.state != "enqueued", new.instance_id), else_=old.instance_id),
            # The runner's events agree on this; a hand enqueue says False first and keeps it.
            "scheduled": and_(old.scheduled, new.scheduled),
        })
    await conn.execute(stmt)


async def record_heartbeat(conn: AsyncConnection, beat: ops.Heartbeat) -> None:
    """Keep each instance's newest beat; an older one arriving late is ignored. A stopping beat
    retires the instance; a live beat after it (the same id started again) brings it back."""
    started_at = beat.at - timedelta(seconds=beat.uptime_seconds)
    stmt = insert(heartbeat_rows).values(service=beat.service, instance_id=beat.instance_id, version=beat.version,
                                         at=beat.at, started_at=started_at, lanes=list(beat.lanes),
                                         interval_seconds=beat.interval_seconds,
                                         retired_at=beat.at if beat.stopping else None)
    new, old = stmt.excluded, heartbeat_rows.c
    stmt = stmt.on_conflict_do_update(
        index_elements=[old.service, old.instance_id],
        set_={"version": new.version, "at": new.at, "started_at": new.started_at, "lanes": new.lanes,
              "interval_seconds": new.interval_seconds, "retired_at": new.retired_at},
        where=new.at > old.at)
    await conn.execute(stmt)


async def record_server(conn: AsyncConnection, server_id: str, now: datetime) -> None:
    """First sight of a NATS server only: later sightings must not move its lower bound forward."""
    await conn.execute(insert(nats_servers).values(server_id=server_id, first_seen=now)
                       .on_conflict_do_nothing(index_elements=[nats_servers.c.server_id]))


async def prune(conn: AsyncConnection, now: datetime) -> tuple[int, int]:
    """Runs older than 14 days, heartbeats older than a day; returns (runs, heartbeats) removed.
    NATS servers are kept: one row per server start, and dropping the current one would move its
    first sighting forward and excuse ticks it really fired."""
    runs = await conn.execute(delete(job_runs).where(job_runs.c.enqueued_at < now - KEEP_RUNS))
    beats = await conn.execute(delete(heartbeat_rows).where(heartbeat_rows.c.at < now - KEEP_HEARTBEATS))
    return runs.rowcount or 0, beats.rowcount or 0


# ---- reads --------------------------------------------------------------------------------------


def _superseded(run):  # type: ignore[no-untyped-def]  # SQLAlchemy column expressions in and out
    """A later run of the same key has started. Jobs are singletons (an advisory lock per job), so
    the earlier run has ended even if its end was never reported: its worker died, and the tick
    it held was replaced by a newer one rather than redelivered under the same run id."""
    later = job_runs.alias("later")
    return exists().where(later.c.service == run.c.service, later.c.job == run.c.job,
                          later.c.started_at > run.c.started_at)


async def claimed_runs(conn: AsyncConnection) -> list[ClaimedRun]:
    """Runs started and not finished, oldest first within each lane."""
    stmt = (select(job_runs.c.service, job_runs.c.job, job_runs.c.lane, job_runs.c.started_at,
                   job_runs.c.instance_id)
            .where(job_runs.c.state == "started", ~_superseded(job_runs))
            .order_by(job_runs.c.lane, job_runs.c.started_at))
    return [ClaimedRun(r.service, r.job, r.lane, r.started_at, r.instance_id) for r in await conn.execute(stmt)]


async def key_records(conn: AsyncConnection, keys: Iterable[str],
                      waiting: Mapping[str, datetime] | None = None) -> dict[str, KeyRecord]:
    """What the runs say of each key (service.job), in one statement: three lateral backward index
    probes per key. A key with no runs at all still gets a record (all None). `waiting` is what
    `health_reader.waiting_ticks` read off the stream."""
    keys = list(dict.fromkeys(keys))
    waiting = waiting or {}
    if not keys:
        return {}
    k = values(sql_column("service", Text), sql_column("job", Text), name="k").data([split_key(x) for x in keys])
    r = job_runs.c

    def newest(by, *cols):  # type: ignore[no-untyped-def]  # SQLAlchemy column expressions in and out
        return (select(*cols).where(r.service == k.c.service, r.job == k.c.job, by.is_not(None))
                .order_by(by.desc()).limit(1).lateral())

    enq = newest(r.enqueued_at, r.enqueued_at.label("at"), r.scheduled)
    started = newest(r.started_at, r.started_at.label("at"), r.state)
    finished = newest(r.finished_at, r.finished_at.label("at"))
    stmt = (select(k.c.service, k.c.job, enq.c.at.label("enqueued_at"), enq.c.scheduled,
                   started.c.at.label("started_at"), started.c.state, finished.c.at.label("finished_at"))
            .select_from(k.outerjoin(enq, true()).outerjoin(started, true()).outerjoin(finished, true())))
    records: dict[str, KeyRecord] = {}
    for row in await conn.execute(stmt):
        key = f"{row.service}.{row.job}"
        records[key] = KeyRecord(
            key=key, last_enqueued_at=row.enqueued_at,
            last_enqueued_scheduled=bool(row.scheduled) if row.enqueued_at is not None else True,
            last_started_at=row.started_at, last_finished_at=row.finished_at,
            # Singleton: only the newest started run can still be running.
            running_since=row.started_at if row.state == "started" else None,
            waiting_since=waiting.get(key))
    return records


async def heartbeats(conn: AsyncConnection, since: datetime) -> list[Heartbeat]:
    """Each instance's newest beat, for those that beat at or after `since` and were not retired
    by a graceful stop since."""
    h = heartbeat_rows.c
    rows = await conn.execute(select(heartbeat_rows).where(h.at >= since, h.retired_at.is_(None))
                              .order_by(h.service, h.instance_id))
    return [Heartbeat(r.service, r.instance_id, r.version, r.at, r.started_at, tuple(r.lanes or ()),
                      r.interval_seconds) for r in rows]


async def finished_last_hour_by_lane(conn: AsyncConnection, now: datetime) -> dict[str, int]:
    """Runs that ended (finished or failed) in the hour before `now`, per lane: the throughput."""
    r = job_runs.c
    stmt = (select(r.lane, func.count()).where(r.finished_at.is_not(None), r.finished_at > now - FINISHED_WINDOW,
                                               r.finished_at <= now).group_by(r.lane))
    return {lane: n for lane, n in await conn.execute(stmt)}


async def witnessed(conn: AsyncConnection, key: str, fire_times: Iterable[datetime],
                    window: timedelta = timedelta(seconds=60)) -> set[datetime]:
    """Of `fire_times`, those at which ANOTHER key's scheduled tick was enqueued within ±`window`:
    proof the schedules were firing then. One index range probe per fire time, in one statement."""
    times = sorted(set(fire_times))
    if not times:
        return set()
    service, job = split_key(key)
    t = func.unnest(literal(times, ARRAY(TIMESTAMPTZ))).table_valued(sql_column("t", TIMESTAMPTZ)).render_derived(
        name="fire")
    r = job_runs.c
    other_key = or_(r.service != service, r.job != job)
    witness = exists().where(r.scheduled, r.enqueued_at >= t.c.t - window, r.enqueued_at <= t.c.t + window,
                             other_key)
    return set((await conn.execute(select(t.c.t).where(witness))).scalars())  # (Row.t is the row's tuple)


async def nats_started_at(conn: AsyncConnection, server_id: str) -> datetime | None:
    """When this service first saw that server: a lower bound on its start (None: never seen)."""
    return (await conn.execute(select(nats_servers.c.first_seen)
                               .where(nats_servers.c.server_id == server_id))).scalar_one_or_none()

