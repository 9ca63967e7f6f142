"""Spot-gate's scheduled jobs (seed 003 cron table; seed 004 "What hold does"): `spot_jobs` (re-checks,
hold repair, calibration, burn rates, the usage sampler), and the two sweeps bootstrap schedules after
them, each the edge around its domain rule: the ceiling sweep (`ceiling`) and the stranded-sleep
sweep (`stranded_sleep`)."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta

from zimmer_common.contracts.runtime import SAMPLE_QUOTA, SampleQuota
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.paging import PageFn, page_or_log
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.ladder import repair_delay
from zimmer_spot_gate.domain.model import WINDOW_LENGTH
from zimmer_spot_gate.domain.pool import pooled_windows
from zimmer_spot_gate.domain.prices import DEFAULT_PRICES, Prices, currency_dollars
from zimmer_spot_gate.domain.pricing import SessionSpend, accounts_to_sample, burn_rates, calibrate
from zimmer_spot_gate.handlers.turns import TurnGate, TurnRequest
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store import sessions as store

log = logging.getLogger("zimmer.spot_gate.jobs")

RECHECK_BATCH = 500
RECHECK_CHUNK = 100
REPAIR_PER_SWEEP = 10  # SpotHoldSweepJob: 10 a sweep
REPAIR_OVERDUE_MINUTES = 10
BURN_RATE_SESSIONS = 25


def spot_jobs(units: UnitsOfWork, gate: TurnGate, now: Callable[[], datetime],
              jitter: Callable[[], float] = random.random, prices: Prices = DEFAULT_PRICES,
              page: PageFn | None = None) -> list[JobSpec]:
    """The gate's own jobs, each a function of its job context over these collaborators."""
    async def recheck_due(ctx: JobContext) -> None:
        """Re-check every held session whose time has come, in batches of `RECHECK_CHUNK`, one
        transaction each, so one failure cannot take the whole pass down. Durable: the due
        time is a column, so a restart loses nothing."""
        at = now()
        async with units.begin() as uow:
            conn = uow.conn
            due = await store.due_holds(conn, at, RECHECK_BATCH)
            stood_down = await store.standing_down(conn, at, RECHECK_BATCH)
            await store.log_decisions(conn, [
                {"session_id": r.id, "allowed": False, "reason": "wake_ahead", "event": "wake_stand_down",
                 "sentence": f"Its re-check came due while it is paused until {r.wake_at.isoformat()}: it stands "
                             "down without re-arming; the wake is its next event."} for r in stood_down], at)
        admitted = 0
        for start in range(0, len(due), RECHECK_CHUNK):
            chunk = due[start:start + RECHECK_CHUNK]
            try:
                async with units.begin() as uow:
                    outcomes = await gate.process(uow.conn, [TurnRequest(sid, recheck=True) for sid in chunk])
                admitted += sum(1 for o in outcomes if getattr(o, "outcome", None) in ("admitted", "passed"))
            except Exception as exc:  # noqa: BLE001 - these rows stay due and the next pass retries them
                await page_or_log(page, "Re-check batch failed", f"{len(chunk)} held sessions' re-checks failed; "
                                  "they stay due and the next pass retries them", ["recheck_due", type(exc).__name__],
                                  snippet_source=exc, sessions=chunk)
            await ctx.progress()
        if due:
            log.info("re-checked held sessions", extra=kv(due=len(due), admitted=admitted))

    async def hold_repair(ctx: JobContext) -> None:
        """Put back on the ladder held sessions whose re-check is more than 10 minutes overdue
        with nothing pending (the re-check pass has not reached them), 10 a sweep, spread over
        3 minutes so a repaired backlog does not re-check in one instant."""
        async with units.begin() as uow:
            conn = uow.conn
            at = now()
            stranded = await store.stranded_holds(conn, at - timedelta(minutes=REPAIR_OVERDUE_MINUTES),
                                                  REPAIR_PER_SWEEP, now=at)
            for session_id in stranded:
                await store.update_fields(conn, session_id, spot_hold_retry_at=now() + repair_delay(jitter()))
        if stranded:
            log.warning("repaired stranded spot holds", extra=kv(sessions=stranded))

    async def quota_calibration(ctx: JobContext) -> None:
        """A window's capacity in Opus dollars = Claude spend since the window started (its reset
        minus its length), every Claude model's tokens at Opus list prices (the gate's currency,
        `prices.CURRENCY`; Codex spend is outside it), ÷ the pool's average
        utilization of it; smoothed, and only once both are measurable (seed 003
        QuotaCapacityCalibrationJob; DESIGN §9). A window with no known reset has no known
        start, so it is not priced this run."""
        at = now()
        async with units.begin() as uow:
            conn = uow.conn
            readings, pool_size = await quota.newest_readings(conn)
            pooled = pooled_windows(readings, at, pool_size)
            previous = await quota.capacities(conn)
            for window, p in pooled.items():
                if not p.reset_known:
                    continue
                started = at + timedelta(seconds=p.mean_seconds_to_reset) - WINDOW_LENGTH[window]
                spend = sum(currency_dollars(usage, harness, model, prices)
                            for harness, model, usage in await quota.usage_by_model_since(conn, started))
                capacity = calibrate(previous.get(window), spend, p.utilization)
                if capacity is not None and capacity != previous.get(window):
                    await quota.save_capacity(conn, window, capacity)
        gate.pool.invalidate()

    async def burn_rate_recompute(ctx: JobContext) -> None:
        """$/min per harness + model over its last 25 sessions, at list prices (the Costs page) and
        in the gate's currency (what it compares with capacity: DESIGN §9 "One currency")."""
        async with units.begin() as uow:
            conn = uow.conn
            spends = [SessionSpend(str(r.session_id), r.harness, r.model, float(r.dollars), r.first_at, r.last_at,
                                   currency_dollars(usage, r.harness, r.model, prices))
                      for r, usage in await quota.session_spends(conn, BURN_RATE_SESSIONS)]
            await quota.save_burn_rates(conn, burn_rates(spends, BURN_RATE_SESSIONS))
        gate.pool.invalidate()

    async def usage_sampler(ctx: JobContext) -> None:
        """Ask the runtime for fresh readings: the serving account every tick, plus up to 2
        others whose newest reading is older than 60 minutes, stalest first."""
        async with units.begin() as uow:
            serving, newest = await quota.newest_reading_times(uow.conn)
            accounts = accounts_to_sample(serving, newest, now())
            if accounts:
                await uow.emit(SAMPLE_QUOTA, "sample_quota", SampleQuota(accounts=accounts))

    return [
        JobSpec("recheck_due", "default", recheck_due),
        JobSpec("hold_repair", "default", hold_repair),
        JobSpec("quota_calibration", "default", quota_calibration),
        JobSpec("burn_rate_recompute", "default", burn_rate_recompute),
        JobSpec("usage_sampler", "pollers", usage_sampler),
    ]
