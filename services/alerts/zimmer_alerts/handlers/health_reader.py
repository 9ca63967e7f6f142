"""The I/O edge of the health rules (issue 15): reads JetStream and the alerts service's own records
into zimmer_alerts.domain.readings values.

Cost is bounded by the number of consumers and schedule entries, never by message depth: each
stream's consumers come from paged `$JS.API.CONSUMER.LIST` requests (counts and ack floors are in
the consumer info), and a consumer's oldest ready message is ONE read by sequence, the first
message past what it has delivered (`STREAM.MSG.GET` with `next_by_subj`), per filter subject.
Every request is bounded by READ_TIMEOUT_SECONDS; a failed read raises HealthReadError, which
`read_readings` turns into an unreadable reading (a health check that cannot read must say so,
never read as "nothing wrong").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from zimmer_alerts.domain import cluster
from zimmer_alerts.domain.readings import ConsumerReading, Readings
from zimmer_alerts.store import health_records
from zimmer_common.bus import Bus
from zimmer_common.contracts.health import ClusterHealth, StreamReplicas
from zimmer_common.contracts.subjects import (
    CONTEXTS,
    SCHEDULE_PREFIX,
    Stream,
    ctx_of,
    host_service,
    job_subject,
    schedule_subject,
    service_of_ctx,
)
from zimmer_common.errors import ZimmerError
from zimmer_common.schedule import ScheduleEntry
from zimmer_common.unit_of_work import UnitsOfWork

READ_TIMEOUT_SECONDS = 2.0
PAGE_SIZE = 256  # the server's fixed page of CONSUMER.LIST
MESSAGE_READS_AT_ONCE = 4  # a small bound: the reads are cheap, the server is shared
HEARTBEAT_LOOKBACK = timedelta(hours=1)

# Not-a-failure answers of the JetStream API.
NO_MESSAGE = 10037
CONSUMER_NOT_FOUND = 10014

JOB_CONSUMER_PREFIX = "jobs_"  # JobRunner.consumer_name: jobs_<ctx>_<lane>
STREAM_LANES = {Stream.EVENTS: "events", Stream.INGEST: "ingest", Stream.RUNTIME: "commands"}
READ_STREAMS = (Stream.JOBS, Stream.EVENTS, Stream.INGEST, Stream.RUNTIME)
_ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time: "never"


class HealthReadError(RuntimeError):
    """JetStream did not answer, or answered with an error, while reading health."""


def parse_time(text: str | None) -> datetime | None:
    """The server's RFC 3339 timestamps (nanoseconds; Python 3.11 keeps microseconds)."""
    if not text or text == _ZERO_TIME:
        return None
    return datetime.fromisoformat(text).astimezone(UTC)


async def _api(bus: Bus, api: str, body: dict[str, Any], *, allow: tuple[int, ...] = ()) -> dict[str, Any] | None:
    """One bounded `$JS.API` request. None for an error code in `allow`; HealthReadError otherwise."""
    try:
        resp = await bus.js_api(api, body, timeout=READ_TIMEOUT_SECONDS)
    except ZimmerError as exc:
        raise HealthReadError(f"JetStream API {api} did not answer within {READ_TIMEOUT_SECONDS}s: {exc}") from None
    error = resp.get("error")
    if error:
        if error.get("err_code") in allow:
            return None
        raise HealthReadError(f"JetStream API {api} failed: {error.get('description')} "
                              f"(code {error.get('err_code')})")
    return resp


# ---- consumers ----------------------------------------------------------------------------------


def classify(stream: Stream, durable: str) -> tuple[str, str | None]:
    """(lane, service) of a durable consumer, from its stream and name."""
    if stream is Stream.JOBS and durable.startswith(JOB_CONSUMER_PREFIX):
        ctx, _, lane = durable[len(JOB_CONSUMER_PREFIX):].rpartition("_")
        if ctx and lane:
            return lane, service_of_ctx(ctx)  # a per-host runner's lane is `service@host`'s
    lane = STREAM_LANES.get(stream, "jobs")
    # Durables are named for their service ("spot_gate_spend"); the longest prefix wins.
    for service in sorted(CONTEXTS, key=len, reverse=True):
        if durable.startswith(service.replace("-", "_") + "_"):
            return lane, service
    return lane, None


async def _list_consumers(bus: Bus, stream: Stream) -> list[dict[str, Any]]:
    infos: list[dict[str, Any]] = []
    while True:
        page = await _api(bus, f"CONSUMER.LIST.{stream.value}", {"offset": len(infos)})
        assert page is not None
        batch = page.get("consumers") or []
        infos.extend(batch)
        if not batch or len(infos) >= int(page.get("total", 0)):
            return infos


def _filters(config: dict[str, Any]) -> list[str]:
    return list(config.get("filter_subjects") or []) or [config.get("filter_subject") or ">"]


async def _oldest_ready(bus: Bus, stream: Stream, info: dict[str, Any]) -> tuple[datetime | None, str | None]:
    """The first message past the consumer's delivered sequence, per filter; the oldest of them.
    None when it went between the two reads (acked by another consumer of a work queue, expired)."""
    after = int((info.get("delivered") or {}).get("stream_seq", 0)) + 1
    found: list[tuple[datetime, str]] = []
    for subject in _filters(info.get("config") or {}):
        resp = await _api(bus, f"STREAM.MSG.GET.{stream.value}", {"seq": after, "next_by_subj": subject},
                          allow=(NO_MESSAGE,))
        message = (resp or {}).get("message") or {}
        at = parse_time(message.get("time"))
        if at is not None:
            found.append((at, message.get("subject", "")))
    if not found:
        return None, None
    return min(found)


def _reading(stream: Stream, info: dict[str, Any], oldest: tuple[datetime | None, str | None]) -> ConsumerReading:
    config = info.get("config") or {}
    name = config.get("durable_name") or info.get("name", "")
    lane, service = classify(stream, name)
    ack_floor = info.get("ack_floor") or {}
    pool = config.get("max_ack_pending")
    # A pause that has run out leaves config.pause_until behind with `paused` gone: not paused.
    paused = bool(info.get("paused"))
    return ConsumerReading(
        stream=stream.value, consumer=name, lane=lane, service=service,
        ready=int(info.get("num_pending", 0)), claimed=int(info.get("num_ack_pending", 0)),
        pool=None if pool is None or int(pool) < 0 else int(pool),
        oldest_ready_at=oldest[0], oldest_ready_subject=oldest[1],
        last_finished_at=parse_time(ack_floor.get("last_active")),
        acked_total=int(ack_floor.get("consumer_seq", 0)),
        paused=paused, paused_until=parse_time(config.get("pause_until")) if paused else None,
        created_at=parse_time(info.get("created")))


async def read_consumers(bus: Bus) -> list[ConsumerReading]:
    """Every durable consumer of the four streams, sorted by (stream, consumer). Ephemeral
    consumers (a CLI's, a test's) are nobody's lane and are left out."""
    listed = await asyncio.gather(*(_list_consumers(bus, s) for s in READ_STREAMS))
    todo = [(stream, info) for stream, infos in zip(READ_STREAMS, listed, strict=True) for info in infos
            if (info.get("config") or {}).get("durable_name")]
    gate = asyncio.Semaphore(MESSAGE_READS_AT_ONCE)

    async def one(stream: Stream, info: dict[str, Any]) -> ConsumerReading:
        oldest: tuple[datetime | None, str | None] = (None, None)
        if int(info.get("num_pending", 0)) > 0:
            async with gate:
                oldest = await _oldest_ready(bus, stream, info)
        return _reading(stream, info, oldest)

    readings = await asyncio.gather(*(one(s, i) for s, i in todo))
    return sorted(readings, key=lambda r: (r.stream, r.consumer))


# ---- schedules and ticks ------------------------------------------------------------------------


async def _message_time(bus: Bus, subject: str) -> tuple[datetime, int] | None:
    resp = await _api(bus, f"STREAM.MSG.GET.{Stream.JOBS.value}", {"last_by_subj": subject}, allow=(NO_MESSAGE,))
    message = (resp or {}).get("message")
    if not message:
        return None
    at = parse_time(message.get("time"))
    return (at, int(message.get("seq", 0))) if at else None


async def schedule_installed_at(bus: Bus, ctx: str, job: str) -> datetime | None:
    """When the key's schedule message was (last) published: a lower bound for its freshness. An
    unchanged schedule is not re-published at start (JobRunner.install_schedules), so this is
    when its cadence last changed. None: not installed."""
    found = await _message_time(bus, schedule_subject(ctx, job))
    return found[0] if found else None


async def per_host_entries(bus: Bus, entries: Iterable[ScheduleEntry]) -> list[ScheduleEntry]:
    """The entries as keys to judge: a per-host entry becomes one key per host whose schedule for it
    is installed (`sweeper@host-a.orphan_clone_sweep`), so a host whose sweeper went silent is
    noticed while the others run. A host is retired by removing its schedules
    (`zimmer jobs forget-host`). One STREAM.INFO for all of them."""
    entries = list(entries)
    if not any(e.per_host for e in entries):
        return entries
    info = await _api(bus, f"STREAM.INFO.{Stream.JOBS.value}", {"subjects_filter": f"{SCHEDULE_PREFIX}.>"})
    installed = set(((info or {}).get("state") or {}).get("subjects") or {})
    keys: list[ScheduleEntry] = []
    for e in entries:
        if not e.per_host:
            keys.append(e)
            continue
        prefix = f"{SCHEDULE_PREFIX}.{CONTEXTS[e.service]}-"
        hosts = sorted(subject[len(prefix):].rpartition(".")[0] for subject in installed
                       if subject.startswith(prefix) and subject.endswith(f".{e.job}"))
        keys.extend(replace(e, service=host_service(e.service, host), per_host=False) for host in hosts if host)
    return keys


async def waiting_ticks(bus: Bus, entries: Iterable[ScheduleEntry]) -> dict[str, datetime]:
    """key → timestamp of its tick waiting on the stream for a worker. ZIMMER_JOBS keeps one message
    per job subject; it is waiting when its lane's consumer has not delivered it yet (a running
    tick stays on a work queue until acked, and is the runs' business, not this)."""
    entries = list(entries)
    gate = asyncio.Semaphore(MESSAGE_READS_AT_ONCE)
    delivered: dict[str, int] = {}

    async def delivered_seq(consumer: str) -> None:
        async with gate:
            info = await _api(bus, f"CONSUMER.INFO.{Stream.JOBS.value}.{consumer}", {}, allow=(CONSUMER_NOT_FOUND,))
        delivered[consumer] = int(((info or {}).get("delivered") or {}).get("stream_seq", 0))

    consumers = {f"{JOB_CONSUMER_PREFIX}{ctx_of(e.service)}_{e.lane}" for e in entries}
    await asyncio.gather(*(delivered_seq(c) for c in sorted(consumers)))

    async def tick(e: ScheduleEntry) -> tuple[str, datetime] | None:
        ctx = ctx_of(e.service)
        async with gate:
            found = await _message_time(bus, job_subject(ctx, e.lane, e.job))
        if found and found[1] > delivered[f"{JOB_CONSUMER_PREFIX}{ctx}_{e.lane}"]:
            return e.key, found[0]
        return None

    return dict(t for t in await asyncio.gather(*(tick(e) for e in entries)) if t)


# ---- the connection -----------------------------------------------------------------------------


async def nats_server_identity(bus: Bus) -> str:
    """The server_id of the server this connection is on. A nats-server draws a new one at every
    start, and nats-py refreshes its server info on reconnect, so a new id means a (re)start."""
    server_id = bus.nc._server_info.get("server_id")  # noqa: SLF001 - nats-py exposes no accessor
    if not server_id:
        raise HealthReadError("the NATS connection carries no server_id")
    return str(server_id)


# ---- the cluster ---------------------------------------------------------------------------------


async def read_cluster(bus: Bus) -> ClusterHealth:
    """Every stream's leader and replicas (issue 29 #4), one STREAM.INFO each, in parallel. A
    stream JetStream will not describe is named unreadable: that is what an election looks like."""
    async def one(stream: Stream) -> StreamReplicas | tuple[str, str]:
        try:
            info = await _api(bus, f"STREAM.INFO.{stream.value}", {})
        except HealthReadError as exc:
            return stream.value, str(exc)
        return cluster.stream_replicas(stream.value, info or {})

    answers = await asyncio.gather(*(one(s) for s in Stream))
    return cluster.cluster_health([a for a in answers if isinstance(a, StreamReplicas)],
                                  dict(a for a in answers if isinstance(a, tuple)))


# ---- everything the rules read ------------------------------------------------------------------


async def read_readings(bus: Bus, units: UnitsOfWork, now: datetime, *,
                        heartbeat_lookback: timedelta = HEARTBEAT_LOOKBACK) -> Readings:
    """One health read. Also records the NATS server in use: bus.py offers no reconnect hook, so the
    health read is where a new server is first seen. A failure to read anything is an unreadable
    reading naming the problem, never an empty one."""
    try:
        consumers = await read_consumers(bus)
        async with units.begin() as uow:
            await health_records.record_server(uow.conn, await nats_server_identity(bus), now)
            runs = await health_records.claimed_runs(uow.conn)
            beats = await health_records.heartbeats(uow.conn, now - heartbeat_lookback)
            finished = await health_records.finished_last_hour_by_lane(uow.conn, now)
    except HealthReadError as exc:
        return Readings(now=now, consumers=[], claimed_runs=[], heartbeats=[], readable=False, problem=str(exc))
    except Exception as exc:  # noqa: BLE001 - the database is down, etc.: the reading says so
        return Readings(now=now, consumers=[], claimed_runs=[], heartbeats=[], readable=False,
                        problem=f"health records unreadable: {type(exc).__name__}: {exc}")
    return Readings(now=now, consumers=consumers, claimed_runs=runs, heartbeats=beats,
                    finished_last_hour_by_lane=finished)
