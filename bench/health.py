"""The alerts service's health report: benchmark group `health_report` (issue 15).

The subject is `zimmer_alerts.handlers.health.HealthReporter(...).report()`: one live read of JetStream
(a `$JS.API.CONSUMER.LIST` page per stream, one `STREAM.MSG.GET` by sequence per consumer with
ready work, the schedule and waiting-tick reads of the cron-freshness check) and of the alerts
schema (claimed runs, heartbeats, key records, recovery mode), then the pure rules. Its cost must
be bounded by the number of consumers and scheduled keys, never by how deep a queue is.

Set-up: the alerts service in-process (`zimmer_alerts.service.build(settings)`, `start()`
provisions the streams and migrates `alerts`) on a fresh database, environment `production`, so
the reporter judges the real production schedule (zimmer_common.schedule.SCHEDULE). Consumers as
the services make them, none of them fetching, so everything published stays pending:

- a job-lane consumer `jobs_<ctx>_<lane>` on ZIMMER_JOBS (filter `zimmer.jobs.<ctx>.<lane>.>`,
  `max_ack_pending` = the lane's threads, as JobRunner._ensure_consumer) for every (service,
  lane) of the schedule but the alerts service's own (which its own runner makes);
- a durable on ZIMMER_EVENTS (`backlog_bench_depth`, filter `zimmer.backlog.evt.bench_depth.>`)
  and one on ZIMMER_INGEST (`sweeper_bench_depth`, filter `zimmer.ingest.bench_depth.>`).

Depth: DEPTH_SHARES of the pending messages go to the job lanes (distinct subjects
`zimmer.jobs.<ctx>.<lane>.bench_depth.<i>`: ZIMMER_JOBS keeps one message a subject, so a real
deployment's job lanes hold one message per job at most; the bench caps them at JOB_DEPTH_CAP,
200, at every depth), to the events durable and to the ingest durable (the rest, 3:5), published
round-robin across them. Two depths, 1,000
and 100,000 (quick: 1,000 and 20,000); every round measures both, the order alternating: going
down purges the bench's subjects and publishes the small depth afresh, going up tops it up
(untimed). At each depth, reports and the baseline take turns chunk by chunk
(`interleaved_round`).

Baseline: one consumer-info round trip, `$JS.API.CONSUMER.INFO.ZIMMER_INGEST.sweeper_bench_depth`
through `bus.js_api` on the service's own connection (the deepest consumer), in the same rounds.

Entries: `health.report_1k` and `health.report_100k` (ms, ÷ the consumer-info round trip at that
depth), and `health.depth_ratio` (report at 100k ÷ report at 1k; target ≤ 1.2). Every report is
checked: readable, cron readable, and a ready count of at least the depth (a report that timed out
would be fast and wrong). RSS (the bench process holds the service) beside each. See bench/README.md.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
import uuid
from typing import Any

from bench.harness import BenchContext, Entry, Series, Sizes, interleaved_round, peak_rss_mb, rss_mb
from bench.spot_gate import _fresh_db

GROUP = "health_report"
SMALL = 1_000
LARGE_FULL = 100_000
LARGE_QUICK = 20_000
DEPTH_SHARES = {"jobs": 0.2, "events": 0.3, "ingest": 0.5}
# ZIMMER_JOBS keeps one waiting message per job subject (ticks and hand enqueues coalesce), so a
# deployment's job lanes hold at most one message per job: ~25 today. The job lanes take their
# share up to this many in all; the rest of the depth is where depth really builds up (events, ingest).
JOB_DEPTH_CAP = 200
EVENTS_DURABLE = "backlog_bench_depth"
EVENTS_FILTER = "zimmer.backlog.evt.bench_depth.>"
INGEST_DURABLE = "sweeper_bench_depth"
INGEST_FILTER = "zimmer.ingest.bench_depth.>"
PUBLISH_BATCH = 5_000  # core publishes between flushes
SETTLE_SECONDS = 1.0  # after setting a depth, before its reports


def _sizes(sizes: Sizes) -> dict[str, Any]:
    quick = sizes.rounds <= 3
    return {"rounds": sizes.rounds, "large": LARGE_QUICK if quick else LARGE_FULL,
            "reports": 8 if quick else 30, "chunk": 4 if quick else 5}


def _job_lanes() -> list[tuple[str, str]]:
    """(ctx, lane) of every scheduled job lane of the other services, as their runners name them."""
    from zimmer_common.contracts.subjects import CONTEXTS
    from zimmer_common.schedule import SCHEDULE

    return sorted({(CONTEXTS[e.service], e.lane) for e in SCHEDULE if e.service != "alerts"})


def _label(depth: int) -> str:
    return f"{depth // 1000}k" if depth % 1000 == 0 else str(depth)


class Depth:
    """The bench's pending messages: published round-robin across its consumers, purged by filter."""

    def __init__(self, bus: Any):
        from zimmer_common.contracts.subjects import Stream

        self.bus = bus
        self.lanes = _job_lanes()
        self.current = 0
        self.job_index = 0  # job subjects must be distinct (one message a subject on ZIMMER_JOBS)
        self.jobs_now = 0  # job-lane messages pending now (capped at JOB_DEPTH_CAP)
        self.publish_s: list[float] = []
        self.purges = [(Stream.JOBS.value, f"zimmer.jobs.{ctx}.{lane}.bench_depth.>") for ctx, lane in self.lanes]
        self.purges += [(Stream.EVENTS.value, EVENTS_FILTER), (Stream.INGEST.value, INGEST_FILTER)]

    def targets(self, n: int) -> list[str]:
        """The subjects of the next `n` messages, every destination taking its share in turn."""
        jobs = max(0, min(round(n * DEPTH_SHARES["jobs"]), JOB_DEPTH_CAP - self.jobs_now))
        self.jobs_now += jobs
        events = round((n - jobs) * DEPTH_SHARES["events"] / (DEPTH_SHARES["events"] + DEPTH_SHARES["ingest"]))
        ingest = n - jobs - events
        lanes = self.lanes
        job_subjects = []
        for k in range(jobs):
            ctx, lane = lanes[k % len(lanes)]
            job_subjects.append(f"zimmer.jobs.{ctx}.{lane}.bench_depth.{self.job_index}")
            self.job_index += 1
        streams = [job_subjects,
                   [f"zimmer.backlog.evt.bench_depth.e{k % 50}" for k in range(events)],
                   [f"zimmer.ingest.bench_depth.i{k % 50}" for k in range(ingest)]]
        out: list[str] = []
        longest = max(len(s) for s in streams)
        for k in range(longest):
            out.extend(s[k] for s in streams if k < len(s))
        return out

    async def purge(self) -> None:
        for stream, subject in self.purges:
            resp = await self.bus.js_api(f"STREAM.PURGE.{stream}", {"filter": subject}, timeout=60)
            if "error" in resp:
                raise RuntimeError(f"purge {stream} {subject}: {resp['error']}")
        self.current = 0
        self.jobs_now = 0

    async def publish(self, subjects: list[str]) -> None:
        """Core NATS publishes, no per-message ack (a JetStream ack each runs at 2-4k msg/s on a 2-core
        box, minutes a round at 100k): the streams store them all the same; `set` then waits until
        the consumers hold exactly the depth, so a lost message fails the group rather than passing."""
        nc = self.bus.nc
        body = json.dumps({"bench": "health_report", "pad": "x" * 80}).encode()
        for start in range(0, len(subjects), PUBLISH_BATCH):
            for subject in subjects[start:start + PUBLISH_BATCH]:
                await nc.publish(subject, body)
            await nc.flush(timeout=60)

    async def set(self, depth: int, timeout: float = 120.0) -> dict[str, int]:
        """`depth` pending across the bench's consumers (untimed); their num_pending, once it adds up."""
        from zimmer_common.schedule import SCHEDULE

        started = time.perf_counter()
        if depth != self.current:
            if depth < self.current:
                await self.purge()
            await self.publish(self.targets(depth - self.current))
            self.current = depth
        # In a full run the job-lane consumers may be an earlier group's services', and those
        # services' schedules still fire: at most one real tick a scheduled job subject on top.
        slack = len(SCHEDULE)
        while True:
            pending = await self.pending()
            if depth <= sum(pending.values()) <= depth + slack:
                break
            if time.perf_counter() - started > timeout or sum(pending.values()) > depth + slack:
                raise RuntimeError(f"depth {depth:,} wanted, the bench's consumers hold "
                                   f"{sum(pending.values()):,} after {time.perf_counter() - started:.0f} s: {pending}")
            await asyncio.sleep(0.05)
        self.publish_s.append(time.perf_counter() - started)
        return pending

    async def pending(self) -> dict[str, int]:
        """num_pending of each bench consumer, read with CONSUMER.INFO (checked against the depth)."""
        from zimmer_common.contracts.subjects import Stream

        names = [(Stream.JOBS.value, f"jobs_{ctx}_{lane}") for ctx, lane in self.lanes]
        names += [(Stream.EVENTS.value, EVENTS_DURABLE), (Stream.INGEST.value, INGEST_DURABLE)]
        out = {}
        for stream, name in names:
            info = await self.bus.js_api(f"CONSUMER.INFO.{stream}.{name}")
            out[name] = int(info.get("num_pending", 0))
        return out


async def _consumers(bus: Any) -> list[tuple[str, str]]:
    """The lane, event and ingest consumers, as the services make them; returns the ones created
    here (a full run may already have the job-lane ones from an earlier group's services)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    from zimmer_common.contracts.subjects import Stream, lane_filter
    from zimmer_common.lanes import LANES

    wanted: list[tuple[str, ConsumerConfig]] = []
    for ctx, lane_name in _job_lanes():
        lane = LANES[lane_name]
        wanted.append((Stream.JOBS.value, ConsumerConfig(
            durable_name=f"jobs_{ctx}_{lane.name}", filter_subject=lane_filter(ctx, lane.name),
            ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL, max_ack_pending=lane.threads,
            ack_wait=lane.ack_wait_seconds, max_deliver=-1)))
    for stream, durable, subject in ((Stream.EVENTS.value, EVENTS_DURABLE, EVENTS_FILTER),
                                     (Stream.INGEST.value, INGEST_DURABLE, INGEST_FILTER)):
        wanted.append((stream, ConsumerConfig(
            durable_name=durable, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
            ack_wait=30, max_ack_pending=400, filter_subjects=[subject])))
    created = []
    for stream, cfg in wanted:
        existed = "error" not in await bus.js_api(f"CONSUMER.INFO.{stream}.{cfg.durable_name}")
        await bus.js.add_consumer(stream, cfg)
        if not existed:
            created.append((stream, cfg.durable_name))
    return created


async def _start_alerts(ctx: BenchContext, db: str) -> Any:
    from zimmer_alerts.config import AlertSettings
    from zimmer_alerts.service import build
    from zimmer_common.settings import Environment, Settings

    settings = Settings(env=Environment.PRODUCTION, database_url=db, nats_url=ctx.nats_url, metrics_port=-1,
                        instance_id=f"bench-{uuid.uuid4().hex[:4]}", rpc_timeout_seconds=30,
                        api_key="bench-health-api-key-not-a-placeholder",
                        operator_token="bench-health-operator-token-not-a-placeholder")
    # No sink configured, whatever the environment says: the bench must never notify anyone.
    service = build(settings, alert_settings=AlertSettings(alert_slack_webhook_url="", alertmanager_url="",
                                                           sentry_dsn=""))
    await service.start()
    return service


async def bench_health_report(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from zimmer_alerts.handlers.health import HealthReporter
    from zimmer_common.bus_link import BusLink
    from zimmer_common.contracts.subjects import Stream
    from zimmer_common.settings import Environment
    from zimmer_common.unit_of_work import UnitsOfWork

    n = _sizes(sizes)
    depths = (SMALL, n["large"])
    labels = {d: _label(d) for d in depths}
    report_s = {d: Series(f"health.report_{labels[d]}", "ms", True, n["reports"]) for d in depths}
    info_s = {d: Series(f"nats.consumer_info.{labels[d]}", "ms", True, n["reports"]) for d in depths}
    rates: dict[str, Series] = {}
    rss: dict[int, dict[str, float]] = {}
    report_shape: dict[int, dict[str, Any]] = {}
    pending_seen: dict[int, dict[str, int]] = {}

    rss_start = rss_mb()
    service = await _start_alerts(ctx, await _fresh_db(ctx.pg_url))
    created: list[tuple[str, str]] = []
    depth = None
    try:
        bus = service.bus
        reporter = HealthReporter(BusLink(service), UnitsOfWork(service, "alerts"), service.clock,
                                  Environment.PRODUCTION)
        created = await _consumers(bus)
        depth = Depth(bus)
        await depth.purge()  # a rerun on the same server starts from nothing of ours
        info_api = f"CONSUMER.INFO.{Stream.INGEST.value}.{INGEST_DURABLE}"

        def check(report: Any, at: int) -> None:
            if not report.queue.readable or not report.cron.readable:
                raise RuntimeError(f"health report at depth {at:,} unreadable: queue {report.queue.problem!r}, "
                                   f"cron {report.cron.problem!r}")
            if report.queue.ready_count < at:
                raise RuntimeError(f"health report at depth {at:,} counts {report.queue.ready_count:,} ready")

        async def measure(at: int, round_no: int) -> None:
            pending_seen[at] = await depth.set(at)
            # Untimed: let nats-server finish writing what was just published or purged, and one
            # report to warm whatever the new depth touches, so the timed ones compare the depths.
            await asyncio.sleep(SETTLE_SECONDS)
            await reporter.report()
            last: list[Any] = []

            async def one_report(_i: int) -> None:
                report = await reporter.report()
                check(report, at)
                last[:] = [report]

            async def one_info(_i: int) -> None:
                resp = await bus.js_api(info_api)
                if "error" in resp:
                    raise RuntimeError(f"{info_api}: {resp['error']}")

            gc.collect()
            before = rss_mb()
            lat = {"report": report_s[at], "info": info_s[at]}
            rates.setdefault(f"report{at}", Series("r", "op/s", False, n["reports"]))
            rates.setdefault(f"info{at}", Series("i", "op/s", False, n["reports"]))
            await interleaved_round({"report": one_report, "info": one_info}, n["reports"], n["chunk"], round_no,
                                    lat, {"report": rates[f"report{at}"], "info": rates[f"info{at}"]})
            r = last[0]
            report_shape[at] = {"ready_count": r.queue.ready_count, "lanes": len(r.queue.lanes),
                                "cron_keys": len(r.cron.keys), "overall_status": r.overall_status}
            prev = rss.get(at, {})
            rss[at] = {"before": prev.get("before", before), "after": rss_mb(),
                       "peak": max(rss_mb(), peak_rss_mb())}

        # Warm-up, untimed: first compilation of the statements, the pool's first connections.
        await depth.set(SMALL)
        for _ in range(3):
            await reporter.report()
            await bus.js_api(info_api)
        for round_no in range(n["rounds"]):
            for at in (depths if round_no % 2 == 0 else depths[::-1]):
                await measure(at, round_no)
    finally:
        try:
            if depth is not None and service.bus is not None:
                await depth.purge()
                for stream, name in created:
                    await service.bus.js_api(f"CONSUMER.DELETE.{stream}.{name}")
        finally:
            await service.stop()

    for series in (*report_s.values(), *info_s.values()):  # interleaved_round records µs
        series.round_medians = [v / 1000 for v in series.round_medians]
        series.round_p95s = [v / 1000 for v in series.round_p95s]
    small, large = depths
    consumers = len(_job_lanes()) + 2

    def rss_note(at: int) -> str:
        r = rss[at]
        return f"RSS {r['after']:.1f} MB, peak {r['peak']:.1f} MB"

    def extra(at: int) -> dict[str, Any]:
        shape = report_shape[at]
        return {"rss_mb": rss[at], "depth": at, "bench_consumers": consumers, "pending_by_consumer": pending_seen[at],
                "report": report_shape[at], "rss_before_service_mb": rss_start,
                "footnote": f"{at:,} pending over {consumers} bench consumers ({len(_job_lanes())} job lanes, "
                            f"1 events, 1 ingest; shares {DEPTH_SHARES}); the report saw "
                            f"{shape['ready_count']:,} ready in {shape['lanes']} lanes and judged "
                            f"{shape['cron_keys']} cron keys; {rss_note(at)}"}

    ratio_note = ("ratio = report ms ÷ one CONSUMER.INFO round trip on the same connection, same rounds: how many "
                  "consumer-info round trips one report costs")
    publish = depth.publish_s if depth is not None else []
    # Each round measures both depths back to back: the per-round ratio cancels the drift between
    # rounds (other work on the box), which the ratio of the two medians does not.
    paired = [b / a for a, b in zip(report_s[small].round_medians, report_s[large].round_medians, strict=True)]
    growth = {"publish_seconds": publish, "round_ratios": paired, "paired_median": statistics.median(paired),
              "footnote": f"depth ratio = report at {large:,} pending ÷ report at {small:,}, target ≤ 1.2; the median "
                          f"of the per-round ratios is {statistics.median(paired):.2f} (rounds: "
                          f"{', '.join(f'{r:.2f}' for r in paired)}); the consumer-info baseline moved "
                          f"{info_s[large].median / info_s[small].median:.2f}× over the same step; setting the depth "
                          f"(untimed) took {max(publish, default=0):.1f} s at most"}
    return [
        Entry(GROUP, report_s[small], info_s[small], extra=extra(small),
              note=f"one HealthReporter.report() (production schedule) with {small:,} messages pending; {ratio_note}"),
        Entry(GROUP, report_s[large], info_s[large], extra=extra(large),
              note=f"the same with {large:,} pending; {ratio_note}"),
        Entry(GROUP, Series("health.depth_ratio", "ms", True, n["reports"], report_s[large].round_medians,
                            report_s[large].round_p95s), report_s[small], extra=growth,
              note=f"report at {large:,} pending ÷ report at {small:,} (same rounds); target ≤ 1.2: the report's "
                   "cost must not grow with queue depth"),
    ]
