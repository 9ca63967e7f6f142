"""Service lifecycle: the same start and stop sequence for every service.

start:  settings → logging → metrics → database → migrate → bus → streams → outbox relay →
        RPC handlers (ping + the service's own) → schedules and job workers → heartbeats → ready
stop:   not ready → stop fetching jobs (finish in-flight within the grace, nak the rest) →
        stop answering RPCs (bounded wait for in-flight answers) → stop loops → close bus → dispose
        engine. SIGTERM/SIGINT trigger it; the whole stop is bounded by the grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_common import __version__
from zimmer_common.bus import Bus
from zimmer_common.clock import Clock, SystemClock
from zimmer_common.consumer import ConsumerSpec, DurableConsumer, Handler
from zimmer_common.contracts.envelope import RpcSpec
from zimmer_common.contracts.ops import HEARTBEAT, Heartbeat, PingReply, PingRequest, ping_rpc
from zimmer_common.contracts.subjects import CONTEXTS, host_ctx
from zimmer_common.db import create_engine, migrate
from zimmer_common.jobs import JobContext, JobRunner, JobSpec
from zimmer_common.logs import configure_logging, kv
from zimmer_common.metrics import ServiceMetrics
from zimmer_common.outage import DATABASE, Outages
from zimmer_common.outbox import OutboxRelay, prune_outbox
from zimmer_common.paging import page_or_log
from zimmer_common.schedule import SCHEDULE, ScheduleEntry, entries_for
from zimmer_common.settings import Settings
from zimmer_common.streams import provision_streams

log = logging.getLogger("zimmer.service")
PING_DATABASE_SECONDS = 1.0
ABANDON_RETRY_SECONDS = 0.25  # a start a stop signal abandons is cancelled again this often until it unwinds

Hook = Callable[["Service"], Awaitable[None]]


class JobFailurePager(Protocol):
    async def job_crashed(self, job: str, exc: BaseException) -> None: ...

    async def report(self, *, title: str, fingerprint: list[str], message: str, context: dict[str, Any],
                     snippet_source: object) -> Any: ...


class Service:
    def __init__(self, name: str, settings: Settings, *, schema: str | None = None, migrations: str | None = None,
                 jobs: list[JobSpec] | None = None, schedule: tuple[ScheduleEntry, ...] = SCHEDULE,
                 clock: Clock | None = None, serve_metrics: bool = True):
        self.name = name
        self.ctx = CONTEXTS.get(name, name)
        self.settings = settings
        self.schema = schema
        self.migrations = migrations
        self.job_specs = list(jobs or [])
        self.pager: JobFailurePager | None = None  # attached at wiring (zimmer_common.pager.attach_pager)
        self.schedule = schedule
        self.clock = clock or SystemClock()
        self.serve_metrics = serve_metrics
        self.metrics = ServiceMetrics(name, __version__, settings.instance_id)
        self.outages = Outages(self.metrics)
        self.engine: AsyncEngine | None = None
        self.bus: Bus | None = None
        self.relay: OutboxRelay | None = None
        self.runner: JobRunner | None = None
        self.host_runner: JobRunner | None = None  # the per-host jobs', when the service has any
        self.metrics_port: int | None = None
        self.ready = False
        # The service's application object (its domain operations), for hooks and tests.
        self.app: Any = None
        self._handlers: list[tuple[RpcSpec[Any, Any], Callable[[Any], Awaitable[Any]]]] = []
        self._consumer_specs: list[tuple[ConsumerSpec, Handler]] = []
        self.consumers: list[DurableConsumer] = []
        self._on_start: list[Hook] = []
        self._on_stop: list[Hook] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._started_at = time.monotonic()
        self._stopping = asyncio.Event()
        self._beating = False  # heartbeats started: a graceful stop sends the retiring one

    # ---- wiring (before start) -------------------------------------------------------

    def rpc(self, spec: RpcSpec[Any, Any]) -> Callable[[Callable[[Any], Awaitable[Any]]], Callable[[Any], Awaitable[Any]]]:
        def register(fn: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
            self._handlers.append((spec, fn))
            return fn
        return register

    def consume(self, spec: ConsumerSpec) -> Callable[[Handler], Handler]:
        """Register an idempotent durable consumer, started after the RPC handlers."""
        def register(fn: Handler) -> Handler:
            self._consumer_specs.append((spec, fn))
            return fn
        return register

    async def _job_failed(self, job: str, exc: BaseException) -> None:
        if self.pager is not None:
            await self.pager.job_crashed(job, exc)

    async def page_error(self, title: str, message: str, fingerprint: list[str], snippet_source: object = None,
                         context: dict[str, Any] | None = None) -> None:
        """The `PageFn` the plumbing (bus, consumers, job runner) pages through: this service's pager,
        fingerprinted with the service's name."""
        if self.pager is None:
            raise LookupError("no pager is attached to this service")
        await self.pager.report(title=title, fingerprint=[self.name, *fingerprint], message=message,
                                context=context or {}, snippet_source=snippet_source)

    def on_start(self, hook: Hook) -> Hook:
        self._on_start.append(hook)
        return hook

    def on_stop(self, hook: Hook) -> Hook:
        self._on_stop.append(hook)
        return hook

    def spawn(self, coro: Awaitable[Any], name: str) -> None:
        """Run a background loop for the life of the service; cancelled at stop."""
        self._tasks.append(asyncio.ensure_future(coro))
        self._tasks[-1].set_name(name)

    # ---- lifecycle -------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def uptime(self) -> float:
        return time.monotonic() - self._started_at

    async def start(self) -> None:
        s = self.settings
        log.info("starting", extra=kv(**s.safe_summary()))
        if self.serve_metrics:
            self.metrics_port = self.metrics.serve_http(s.metrics_host, s.metrics_port)
        if self.schema:
            await migrate(s.database_url, self.schema, self.migrations)
            self.engine = create_engine(s.database_url, app_name=f"zimmer-{self.name}", outages=self.outages)
        self.bus = await Bus.connect(s.nats_servers, service=self.name, instance_id=s.instance_id,
                                     rpc_timeout=s.rpc_timeout_seconds, metrics=self.metrics, outages=self.outages,
                                     max_inflight=s.max_inflight_rpcs, max_inflight_bytes=s.max_inflight_bytes)
        self.bus.page = self.page_error  # an RPC handler that crashes pages
        await provision_streams(self.bus, replicas=s.stream_replicas)
        if self.engine is not None and self.schema:
            self.relay = OutboxRelay(self.engine, self.bus, schema=self.schema, source=self.name,
                                     metrics=self.metrics, poll_interval=s.outbox_poll_seconds, outages=self.outages)
            self.spawn(self.relay.run(), "outbox-relay")
        await self.bus.serve(ping_rpc(self.ctx), self._ping)
        for spec, fn in self._handlers:
            await self.bus.serve(spec, fn)
        for cspec, handler in self._consumer_specs:
            if self.engine is None or self.schema is None:
                raise RuntimeError(f"{self.name}: a durable consumer needs the service's database")
            consumer = DurableConsumer(self.bus, self.engine, schema=self.schema, spec=cspec, handler=handler,
                                       outages=self.outages, page=self.page_error,
                                       kick=self.relay.kick if self.relay is not None else None)
            await consumer.start()
            self.consumers.append(consumer)
        entries = entries_for(self.name, s.env, self.schedule)
        self.runner = self._job_runner(self.ctx, [j for j in self.job_specs if not j.per_host])
        await self.runner.install_schedules([e for e in entries if not e.per_host])
        await self.runner.start()
        host_specs = [j for j in self.job_specs if j.per_host]
        if host_specs:
            self.host_runner = self._job_runner(host_ctx(self.ctx, s.host), host_specs, host=s.host)
            await self.host_runner.install_schedules([e for e in entries if e.per_host])
            await self.host_runner.start()
        for hook in self._on_start:
            await hook(self)
        self._beating = True
        self.spawn(self._heartbeat_loop(), "heartbeat")
        self.ready = True
        self.metrics.ready.labels(self.name).set(1)
        log.info("ready", extra=kv(metrics_port=self.metrics_port))

    def _job_runner(self, ctx: str, specs: list[JobSpec], host: str | None = None) -> JobRunner:
        return JobRunner(self.bus, ctx=ctx, service=self.name, instance_id=self.settings.instance_id,  # type: ignore[arg-type]  # the bus is connected before any job runs
                         jobs=specs, engine=self.engine, metrics=self.metrics, clock=self.clock,
                         outages=self.outages, on_failure=self._job_failed, host=host, page=self.page_error)

    async def enqueue(self, job: str) -> int:
        """Ask for a run of `job` now, outside its schedule (on this host, for a per-host job)."""
        for runner in (self.runner, self.host_runner):
            if runner is not None and job in runner.jobs:
                return await runner.enqueue(job)
        raise KeyError(f"{self.name} has no job {job!r} (or is not started)")

    async def stop(self) -> None:
        grace = self.settings.shutdown_grace_seconds
        self.ready = False
        self.metrics.ready.labels(self.name).set(0)
        log.info("stopping", extra=kv(grace_seconds=grace))
        for hook in reversed(self._on_stop):
            try:
                await asyncio.wait_for(hook(self), timeout=grace)
            except Exception:  # noqa: BLE001 - one failing hook must not stop the rest of the shutdown
                # A warning: the process is going away, and what the hook did not close, its exit does.
                log.warning("stop hook failed", exc_info=True, extra=kv(hook=getattr(hook, "__name__", repr(hook))))
        for runner in (self.host_runner, self.runner):
            if runner:
                await runner.stop(grace)
        for consumer in self.consumers:
            await consumer.stop(grace=2.0)
        if self.bus:
            await self.bus.stop_serving(grace=2.0)
            if self._beating:
                await self._retire()
        self._stopping.set()
        if self.relay:
            self.relay.stop()
        await self._stop_tasks(grace)
        if self.bus:
            await self.bus.close()
        if self.engine:
            await self.engine.dispose()
        self.metrics.stop_http()
        log.info("stopped")

    async def _stop_tasks(self, grace: float) -> None:
        """Loops watch `_stopping`; give them a moment, then cancel, bounded either way."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(self._tasks, timeout=min(grace, 2.0))
        for task in pending:
            task.cancel()
        if pending:
            _done, stuck = await asyncio.wait(pending, timeout=2.0)
            for task in stuck:
                log.warning("background task ignored cancellation", extra=kv(task=task.get_name()))
        self._tasks.clear()

    async def pause(self, seconds: float) -> None:
        """Sleep that a stop cuts short."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)

    async def run_until_signalled(self) -> None:
        """Start, then serve until SIGTERM or SIGINT, then stop gracefully."""
        configure_logging(self.name, self.settings.instance_id, self.settings.log_level)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            # A stop signal during the start ends the start: a start can take as long as its
            # bounded retries (NATS not there yet: about 20 s), and a supervisor stopping the
            # stack SIGKILLed a replica it had just restarted, still starting, at its stop timeout.
            starting = asyncio.ensure_future(self.start())
            signalled = asyncio.ensure_future(stop.wait())
            await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
            signalled.cancel()
            if not starting.done():
                log.info("stop signal during the start: the start is abandoned")
                await self._abandon(starting)
                return
            try:
                starting.result()
            except Exception as exc:
                await page_or_log(self.page_error, "Service failed to start", f"{self.name} could not start and "
                                  "exits; its supervisor restarts it", ["start"], snippet_source=exc)
                raise SystemExit(1) from None
            await stop.wait()
        finally:
            await self.stop()

    async def _abandon(self, starting: asyncio.Future[None]) -> None:
        """Cancel the start and wait for it to unwind, within the grace. Cancelled again every
        ABANDON_RETRY_SECONDS: a cancellation can be lost (Python 3.11's `wait_for` swallows one that
        lands as its inner await completes, as a connect attempt can), and the start's bounded
        retries would then run on for their ~20 s (seen once in a loaded suite)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.shutdown_grace_seconds
        while not starting.done() and loop.time() < deadline:
            starting.cancel()
            await asyncio.wait({starting}, timeout=ABANDON_RETRY_SECONDS)
        if starting.done():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                starting.result()
        else:
            log.warning("the abandoned start did not unwind within the grace; stopping anyway")

    # ---- built-in handlers -----------------------------------------------------------

    async def _ping(self, _req: PingRequest) -> PingReply:
        database = await self._database_answers() if self.engine is not None else None
        return PingReply(service=self.name, version=__version__, instance_id=self.settings.instance_id,
                         uptime_seconds=round(self.uptime, 3), ready=self.ready and database is not False,
                         database=database)

    async def _database_answers(self) -> bool:
        """`SELECT 1`, bounded: readiness includes the service's own PostgreSQL."""
        assert self.engine is not None
        try:
            async with asyncio.timeout(PING_DATABASE_SECONDS):
                async with self.engine.connect() as conn:
                    await conn.execute(text("SELECT 1"))
            self.outages.of(DATABASE).recovered()
            return True
        except Exception as exc:  # noqa: BLE001 - any failure means "not now"
            self.outages.of(DATABASE).failed(exc, where="ping")
            return False

    def _heartbeat(self, *, stopping: bool = False) -> Heartbeat:
        return Heartbeat(service=self.name, instance_id=self.settings.instance_id, version=__version__,
                         at=self.clock.now(), uptime_seconds=round(self.uptime, 3),
                         lanes=sorted({lane.name for r in (self.runner, self.host_runner) if r for lane in r.lanes}),
                         interval_seconds=self.settings.heartbeat_interval_seconds, stopping=stopping)

    async def _retire(self) -> None:
        """The last beat of a graceful stop: the monitor retires this instance at once instead of
        counting it registered, then down, for an hour. Bounded and best effort: a stop that
        cannot say so is read down after two missed beats all the same."""
        assert self.bus is not None
        self._beating = False  # the loop sends no beat after this one: a later one would un-retire it
        beat = self._heartbeat(stopping=True)
        try:
            await self.bus.publish_event(HEARTBEAT, "heartbeat", beat, occurred_at=beat.at, event_id=(
                f"heartbeat.{self.name}.{self.settings.instance_id}.stopping.{time.time_ns()}"))
        except Exception as exc:  # noqa: BLE001 - the process is going away either way
            log.warning("retiring heartbeat not published", extra=kv(error=repr(exc)))

    async def _heartbeat_loop(self) -> None:
        assert self.bus is not None
        while not self._stopping.is_set() and self._beating:
            beat = self._heartbeat()
            try:
                await self.bus.publish_event(HEARTBEAT, "heartbeat", beat, occurred_at=beat.at,
                                             event_id=f"heartbeat.{self.name}.{self.settings.instance_id}.{int(time.time())}")
                self.metrics.heartbeats.labels(self.name).inc()
            except Exception as exc:  # noqa: BLE001 - a missed beat is what the monitor is for
                if self.outages.report(exc, where="heartbeat") is None:
                    log.warning("heartbeat not published", extra=kv(error=repr(exc)))
            await self.pause(self.settings.heartbeat_interval_seconds)


def outbox_prune_job(schema: str) -> JobSpec:
    """The maintenance job every schema-owning service schedules: bound the outbox tables."""

    async def run(ctx: JobContext) -> None:
        assert ctx.engine is not None
        removed = await prune_outbox(ctx.engine, schema)
        log.info("outbox pruned", extra=kv(schema=schema, removed=removed))

    return JobSpec("outbox_prune", "maintenance", run)
