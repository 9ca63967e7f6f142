"""Background jobs on JetStream (DESIGN §4): schedules installed as message schedules, one
durable pull consumer per lane, singleton runs, in-progress acks and job_run events.

How a tick becomes a run:
1. The service installs each of its schedule entries as a JetStream message schedule that
   publishes ticks to `zimmer.jobs.<ctx>.<lane>.<job>` (ZIMMER_JOBS keeps one message per
   subject, so a tick arriving while one waits replaces it: ticks coalesce).
2. Every replica pulls from the lane's shared durable consumer, never taking more than the
   lane's thread count at once.
3. A run takes a PostgreSQL session advisory lock on the job's name. Without it a new tick
   that replaces a running tick's message frees the consumer's ack slot and would start a
   second copy concurrently; with it the second copy is nak'd with a delay and waits. A
   crashed worker's connection drops, which releases the lock: no lease to expire.
4. While the job runs the worker sends `in_progress` acks; at the end it acks and publishes
   the run's lifecycle on `zimmer.ops.evt.job_run`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common.bus import Bus
from zimmer_common.clock import Clock, SystemClock
from zimmer_common.contracts.ops import JOB_RUN, JobRun, JobRunState
from zimmer_common.contracts.subjects import SCHEDULE_PREFIX, Stream, host_service, job_subject, lane_filter, schedule_subject
from zimmer_common.lanes import LANES, Lane
from zimmer_common.logs import kv
from zimmer_common.metrics import ServiceMetrics
from zimmer_common.outage import MESSAGE_BUS, Outages
from zimmer_common.paging import PageFn, page_or_log
from zimmer_common.retried_events import RetriedEvents
from zimmer_common.schedule import ScheduleEntry

log = logging.getLogger("zimmer.jobs")

FETCH_WAIT_SECONDS = 1.0  # short, so a stopping worker notices within a second
LOCK_RETRY_SECONDS = 2.0
EVENTS_DRAIN_SECONDS = 2.0  # at stop, for lifecycle events still retrying after an outage


@dataclass
class JobContext:
    job: str
    run_id: str
    bus: Bus
    engine: AsyncEngine | None
    clock: Clock
    progress: Callable[[], Awaitable[None]]


JobFn = Callable[[JobContext], Awaitable[Any]]


@dataclass(frozen=True)
class JobSpec:
    name: str
    lane: str
    fn: JobFn
    # Runs on every host's instance of the service, each on its own disk (ticks on
    # `zimmer.jobs.<ctx>-<host>.<lane>.<job>`); the default runs once across all replicas.
    per_host: bool = False

    def __post_init__(self) -> None:
        if self.lane not in LANES:
            raise ValueError(f"job {self.name}: unknown lane {self.lane!r}")


@dataclass
class _Running:
    task: asyncio.Task[None]
    msg: Msg
    job: str
    started: float = field(default_factory=time.monotonic)


class JobRunner:
    def __init__(self, bus: Bus, *, ctx: str, service: str, instance_id: str, jobs: list[JobSpec],
                 engine: AsyncEngine | None, metrics: ServiceMetrics | None = None, clock: Clock | None = None,
                 outages: Outages | None = None,
                 on_failure: Callable[[str, BaseException], Awaitable[None]] | None = None, host: str | None = None,
                 page: PageFn | None = None):
        self.bus = bus
        self.page = page  # what the runner itself cannot do (start a run, a tick it has no job for) pages
        self.outages = outages or Outages(metrics)
        self.on_failure = on_failure  # a crashed job pages (wired at start-up; see zimmer_common.pager)
        self.ctx = ctx
        self.service = service
        # A per-host runner's runs are `service@host`'s: each host's keys are judged apart.
        self.run_service = host_service(service, host) if host else service
        self.instance_id = instance_id
        self.jobs = {j.name: j for j in jobs}
        self.engine = engine
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self._loops: list[asyncio.Task[None]] = []
        self._running: dict[int, _Running] = {}
        self._local_locks: dict[str, asyncio.Lock] = {}
        self._stopping = asyncio.Event()
        self.events = RetriedEvents(bus, self.outages)

    @property
    def lanes(self) -> list[Lane]:
        return [LANES[name] for name in sorted({j.lane for j in self.jobs.values()})]

    def consumer_name(self, lane: str) -> str:
        return f"jobs_{self.ctx}_{lane}"

    # ---- schedules -------------------------------------------------------------------

    async def install_schedules(self, entries: list[ScheduleEntry]) -> None:
        """Make this service's installed schedules exactly `entries` (idempotent).

        An unchanged schedule is left alone: re-publishing it would restart its timer, and
        replicas starting at different moments would keep pushing each other's ticks back.
        """
        for e in entries:
            if e.job not in self.jobs:
                raise RuntimeError(f"schedule names job {e.key} but {self.service} implements no such job")
        wanted = {schedule_subject(self.ctx, e.job): e for e in entries}
        installed = await self._installed_schedule_subjects()
        for subject in installed - wanted.keys():
            await self.bus.js_api(f"STREAM.PURGE.{Stream.JOBS.value}", {"filter": subject}, timeout=self.bus.admin_timeout)
            log.info("schedule removed", extra=kv(subject=subject))
        for subject, e in wanted.items():
            headers = {"Nats-Schedule": e.cadence,
                       "Nats-Schedule-Target": job_subject(self.ctx, e.lane, e.job)}
            if await self._current_schedule_headers(subject) == headers:
                continue
            await self.bus.publish(subject, json.dumps({"job": e.job}).encode(), headers=headers)
            log.info("schedule installed", extra=kv(job=e.job, cadence=e.cadence, lane=e.lane))

    async def _installed_schedule_subjects(self) -> set[str]:
        info = await self.bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}",
                                     {"subjects_filter": f"{SCHEDULE_PREFIX}.{self.ctx}.>"}, timeout=self.bus.admin_timeout)
        return set((info.get("state", {}).get("subjects") or {}).keys())

    async def _current_schedule_headers(self, subject: str) -> dict[str, str] | None:
        resp = await self.bus.js_api(f"STREAM.MSG.GET.{Stream.JOBS.value}", {"last_by_subj": subject},
                                     timeout=self.bus.admin_timeout)
        raw = resp.get("message", {}).get("hdrs")
        if not raw:
            return None
        lines = base64.b64decode(raw).decode().split("\r\n")[1:]
        hdrs = dict(line.split(":", 1) for line in lines if ":" in line)
        return {k.strip(): v.strip() for k, v in hdrs.items()
                if k.strip() in ("Nats-Schedule", "Nats-Schedule-Target")}

    async def enqueue(self, job: str) -> int:
        """Ask for a run now, outside the schedule (coalesces with a waiting tick)."""
        spec = self.jobs[job]
        seq = await self.bus.publish(job_subject(self.ctx, spec.lane, job), json.dumps({"job": job}).encode())
        now = self.clock.now()
        await self._event(spec, str(seq), JobRunState.ENQUEUED, now, enqueued_at=now, scheduled=False)
        return seq

    # ---- workers ---------------------------------------------------------------------

    async def start(self) -> None:
        for lane in self.lanes:
            await self._ensure_consumer(lane)
            self._loops.append(asyncio.create_task(self._lane_loop(lane), name=f"lane:{lane.name}"))

    async def _ensure_consumer(self, lane: Lane) -> None:
        cfg = ConsumerConfig(durable_name=self.consumer_name(lane.name), filter_subject=lane_filter(self.ctx, lane.name),
                             ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
                             max_ack_pending=lane.threads, ack_wait=lane.ack_wait_seconds, max_deliver=-1)
        await self.bus.js.add_consumer(Stream.JOBS.value, cfg, timeout=self.bus.admin_timeout)

    async def _lane_loop(self, lane: Lane) -> None:
        sub = await self.bus.js.pull_subscribe_bind(self.consumer_name(lane.name), stream=Stream.JOBS.value)
        slots = asyncio.Semaphore(lane.threads)
        try:
            while not self._stopping.is_set():
                await slots.acquire()
                if self._stopping.is_set():
                    slots.release()
                    break
                try:
                    msgs = await sub.fetch(1, timeout=FETCH_WAIT_SECONDS)
                except (TimeoutError, NatsTimeoutError):
                    slots.release()
                    continue
                except Exception as exc:  # noqa: BLE001 - reconnecting, etc.
                    slots.release()
                    if self.outages.report(exc, where=f"lane {lane.name}") is None:
                        log.warning("fetch failed", extra=kv(lane=lane.name, error=repr(exc)))
                    await asyncio.sleep(1)
                    continue
                self.outages.answered(MESSAGE_BUS)
                msg = msgs[0]
                task = asyncio.create_task(self._run_guarded(lane, msg))
                key = id(task)
                self._running[key] = _Running(task, msg, msg.subject.rsplit(".", 1)[-1])

                def _done(_t: asyncio.Task[None], key: int = key) -> None:
                    self._running.pop(key, None)
                    slots.release()

                task.add_done_callback(_done)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _run_guarded(self, lane: Lane, msg: Msg) -> None:
        """A run never ends in an exception nobody retrieves: a database or bus outage while
        taking the singleton lock, acking or reporting leaves the tick to be redelivered, and is
        reported to the outage log rather than as a traceback per tick."""
        try:
            await self._run(lane, msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - see above
            if self.outages.report(exc, where=f"job {msg.subject}") is None:
                await page_or_log(self.page, "Job run could not start or finish", f"the runner could not start or "
                                  f"finish a run of {msg.subject}; the tick is redelivered", ["runner", "run"],
                                  snippet_source=exc, subject=msg.subject)
            with contextlib.suppress(Exception):
                await msg.nak(delay=LOCK_RETRY_SECONDS)

    async def _run(self, lane: Lane, msg: Msg) -> None:
        job = msg.subject.rsplit(".", 1)[-1]
        spec = self.jobs.get(job)
        if spec is None:
            await page_or_log(self.page, "Tick for a job this service does not implement",
                              f"{msg.subject} reached {self.service}, which has no such job; the tick is dropped "
                              "(a schedule left behind by a removed job, or a newer image's schedule)",
                              ["runner", "unknown_job", job], subject=msg.subject)
            await msg.term()
            return
        async with self._singleton(job) as acquired:
            if not acquired:
                await msg.nak(delay=LOCK_RETRY_SECONDS)  # another copy is running: wait, coalesced
                return
            await self._execute(lane, spec, msg)

    async def _execute(self, lane: Lane, spec: JobSpec, msg: Msg) -> None:
        meta = msg.metadata
        run_id = str(meta.sequence.stream)
        enqueued_at = meta.timestamp
        scheduled = bool(msg.headers and "Nats-Scheduler" in msg.headers)
        started_at = self.clock.now()
        if scheduled:
            await self._event(spec, run_id, JobRunState.ENQUEUED, enqueued_at, enqueued_at=enqueued_at)
        await self._event(spec, run_id, JobRunState.STARTED, started_at, enqueued_at=enqueued_at,
                          started_at=started_at, scheduled=scheduled)

        async def progress() -> None:
            with contextlib.suppress(Exception):
                await msg.in_progress()

        async def keepalive() -> None:
            while True:
                await asyncio.sleep(lane.ack_wait_seconds / 3)
                await progress()

        ticker = asyncio.create_task(keepalive())
        t0 = time.monotonic()
        error: str | None = None
        if self.metrics:
            self.metrics.jobs_running.labels(self.service, lane.name).inc()
        try:
            await spec.fn(JobContext(spec.name, run_id, self.bus, self.engine, self.clock, progress))
        except asyncio.CancelledError:
            ticker.cancel()
            with contextlib.suppress(Exception):
                await msg.nak()  # shutdown past the grace: let another worker take it
            raise
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, not retried in a loop
            error = f"{type(exc).__name__}: {exc}"
            if self.outages.report(exc, where=f"job {spec.name}") is None:
                if self.on_failure is not None:  # the pager logs the ERROR record and pages "Job failed"
                    with contextlib.suppress(Exception):  # paging must never be what fails the runner
                        await self.on_failure(spec.name, exc)
                else:
                    await page_or_log(None, "Job failed", f"{spec.name} raised {type(exc).__name__}", ["job", spec.name],
                                      job=spec.name, run_id=run_id)
        finally:
            ticker.cancel()
            if self.metrics:
                self.metrics.jobs_running.labels(self.service, lane.name).dec()
        duration = time.monotonic() - t0
        finished_at = self.clock.now()
        # A failed run is acked too: the next tick is the retry, so a broken job cannot spin.
        with contextlib.suppress(Exception):
            await msg.ack_sync(timeout=5)
        state = JobRunState.FAILED if error else JobRunState.FINISHED
        await self._event(spec, run_id, state, finished_at, enqueued_at=enqueued_at, started_at=started_at,
                          finished_at=finished_at, duration_seconds=duration, error=error, scheduled=scheduled)
        if self.metrics:
            self.metrics.job_runs.labels(self.service, spec.name, lane.name, state.value).inc()
            self.metrics.job_last_failed.labels(self.service, spec.name).set(1 if error else 0)
            self.metrics.job_seconds.labels(self.service, spec.name).observe(duration)

    @contextlib.asynccontextmanager
    async def _singleton(self, job: str):  # type: ignore[no-untyped-def]  # an async context manager; its yield type is not spelled out
        local = self._local_locks.setdefault(job, asyncio.Lock())
        if local.locked():
            yield False
            return
        async with local:
            if self.engine is None:
                yield True
                return
            async with self.engine.connect() as conn:
                got = await self._try_lock(conn, job)
                try:
                    yield got
                finally:
                    if got:
                        with contextlib.suppress(Exception):
                            await conn.execute(text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": self._lock_key(job)})
                            await conn.commit()

    def _lock_key(self, job: str) -> str:
        return f"zimmer.job.{self.ctx}.{job}"

    async def _try_lock(self, conn: AsyncConnection, job: str) -> bool:
        got = (await conn.execute(text("SELECT pg_try_advisory_lock(hashtext(:k))"), {"k": self._lock_key(job)})).scalar_one()
        await conn.commit()  # the session lock outlives the transaction; don't sit idle in one
        return bool(got)

    async def _event(self, spec: JobSpec, run_id: str, state: JobRunState, at: datetime, **fields: Any) -> None:
        payload = JobRun(service=self.run_service, job=spec.name, lane=spec.lane, run_id=run_id, state=state, at=at,
                         instance_id=self.instance_id, **fields)
        # Never fails the run; through an outage it is retried until the bus takes it.
        await self.events.publish(JOB_RUN, "job_run", payload, occurred_at=at, where="job_run event",
                                  event_id=f"jobrun.{self.ctx}.{spec.name}.{run_id}.{state.value}")

    # ---- shutdown --------------------------------------------------------------------

    async def stop(self, grace: float) -> None:
        """Stop fetching, let running jobs finish within `grace`, nak whatever is left."""
        self._stopping.set()
        for loop in self._loops:
            loop.cancel()  # a loop that absorbs the cancel still exits on `_stopping`
        if self._loops:
            await asyncio.wait(self._loops, timeout=FETCH_WAIT_SECONDS + 2)
        self._loops.clear()
        running = [r.task for r in self._running.values()]
        if running:
            log.info("waiting for running jobs", extra=kv(jobs=[r.job for r in self._running.values()]))
            _done, pending = await asyncio.wait(running, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2)
        await self.events.drain(timeout=EVENTS_DRAIN_SECONDS)
