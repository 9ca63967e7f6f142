"""The spot-gate ceiling sweep's benchmark group `spot_ceiling`.

The subject is `CeilingSweep.run()` (services/spot-gate/zimmer_spot_gate/jobs/ceiling.py, wired as
`service.app.ceiling`): one transaction under the admission advisory lock that reads the running
sessions and the paused ones, asks the gate, and pauses every running spot session (a window at
its utilization limit) or resumes up to 5 paused ones (headroom).

One fresh database, the spot-gate service in-process (`build(settings)`, as `spot_decision` and
`spot_recheck_scan` run it: the sweep is a job of that process, so it shares the event loop with
the admissions it may delay), seeded with SQL: 2,000 running spot sessions, 10,000 paused ones
(precedence and pause time spread) and 50 spot sessions in needs_input for the admission stream;
`max_sessions` 1,000,000 so slots never bound the resume; 10 accounts with quota readings.

- headroom sweep: readings at 0.1, so every sweep resumes the head of the queue (5 sessions,
  precedence 99, oldest pause first); after each sweep (untimed) those 5 are put back in the
  queue exactly as they were, so every sweep does the same work.
- pause sweep: readings at 0.95 on the 5-hour window, so the sweep pauses all 2,000 running
  sessions (one UPDATE, a stop_turn and a session_paused event each, a warning log record each);
  the outbox relay is let drain (untimed, its time kept); then the steady sweep at the limit
  (everything running already paused: nothing to do); then (untimed) SQL takes the 2,000 out of
  the pause again.
- baseline, in the same rounds: a plain SELECT of the plan's columns of every running or paused
  session (12,000 rows), on the service's own engine, alternating with every headroom sweep and
  with every pause + steady pair (before or after it, alternating).
- admission latency: an open-loop stream of `request_turn` (follow_up) RPCs over NATS on the 50
  stream sessions (40 a second; each admitted turn's session is reported back to needs_input,
  untimed, before it is used again), for a few seconds with back-to-back headroom sweeps running
  and for as long without, in the same round (order alternating). p50 and p99 of the round trip.

RSS beside each figure (the bench process holds the service, so it is the service's memory too).
See bench/README.md.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import (
    BenchContext,
    Entry,
    Series,
    Sizes,
    peak_rss_mb,
    percentile,
    rss_mb,
)
from bench.spot_gate import _fresh_db, _start_service

GROUP = "spot_ceiling"
RUNNING = 2_000
PAUSED = 10_000
STREAM_SESSIONS = 50
ACCOUNTS = 10
RESUME_BATCH = 5  # the sweep's own batch (domain/ceiling.py); checked against what each sweep resumes
STREAM_RATE = 40.0  # request_turn RPCs started per second, whatever the answers' latency (open loop)
HEAD = 50  # queue head remembered so a resumed session can be put back exactly where it was

_PLAN_COLUMNS = ("id, precedence, created_at, spot_pause_at, genesis, scheduling_class, runtime, harness, model, "
                 "is_status_summary_fork, resume_prompt")
SELECT_ROWS = (f"SELECT {_PLAN_COLUMNS} FROM spot_gate.sessions "
               "WHERE status = 'running' OR paused_by IS NOT NULL")


def _sizes(sizes: Sizes) -> dict[str, Any]:
    quick = sizes.rounds <= 3
    return {"rounds": sizes.rounds, "sweeps": 3 if quick else 6, "pauses": 1 if quick else 2,
            "stream_seconds": 1.5 if quick else 3.0}


async def _seed(service: Any, now: datetime) -> list[int]:
    """The sessions, straight into the migrated schema; returns the stream sessions' ids."""
    from sqlalchemy import text

    async with service.engine.begin() as conn:
        await conn.execute(text("UPDATE spot_gate.spot_policy SET max_sessions = 1000000"))
        await conn.execute(text("""
            INSERT INTO spot_gate.sessions (genesis, title, prompt, status, ever_started)
            SELECT 'schedule', 'running ' || g, 'go', 'running', true FROM generate_series(1, :n) g"""),
                           {"n": RUNNING})
        await conn.execute(text("""
            INSERT INTO spot_gate.sessions (genesis, title, prompt, status, ever_started, precedence, paused_by,
                                            spot_pause_at, spot_pause_reason, spot_pause_detail, spot_pause_count,
                                            spot_pause_acked_at)
            SELECT 'schedule', 'paused ' || g, 'go', 'waiting', true, g % 100, 'spot_quota',
                   CAST(:now AS timestamptz) - make_interval(secs => g), 'at_utilization_limit', 'x', 1, now()
            FROM generate_series(1, :n) g"""), {"n": PAUSED, "now": now})
        rows = await conn.execute(text("""
            INSERT INTO spot_gate.sessions (genesis, title, prompt, status, ever_started)
            SELECT 'schedule', 'stream ' || g, 'go', 'needs_input', true FROM generate_series(1, :n) g
            RETURNING id"""), {"n": STREAM_SESSIONS})
        stream = [r.id for r in rows]
        await conn.execute(text("ANALYZE spot_gate.sessions"))
    return stream


async def _readings(service: Any, five_hour: float) -> None:
    """Every account's newest reading: 0.95 on the 5-hour window puts the gate at its limit, 0.1 is headroom."""
    from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn

    now = datetime.now(UTC)
    for i in range(ACCOUNTS):
        await service.app.record_reading(QuotaReadingIn(
            account=f"acct-{i}", status="active", read_at=now,
            five_hour=WindowReadingIn(utilization=five_hour, resets_at=now + timedelta(hours=2)),
            seven_day=WindowReadingIn(utilization=0.1 if five_hour < 0.5 else 0.3, resets_at=now + timedelta(days=3))))


class Bench:
    def __init__(self, service: Any):
        from sqlalchemy import text

        self.service = service
        self.sweep = service.app.ceiling
        self.text = text
        self.head: dict[int, datetime] = {}
        self.select_rows = 0

    async def sql(self, query: str, **params: Any) -> Any:
        async with self.service.engine.begin() as conn:
            return await conn.execute(self.text(query), params)

    async def remember_head(self) -> None:
        rows = await self.sql(
            "SELECT id, spot_pause_at FROM spot_gate.sessions WHERE paused_by = 'spot_quota' AND status = 'waiting' "
            "ORDER BY precedence DESC, spot_pause_at, id LIMIT :n", n=HEAD)
        self.head = {r.id: r.spot_pause_at for r in rows}

    async def put_back(self, ids: list[int]) -> None:
        """Resumed sessions back in the queue where they were (untimed)."""
        missing = [i for i in ids if i not in self.head]
        if missing:
            raise RuntimeError(f"the sweep resumed sessions outside the queue's head: {missing}")
        await self.sql("""
            UPDATE spot_gate.sessions s SET status = 'waiting', paused_by = 'spot_quota', spot_pause_at = v.at,
                   spot_pause_reason = 'at_utilization_limit', spot_pause_detail = 'x', spot_pause_acked_at = now()
            FROM unnest(CAST(:ids AS bigint[]), CAST(:ats AS timestamptz[])) AS v(id, at) WHERE s.id = v.id""",
                       ids=ids, ats=[self.head[i] for i in ids])

    async def unpause(self, ids: list[int]) -> None:
        """The sessions one pause sweep paused, running again and out of the pause (untimed)."""
        await self.sql("""
            UPDATE spot_gate.sessions SET paused_by = NULL, spot_pause_at = NULL, spot_pause_reason = NULL,
                   spot_pause_detail = NULL, spot_pause_acked_at = NULL, spot_pause_count = 0
            WHERE id = ANY(CAST(:ids AS bigint[]))""", ids=ids)

    async def relay_drained(self, timeout: float = 60.0) -> float:
        """Wait for the outbox relay to publish everything; seconds it took."""
        started = time.perf_counter()
        relay = self.service.relay
        while await relay.pending():
            relay.kick()
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"outbox relay still has {await relay.pending()} rows after {timeout:.0f} s")
            await asyncio.sleep(0.01)
        return time.perf_counter() - started

    async def timed_sweep(self, collect: bool = True) -> tuple[float, Any]:
        if collect:
            gc.collect()  # see select()
        t0 = time.perf_counter()
        report = await self.sweep.run()
        return (time.perf_counter() - t0) * 1000, report

    async def headroom_sweep(self, collect: bool = True) -> float:
        ms, report = await self.timed_sweep(collect)
        if report.paused or len(report.resumed) != RESUME_BATCH or report.decision.reason.value == "at_utilization_limit":
            raise RuntimeError(f"headroom sweep: {report.decision.reason.value}, paused {len(report.paused)}, "
                               f"resumed {len(report.resumed)} (want {RESUME_BATCH})")
        await self.put_back(report.resumed)
        return ms

    async def select(self) -> float:
        # Untimed: a full collection first, as before every timed sweep. Without it the allocations
        # of 12,000 rows now and then set off a collection of the whole heap (the service's objects
        # included) inside whichever operation happens to be running: +60-80 ms, on a random side.
        gc.collect()
        t0 = time.perf_counter()
        async with self.service.engine.connect() as conn:
            rows = (await conn.execute(self.text(SELECT_ROWS))).all()
        ms = (time.perf_counter() - t0) * 1000
        self.select_rows = len(rows)
        return ms


async def bench_ceiling(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.runtime import SessionStatusReport
    from zimmer_common.contracts.spot import REQUEST_TURN, RequestTurn

    n = _sizes(sizes)
    per_window = round(STREAM_RATE * n["stream_seconds"])
    headroom = Series("spot.ceiling.sweep.headroom", "ms", True, n["sweeps"])
    pause = Series("spot.ceiling.sweep.pause_2000", "ms", True, n["pauses"])
    steady = Series("spot.ceiling.sweep.at_limit_steady", "ms", True, n["pauses"])
    select = Series("pg.select.ceiling_rows", "ms", True, n["sweeps"])
    select_limit = Series("pg.select.ceiling_rows.at_limit", "ms", True, n["pauses"])
    during = Series("spot.ceiling.request_turn.during_sweeps", "ms", True, per_window)
    idle = Series("spot.ceiling.request_turn.no_sweeps", "ms", True, per_window)
    during99 = Series("spot.ceiling.request_turn.during_sweeps.p99", "ms", True, per_window)
    idle99 = Series("spot.ceiling.request_turn.no_sweeps.p99", "ms", True, per_window)
    drain_ms: list[float] = []
    stream_counts: dict[str, list[int]] = {"during_sweeps": [], "no_sweeps": []}
    sweeps_while_streaming: list[int] = []
    sweep_ms_while_streaming: list[float] = []
    busy: list[float] = []  # share of each streaming window spent inside a sweep (the admission lock held)
    rss: dict[str, dict[str, float]] = {}

    # The pause's warning, one a session (2,000 a pause sweep): records are still made, but go nowhere
    # rather than to the bench's stderr.
    ceiling_log = logging.getLogger("zimmer.spot_gate.ceiling")
    saved = ceiling_log.propagate
    null = logging.NullHandler()
    ceiling_log.addHandler(null)
    ceiling_log.propagate = False

    rss_start = rss_mb()
    service = await _start_service(ctx, await _fresh_db(ctx.pg_url))
    client = None
    try:
        now = datetime.now(UTC)
        stream_ids = await _seed(service, now)
        b = Bench(service)
        await b.remember_head()
        client = await Bus.connect([ctx.nats_url], service="bench", instance_id=f"c-{uuid.uuid4().hex[:4]}",
                                   rpc_timeout=60)
        rss_seeded = rss_mb()

        # Warm-up, untimed: the statements' first compilation, the pool's first read.
        await _readings(service, 0.1)
        await b.headroom_sweep()
        await b.select()
        await b.relay_drained()

        async def sweep_rounds() -> None:
            await _readings(service, 0.1)
            sweep_s, select_s = [], []
            for k in range(n["sweeps"]):
                for what in (("sweep", "select") if k % 2 == 0 else ("select", "sweep")):
                    if what == "sweep":
                        sweep_s.append(await b.headroom_sweep())
                        await b.relay_drained()
                    else:
                        select_s.append(await b.select())
            headroom.add_latencies(sweep_s)
            select.add_latencies(select_s)

        async def pause_rounds(round_no: int) -> None:
            await _readings(service, 0.95)
            pause_s, steady_s, select_s = [], [], []
            for k in range(n["pauses"]):
                select_first = (round_no + k) % 2 == 0
                if select_first:
                    select_s.append(await b.select())
                ms, report = await b.timed_sweep()
                if report.decision.reason.value != "at_utilization_limit" or len(report.paused) != RUNNING:
                    raise RuntimeError(f"pause sweep: {report.decision.reason.value}, paused {len(report.paused)} "
                                       f"(want {RUNNING})")
                pause_s.append(ms)
                drain_ms.append(await b.relay_drained() * 1000)
                ms2, again = await b.timed_sweep()
                if again.paused or again.resumed:
                    raise RuntimeError(f"steady sweep at the limit paused {len(again.paused)}, resumed {len(again.resumed)}")
                steady_s.append(ms2)
                await b.unpause(report.paused)
                await b.relay_drained()
                if not select_first:
                    select_s.append(await b.select())
            pause.add_latencies(pause_s)
            steady.add_latencies(steady_s)
            select_limit.add_latencies(select_s)
            await _readings(service, 0.1)

        pool: asyncio.Queue[int] = asyncio.Queue()
        for sid in stream_ids:
            pool.put_nowait(sid)

        async def one_turn(samples: list[float], due: float) -> None:
            sid = await pool.get()  # timed from when the request was due: waiting for a free session counts
            try:
                result = await client.request(REQUEST_TURN, RequestTurn(session_id=sid, kind="follow_up", prompt="more"))
                samples.append((time.perf_counter() - due) * 1000)
                if result.outcome != "admitted":
                    raise RuntimeError(f"request_turn on stream session {sid}: {result.outcome}")
                await service.app.report_status(SessionStatusReport(session_id=sid, status="needs_input"))
            finally:
                pool.put_nowait(sid)

        async def stream(seconds: float, samples: list[float]) -> None:
            tasks: list[asyncio.Task[None]] = []
            started = time.perf_counter()
            k = 0
            while True:
                due = started + k / STREAM_RATE
                if due - started >= seconds:
                    break
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                tasks.append(asyncio.create_task(one_turn(samples, due)))
                k += 1
            await asyncio.gather(*tasks)

        async def admission_round(round_no: int) -> None:
            await _readings(service, 0.1)
            for what in (("idle", "during") if round_no % 2 == 0 else ("during", "idle")):
                samples: list[float] = []
                if what == "idle":
                    await stream(n["stream_seconds"], samples)
                    idle.add_latencies(samples)
                    idle99.add_latencies([percentile(samples, 99)])
                    stream_counts["no_sweeps"].append(len(samples))
                else:
                    stop = asyncio.Event()
                    swept: list[float] = []

                    async def sweeper(stop: asyncio.Event, swept: list[float]) -> None:
                        while not stop.is_set():
                            swept.append(await b.headroom_sweep(collect=False))  # the loop is live

                    task = asyncio.create_task(sweeper(stop, swept))
                    started = time.perf_counter()
                    try:
                        await stream(n["stream_seconds"], samples)
                    finally:
                        stop.set()
                        await task
                    busy.append(sum(swept) / ((time.perf_counter() - started) * 1000))
                    during.add_latencies(samples)
                    during99.add_latencies([percentile(samples, 99)])
                    stream_counts["during_sweeps"].append(len(samples))
                    sweeps_while_streaming.append(len(swept))
                    sweep_ms_while_streaming.extend(swept)
                await b.relay_drained()

        for _ in range(sizes.rounds):
            await sweep_rounds()
        rss["sweep"] = {"before": rss_seeded, "after": rss_mb(), "peak": max(rss_mb(), peak_rss_mb())}
        for round_no in range(sizes.rounds):
            await pause_rounds(round_no)
        rss["pause"] = {"before": rss["sweep"]["after"], "after": rss_mb(), "peak": max(rss_mb(), peak_rss_mb())}
        for round_no in range(sizes.rounds):
            await admission_round(round_no)
        rss["admissions"] = {"before": rss["pause"]["after"], "after": rss_mb(), "peak": max(rss_mb(), peak_rss_mb())}
    finally:
        if client is not None:
            await client.close()
        await service.stop()
        ceiling_log.removeHandler(null)
        ceiling_log.propagate = saved

    def rss_note(key: str) -> str:
        r = rss[key]
        return f"RSS {r['after']:.1f} MB ({r['after'] - r['before']:+.1f}), peak {r['peak']:.1f} MB"

    rows = b.select_rows
    sweep_extra = {"rss_mb": rss["sweep"], "select_rows": rows, "running": RUNNING, "paused": PAUSED,
                   "rss_before_service_mb": rss_start,
                   "footnote": f"{RUNNING:,} running, {PAUSED:,} paused, {RESUME_BATCH} resumed a sweep; the SELECT "
                               f"returns {rows:,} rows; {rss_note('sweep')} (service + seed: "
                               f"{rss['sweep']['before'] - rss_start:+.1f} MB)"}
    pause_extra = {"rss_mb": rss["pause"], "relay_drain_ms": {"median": statistics.median(drain_ms),
                                                               "round_values": drain_ms},
                   "footnote": f"after each pause the outbox relay took {statistics.median(drain_ms):,.0f} ms (median) "
                               f"to publish its {2 * RUNNING:,} events; {rss_note('pause')}"}
    stream_extra = {"rss_mb": rss["admissions"], "requests": stream_counts, "rate_per_s": STREAM_RATE,
                    "sweeps_while_streaming": sweeps_while_streaming, "sweep_busy_fraction": busy,
                    "sweep_ms_while_streaming": {"median": statistics.median(sweep_ms_while_streaming),
                                                 "max": max(sweep_ms_while_streaming)},
                    "footnote": f"{STREAM_RATE:.0f} request_turn/s for {n['stream_seconds']} s per side per round; "
                                f"{statistics.median(sweeps_while_streaming):.0f} sweeps ran back to back per window "
                                f"(median {statistics.median(sweep_ms_while_streaming):,.0f} ms each, "
                                f"max {max(sweep_ms_while_streaming):,.0f} ms, inside a sweep "
                                f"{100 * statistics.median(busy):.0f} % of the window); {rss_note('admissions')}"}
    ratio_note = "ratio = sweep ms ÷ SELECT ms (lower is better; > 1 is what the sweep costs beyond reading its rows)"
    return [
        Entry(GROUP, headroom, select, extra=sweep_extra,
              note=f"one sweep with headroom over {RUNNING:,} running and {PAUSED:,} paused, resuming "
                   f"{RESUME_BATCH}; {ratio_note}"),
        Entry(GROUP, pause, select_limit, extra=pause_extra,
              note=f"one sweep at the limit pausing all {RUNNING:,} running sessions; {ratio_note}"),
        Entry(GROUP, steady, select_limit, note=f"a sweep at the limit with everything already paused; {ratio_note}"),
        Entry(GROUP, during, idle, extra=stream_extra,
              note="request_turn round trip (median of each round) with back-to-back headroom sweeps ÷ without; "
                   "> 1 is the sweep's effect on admissions"),
        Entry(GROUP, during99, idle99, note="the same, each round's p99"),
    ]
