"""What the failover suite reads behind the gateways, to check what they answered: the events on
ZIMMER_EVENTS (through a surviving NATS node) and the job ticks alerts recorded (in PostgreSQL).

Exactly once is read where it would show if broken: an event published twice past JetStream's
duplicate window is two messages in the stream, whatever ids they carry; a schedule installed
twice, or a tick redelivered as a new message, is two scheduled runs for one fire time.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import nats
from nats.js.api import DeliverPolicy

from zimmer_cli.embedded import pg_url
from zimmer_common.contracts.subjects import Stream
from zimmer_common.schedule import SCHEDULE, next_fire_times
from zimmer_common.settings import Environment


@dataclass
class StreamRead:
    """Per row id, the stream sequences of the events that name it; and every envelope id seen."""

    messages: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    envelope_ids: list[str] = field(default_factory=list)


def read_events(nats_urls: list[str], subject: str, row_of: Callable[[dict[str, Any]], int],
                timeout: float = 60.0) -> StreamRead:
    """Every message on `subject` in ZIMMER_EVENTS, from the first, grouped by the row it names."""
    return asyncio.run(asyncio.wait_for(_read_events(nats_urls, subject, row_of), timeout))


async def _read_events(nats_urls: list[str], subject: str, row_of: Callable[[dict[str, Any]], int]) -> StreamRead:
    nc = await nats.connect(servers=nats_urls, connect_timeout=5, max_reconnect_attempts=5)
    try:
        js = nc.jetstream(timeout=10)
        pending = (await js.stream_info(Stream.EVENTS.value, subjects_filter=subject)).state.subjects or {}
        total = int(pending.get(subject, 0))
        read = StreamRead()
        if not total:
            return read
        sub = await js.subscribe(subject, stream=Stream.EVENTS.value, ordered_consumer=True,
                                 deliver_policy=DeliverPolicy.ALL)
        try:
            for _ in range(total):
                msg = await sub.next_msg(timeout=10)
                envelope = json.loads(msg.data)
                read.envelope_ids.append(envelope["id"])
                read.messages[row_of(envelope["data"])].append(msg.metadata.sequence.stream)
        finally:
            await sub.unsubscribe()
        return read
    finally:
        await nc.close()


@dataclass(frozen=True)
class TickRun:
    service: str
    job: str
    run_id: str
    state: str
    enqueued_at: datetime


def read_scheduled_runs(socket_dir: str) -> list[TickRun]:
    """The scheduled job runs alerts recorded (`alerts.job_runs`)."""
    async def read() -> list[TickRun]:
        conn = await asyncpg.connect(pg_url(socket_dir, "zimmer"), timeout=10)
        try:
            rows = await conn.fetch("SELECT service, job, run_id, state, enqueued_at FROM alerts.job_runs "
                                    "WHERE scheduled ORDER BY enqueued_at")
        finally:
            await conn.close()
        return [TickRun(r["service"], r["job"], r["run_id"], r["state"], r["enqueued_at"]) for r in rows]
    return asyncio.run(asyncio.wait_for(read(), 60))


@dataclass
class TickAudit:
    doubled: dict[str, list[str]] = field(default_factory=dict)  # "service.job@fire time" -> its run ids
    unfinished: list[str] = field(default_factory=list)  # runs that never reached finished/failed
    missed: list[str] = field(default_factory=list)  # fire times in the window with no run
    excused: list[str] = field(default_factory=list)  # fire times with no run while a stream elected
    runs: int = 0


def audit_ticks(runs: list[TickRun], since: datetime, until: datetime, settle: timedelta,
                elections: Sequence[tuple[datetime, datetime]] = ()) -> TickAudit:
    """Each fire time of each development schedule in [since, until - settle] has exactly one
    scheduled run, and every run enqueued before `until - settle` finished (or failed).

    A fire time inside one of `elections` (a NATS node killed, until its streams have leaders
    again) with no run is `excused`, not `missed`: NATS fires a message schedule from the stream's
    leader, and a fire due while ZIMMER_JOBS has none may never be published; the next fire time is
    the retry, as for any tick."""
    cadence = {(e.service, e.job): e.cadence for e in SCHEDULE if Environment.DEVELOPMENT in e.environments}
    audit = TickAudit()
    last = until - settle
    by_fire: dict[tuple[str, str, datetime], list[TickRun]] = defaultdict(list)
    seen_services: dict[tuple[str, str], set[str]] = defaultdict(set)
    for run in runs:
        base = run.service.split("@")[0]  # a per-host schedule is recorded as service@host
        if run.enqueued_at < since or run.enqueued_at > last or (base, run.job) not in cadence:
            continue
        audit.runs += 1
        fire = _fire_time(cadence[(base, run.job)], run.enqueued_at)
        by_fire[(run.service, run.job, fire)].append(run)
        seen_services[(base, run.job)].add(run.service)
        if run.state not in ("finished", "failed"):
            audit.unfinished.append(f"{run.service}.{run.job} run {run.run_id} {run.state} since {run.enqueued_at}")
    for (service, job, fire), found in by_fire.items():
        if len(found) > 1:
            audit.doubled[f"{service}.{job}@{fire.isoformat()}"] = [r.run_id for r in found]
    per_host = {(e.service, e.job) for e in SCHEDULE if e.per_host}
    for base, job in cadence:
        # A per-host schedule's services are its hosts': the ones whose runs were seen.
        for service in seen_services[(base, job)] if (base, job) in per_host else {base}:
            for fire in _fires_between(cadence[(base, job)], since, last):
                if (service, job, fire) not in by_fire:
                    during = any(start <= fire <= end for start, end in elections)
                    (audit.excused if during else audit.missed).append(f"{service}.{job}@{fire.isoformat()}")
    return audit


def _fire_time(cadence: str, enqueued_at: datetime) -> datetime:
    """The fire time a tick enqueued at `enqueued_at` belongs to: the latest at or before it (a
    scheduler publishes at the fire time or, behind an election, after it)."""
    after = enqueued_at + timedelta(seconds=1)
    fires = _fires_between(cadence, after - timedelta(hours=1), after)
    return fires[-1]


def _fires_between(cadence: str, since: datetime, until: datetime) -> list[datetime]:
    fires: list[datetime] = []
    at = since - timedelta(microseconds=1)
    while True:
        at = next_fire_times(cadence, at, 1)[0]
        if at > until:
            return fires
        fires.append(at)
