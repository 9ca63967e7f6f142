"""Issue 32 #5, the test the issue asks for: one recorded day, made by driving the real spot gate
(real admissions, re-checks, ceiling sweeps and status reports against real PostgreSQL and NATS,
a clock the test moves), replayed at the recorded settings reproduces every recorded decision,
and a different reserve changes what happened in the direction it should."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.policy_dry_run import DRY_RUN, DryRunFigures, PolicyDryRun, PolicyDryRunView
from zimmer_common.contracts.runtime import QuotaReadingIn, SessionStatusReport, WindowReadingIn
from zimmer_common.jobs import JobContext
from zimmer_spot_gate.domain.gate import evaluate_call
from zimmer_spot_gate.domain.gate_record import call_of

STEP = timedelta(minutes=10)
STEPS = 144  # one day
CAPACITY_5H, CAPACITY_7D = 1_500.0, 60_000.0  # dollars; every session burns $1/min (Opus-priced)
WINDOW = timedelta(hours=5)


class Fleet:
    """The runtime's side, as the test plays it: each turn runs a few steps, a stopped turn is
    reported over, and the windows fill with what runs."""

    def __init__(self, spot):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        self.spot = spot
        self.started: dict[int, int] = {}  # session -> the step its turn started
        self.u5 = self.u7 = 0.0
        self.window_start = spot.clock.now()
        self.peaks: Counter[int] = Counter()  # hour index -> the most running seen at a step's end

    async def running(self) -> list[tuple[int, str | None]]:
        return [(r.id, r.paused_by) for r in await self.spot.sql(
            "SELECT id, paused_by FROM spot_gate.sessions WHERE status = 'running'")]

    async def read(self) -> None:
        now = self.spot.clock.now()
        if now - self.window_start >= WINDOW:
            self.window_start, self.u5 = now, 0.0
        for account in ("acct-a", "acct-b"):
            await self.spot.app.record_reading(QuotaReadingIn(
                account=account, status="active", read_at=now,
                five_hour=WindowReadingIn(utilization=min(self.u5, 1.0), resets_at=self.window_start + WINDOW),
                seven_day=WindowReadingIn(utilization=self.u7, resets_at=now + timedelta(days=4))))

    async def step(self, n: int) -> None:
        spot = self.spot
        running = await self.running()
        burned = len(running) * STEP.total_seconds() / 60  # $1/min each
        self.u5 += burned / CAPACITY_5H
        self.u7 += burned / CAPACITY_7D
        spot.clock.advance(STEP)
        await self.read()
        for sid, paused_by in running:  # a turn runs 3 to 6 steps; a paused one stops at once
            self.started.setdefault(sid, n)
            if paused_by is not None or n - self.started[sid] >= 3 + sid % 4:
                await spot.app.report_status(SessionStatusReport(session_id=sid, status="needs_input"))
                self.started.pop(sid)
        if n % 2 == 0 or n % 7 == 0:  # spot work arrives every 20 minutes and then some
            await spot.bus.request(c.SPAWN, c.SpawnSession(genesis="schedule", prompt=f"work {n}"))
        if n % 12 == 5:  # and a person's work now and then
            await spot.bus.request(c.SPAWN, c.SpawnSession(genesis="web_ui", prompt=f"urgent {n}"))
        await spot.app.ceiling.run()  # the sweep before the re-checks: a resume is not starved of slots
        await recheck(spot)
        hour = (n + 1) * 10 // 60  # the clock moved to the end of step n
        self.peaks[hour] = max(self.peaks[hour], len(await self.running()))


async def recheck(spot) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    [job] = [j for j in spot.service.job_specs if j.name == "recheck_due"]

    async def progress() -> None:
        return None

    await job.fn(JobContext("recheck_due", "test", spot.bus, spot.service.engine, spot.clock, progress))


async def record_a_day(spot) -> Fleet:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    await spot.app.policy.set(p.SetPolicy(reserve_five_hour_percent=30, reserve_seven_day_percent=10, max_sessions=4))
    await spot.sql("INSERT INTO spot_gate.window_calibration (window_name, capacity_dollars) VALUES "
                   f"('five_hour', {CAPACITY_5H}), ('seven_day', {CAPACITY_7D})")
    await spot.sql("INSERT INTO spot_gate.burn_rates (harness, model, dollars_per_minute, opus_dollars_per_minute, "
                   "sessions_counted) VALUES ('claude_code', 'claude-opus-4', 1.0, 1.0, 5)")
    fleet = Fleet(spot)
    await fleet.read()
    for n in range(STEPS):
        await fleet.step(n)
    return fleet


def waited(f: DryRunFigures) -> float:
    """Minutes spot work waited: held at the gate or paused mid-run."""
    return float(f.held_minutes + f.paused_minutes)


async def dry_run(spot, **settings) -> PolicyDryRunView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await spot.bus.request(DRY_RUN, PolicyDryRun(**settings))


async def test_a_recorded_day_replayed_at_its_settings_reproduces_its_decisions(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    t0 = spot.clock.now()
    fleet = await record_a_day(spot)
    day = {"since": t0, "until": t0 + timedelta(hours=25)}  # the last step's decisions are at 24:00
    rows = await spot.sql("SELECT decided_at, event, allowed, reason, ceiling, sentence, inputs FROM "
                          "spot_gate.gate_decisions WHERE inputs IS NOT NULL ORDER BY decided_at, id")
    # A day with something to replay: admissions, holds on both ceilings' kinds, pauses, resumes.
    events = Counter((r.event, r.allowed) for r in rows)
    assert events[("turn", True)] > 20 and events[("turn", False)] > 10, events
    assert events[("ceiling_pause", False)] > 0 and events[("ceiling_resume", True)] > 0, events
    # Each recorded call decides again exactly as the gate did: allowed, reason, ceiling and words.
    for r in rows:
        d = evaluate_call(call_of(r.inputs if isinstance(r.inputs, dict) else json.loads(r.inputs)))
        assert (d.allowed, d.reason.value, d.ceiling.value if d.ceiling else None, d.sentence) == (
            r.allowed, r.reason, r.ceiling, r.sentence)

    same = await dry_run(spot, **day)
    assert (same.decisions_replayed, same.decisions_changed, same.reasons_changed, same.sessions_changed) == (
        len(rows), 0, 0, 0)
    assert same.sessions == [] and not same.truncated
    # Swept every 10 minutes through the day: only the hour after it lacks sweeps.
    assert [(g.since, g.until) for g in same.missing] == [(t0 + STEPS * STEP, day["until"])]
    assert same.replayed == same.recorded
    for hour in same.hours:
        assert hour.replayed == hour.recorded and (hour.held_instead, hour.admitted_instead) == (0, 0)
    # The record the answer sets beside the replay is the decision log's, hour by hour ...
    by_hour = Counter((int((r.decided_at - t0) / timedelta(hours=1)), r.allowed) for r in rows
                      if r.event not in ("ceiling_pause", "ceiling_kept"))
    assert [(h.recorded.admitted, h.recorded.held) for h in same.hours] == [
        (by_hour[(i, True)], by_hour[(i, False)]) for i in range(25)]
    # ... and the most running at once is at least what the runtime saw at each step's end.
    assert all(same.hours[i].recorded.peak_running >= fleet.peaks[i] for i in range(25))
    assert max(h.recorded.peak_running for h in same.hours) <= 4 + 2  # max sessions, and priority work
    assert same.resets, "the 5-hour window reset four times in the day"
    assert {r.left.unit for r in same.resets} == {"dollars"}

    # A 10% reserve instead of the recorded 30%: spot work is let through where it was held, and
    # waits less; at the reset the replay has spent more of the window.
    lower = await dry_run(spot, reserve_five_hour_percent=10, **day)
    assert lower.decisions_changed > 0 and sum(h.admitted_instead for h in lower.hours) > 0
    assert lower.replayed.held_minutes < lower.recorded.held_minutes
    assert lower.replayed.held < lower.recorded.held
    assert waited(lower.replayed) < waited(lower.recorded)
    five = [r.left for r in lower.resets if r.left.window == "five_hour"]
    assert all(x.utilization_replayed >= x.utilization_recorded for x in five)
    assert any(x.utilization_replayed > x.utilization_recorded for x in five)
    # A 50% reserve: held or paused where it ran, far more often than the other way, and more waiting
    # (the ceiling pauses running spot work the recorded 30% let run).
    higher = await dry_run(spot, reserve_five_hour_percent=50, **day)
    assert sum(h.held_instead for h in higher.hours) > 2 * sum(h.admitted_instead for h in higher.hours)
    assert higher.replayed.paused > higher.recorded.paused
    assert waited(higher.replayed) > waited(higher.recorded)
    assert all(x.utilization_replayed <= x.utilization_recorded for x in (r.left for r in higher.resets))
    assert higher.settings.reserve_five_hour_percent == 50 and higher.settings.max_sessions is None

    # Without a span: the 7 days up to now, which hold the same day and nothing more.
    default = await dry_run(spot)
    assert default.until == spot.clock.now() and default.until - default.since == timedelta(days=7)
    before_now = [r for r in rows if r.decided_at < spot.clock.now()]
    assert default.decisions_replayed == len(before_now) < len(rows) and default.decisions_changed == 0
