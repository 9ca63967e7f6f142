"""The scenarios: a fleet profile, a timeline of what happens to the system while it runs, and what
the run must show beyond the standing invariants (zimmer_sim.invariants).

A scenario that breaks processes (`outage`, `stall`) needs a stack it owns; the `Stack` it is given
does the breaking (zimmer_cli.scenario_stack), so this package stays on zimmer_runtime alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from zimmer_common.contracts import spot
from zimmer_common.contracts.alerts import LIST_ALERTS, AlertQuery
from zimmer_common.contracts.disk import DISK_HEALTH, DiskHealthQuery
from zimmer_common.contracts.spot_policy import GET_POLICY, PolicyQuery
from zimmer_runtime import RuntimeRequestError
from zimmer_sim.invariants import Invariants
from zimmer_sim.ledger import Restart
from zimmer_sim.profile import PROFILES, Profile
from zimmer_sim.runner import FleetRun

BATCH_GAP_SECONDS = 1.0  # restarts decided closer than this came from one ceiling sweep's batch
# How long a timeline may hold a run open past its length to finish what it planned (each kill of
# `outage` waits for the stack to come back, which takes longer on a loaded machine).
HOLD_OPEN_LIMIT_SECONDS = 300.0


class Stack(Protocol):
    owned: bool  # the scenario started it: it may kill and stop its processes

    async def run_job(self, key: str) -> None: ...  # "spot-gate.ceiling_sweep": a run now, as an operator asks
    async def signal(self, name: str, sig: int) -> None: ...  # a server (nats, postgres) or a service
    async def wait_ready(self, timeout: float) -> bool: ...
    def free_bytes(self) -> int: ...  # free space on the clones volume


@dataclass
class Context:
    run: FleetRun
    stack: Stack
    invariants: Invariants
    stop: asyncio.Event
    seconds: float  # how long the run lasts
    _holds: int = field(default=0, init=False)
    _time_up: bool = field(default=False, init=False)

    def time_up(self) -> None:
        """The run's length has passed: it ends now, or when the last hold is released."""
        self._time_up = True
        if not self._holds:
            self.stop.set()

    @property
    def past_length(self) -> bool:
        return self._time_up

    @contextlib.asynccontextmanager
    async def held_open(self) -> AsyncIterator[None]:
        """Keep the run going until the block ends, even past its length (the caller of the run bounds
        this by HOLD_OPEN_LIMIT_SECONDS): a timeline whose steps take machine-dependent time finishes
        them all instead of losing the last ones to the clock."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if self._time_up and not self._holds:
                self.stop.set()

    async def sleep(self, seconds: float) -> bool:
        """Sleep, or return False at once when the run ends first."""
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=seconds)
            return False
        except TimeoutError:
            return True


Timeline = Callable[[Context], Awaitable[None]]
Expect = Callable[[Context], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    long: Profile
    short: Profile
    minutes: float  # the long form's default length
    short_minutes: float
    healthy: bool = True  # nothing may page
    needs_owned_stack: bool = False
    timeline: Timeline | None = None
    expect: Expect | None = None
    # The environment of a stack the scenario starts, given the free bytes on its volume and
    # whether the run is the short form.
    stack_env: Callable[[int, bool], dict[str, str]] | None = None
    # Its stack's environment is set from the volume's free bytes: start the stack just before the
    # run, never ahead of it (every other writer on the volume moves them meanwhile).
    measures_free_space: bool = False


# ---- steady ---------------------------------------------------------------------------------

async def _steady_expect(ctx: Context) -> None:
    summary = ctx.run.ledger.summary()
    ctx.invariants.row("the fleet took turns and spent").check(summary["turns"] > 0 and summary["spend_requests"] > 0,
                                                                 turns=summary["turns"])


# ---- quota-crunch ---------------------------------------------------------------------------

async def _crunch_timeline(ctx: Context) -> None:
    """Fill the pool until the gate holds spot work and the ceiling sweep has paused two sessions
    (two, so that one sweep's resumes are a batch whose order can be checked; after half the run,
    two paused are enough; past its length, one), then let it drain: the fleet goes quiet, the
    window resets, and the sweep resumes the paused. The sweep runs every 5 minutes on its
    schedule; the run asks for it every 5 seconds, as an operator can (`zimmer jobs run
    spot-gate.ceiling_sweep`). When the pool filled late (a slow machine fills it slowly) the run is
    held open past its length until the cycle has shown: a sweep's batch of resumes and what follows
    it."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    quiet_by = began + ctx.seconds / 2
    async with ctx.held_open():
        while await ctx.sleep(5.0):
            await ctx.stack.run_job("spot-gate.ceiling_sweep")
            ledger = ctx.run.ledger
            restarts = ledger.restarts
            # The cycle has shown once resumes came and two of them in one sweep's batch (what the
            # precedence order is checked on); a first batch of one waits for the next, held open.
            shown = (ctx.run.fleet.quiet and restarts and loop.time() - restarts[0].received > 8.0
                     and batch_pairs(restarts) > 0)
            if shown and (ctx.seconds < 300 or ctx.past_length):
                ctx.stop.set()  # the whole cycle is in the record
                return
            paused = len(ledger.stopped_sessions)
            if ctx.past_length and not paused:
                return  # nothing was paused: there is no resume to wait for (the expectations say so)
            filled = paused >= 2 and (ledger.outcomes["held"] > 0 or loop.time() > quiet_by)
            if not ctx.run.fleet.quiet and (filled or (ctx.past_length and paused)):
                ctx.run.fleet.quiet = True
                ctx.run.ledger.counts["quiet_after_seconds"] = int(loop.time() - began)


async def _crunch_expect(ctx: Context) -> None:
    ledger, rows = ctx.run.ledger, ctx.invariants
    held_sessions = 0
    ids = sorted(ledger.sessions)[-500:]
    if ids:
        try:  # the control plane's own count: sessions it held at least once (any turn kind)
            listed = await ctx.run.client.call(spot.LIST_SESSIONS, spot.SessionQuery(ids=ids, limit=500))
            held_sessions = sum(1 for s in listed.sessions if s.spot_hold_count > 0)
        except RuntimeRequestError:
            pass
    rows.row("spot work is held as the pool nears its reserve").check(
        ledger.outcomes["held"] > 0 or held_sessions > 0, held_answers=ledger.outcomes["held"],
        held_sessions=held_sessions)
    # The fleet never stops a turn itself and nobody archives its running sessions here: every
    # stop_turn is the ceiling sweep's pause (its reason is the gate's sentence).
    rows.row("the ceiling sweep pauses running spot sessions").check(ledger.counts["stopped"] > 0,
                                                                      stop_reasons=dict(ledger.stop_reasons))
    gate = "unreadable"
    if not ledger.restarts:
        with contextlib.suppress(RuntimeRequestError):  # why nothing resumed, in the gate's own words
            gate = (await ctx.run.client.call(GET_POLICY, PolicyQuery())).decision.sentence
    rows.row("paused sessions resume after the window resets").check(
        bool(ledger.restarts), resets=sum(a.resets for a in ctx.run.accounts.accounts.values()),
        quiet_after_seconds=ledger.counts["quiet_after_seconds"], gate_now=gate if not ledger.restarts else None)
    await _resume_order(ctx)


def _one_batch(first: Restart, then: Restart) -> bool:
    """Two consecutive resumes decided by one sweep: their commands' times, not when they arrived
    (a loaded machine delivers one transaction's commands seconds apart)."""
    return abs((then.decided_at - first.decided_at).total_seconds()) <= BATCH_GAP_SECONDS


def batch_pairs(restarts: list[Restart]) -> int:
    """Consecutive resumes of one sweep's batch: the pairs the order is checked on."""
    return sum(1 for first, then in itertools.pairwise(restarts) if _one_batch(first, then))


async def _resume_order(ctx: Context) -> None:
    """Within one sweep's batch, resumes come highest precedence first (seed 004)."""
    restarts = ctx.run.ledger.restarts
    ids = sorted({r.session_id for r in restarts})[:500]
    precedence = {}
    if ids:
        try:
            listed = await ctx.run.client.call(spot.LIST_SESSIONS, spot.SessionQuery(ids=ids, limit=500))
            precedence = {s.id: s.precedence for s in listed.sessions}
        except RuntimeRequestError:
            precedence = {r.session_id: r.precedence for r in restarts}
    row = ctx.invariants.row("resumes come in precedence order")
    for first, then in itertools.pairwise(restarts):
        if _one_batch(first, then):
            a, b = first.session_id, then.session_id
            row.check(precedence.get(a, 0) >= precedence.get(b, 0), first=a, then=b,
                      precedences=(precedence.get(a), precedence.get(b)))


# ---- auth-outage ----------------------------------------------------------------------------

UNPARK_SLACK_SECONDS = 40  # two sweeps the timeline asks for, and the commands' way to the fleet


async def _auth_timeline(ctx: Context) -> None:
    """Parks come back through two sweeps (seed 003/004): priority parks through auth_unpark (every
    15 minutes), spot parks through the ceiling sweep (every 5). A short run asks for both more often."""
    while await ctx.sleep(10.0):
        await ctx.stack.run_job("spot-gate.auth_unpark")
        await ctx.stack.run_job("spot-gate.ceiling_sweep")


async def _auth_expect(ctx: Context) -> None:
    counts, accounts = ctx.run.ledger.counts, ctx.run.accounts.accounts
    ctx.invariants.row("sessions park when their account needs re-auth").check(counts["auth_parks"] > 0,
                                                                             parks=counts["auth_parks"])
    row = ctx.invariants.row("a parked session runs again once its account is back")
    row.checks += counts["auth_unparked"]
    now = datetime.now(UTC)
    try:  # a spot park comes back through the spot queue: only when the gate has room for spot work
        spot_room = (await ctx.run.client.call(GET_POLICY, PolicyQuery())).decision.allowed
    except RuntimeRequestError:
        spot_room = True
    for sid, (parked_at, name) in ctx.run.ledger.parked.items():
        account = accounts.get(name or "")
        back = account.back_at if account is not None and account.status == "active" else None
        if back is None or back <= parked_at or (now - back).total_seconds() <= UNPARK_SLACK_SECONDS:
            continue
        record = ctx.run.ledger.sessions.get(sid)
        if record is not None and record.spot_class and not spot_room:
            ctx.run.ledger.counts["spot_parks_waiting_for_room"] += 1  # the seed's rule, not a stuck park
            continue
        row.check(False, session_id=sid, account=name, back_for_seconds=round((now - back).total_seconds()),
                  spot=bool(record and record.spot_class), spot_room=spot_room)


# ---- outage ---------------------------------------------------------------------------------

OUTAGE_ORDER = ("nats-server", "postgres", "spot-gate", "sweeper", "backlog", "alerts", "gateway")


async def _outage_timeline(ctx: Context) -> None:
    """kill -9 of NATS, PostgreSQL and each service in turn; the supervisor brings each back. A
    restart's time is the machine's: the run is held open until every kill happened and the fleet
    worked one more gap on the stack that came back."""
    gap = ctx.seconds / (len(OUTAGE_ORDER) + 2)
    async with ctx.held_open():
        for name in OUTAGE_ORDER:
            if not await ctx.sleep(gap):
                return
            await ctx.stack.signal(name, signal.SIGKILL)
            ctx.run.ledger.counts[f"killed_{name}"] += 1
            await ctx.stack.wait_ready(120.0)
        await ctx.sleep(gap)


async def _outage_expect(ctx: Context) -> None:
    killed = sum(v for k, v in ctx.run.ledger.counts.items() if k.startswith("killed_"))
    ctx.invariants.row("every process was killed once and came back").check(killed == len(OUTAGE_ORDER)
                                                                            and await ctx.stack.wait_ready(120.0),
                                                                            killed=killed)


# ---- stall ----------------------------------------------------------------------------------

STALLED = "spot-gate"  # its jobs run on the default lane (recheck_due every 15 s): a stall shows at once
SHORT_CEILING_SECONDS = 30  # the short form's default-lane ceiling (ZIMMER_ALERT_LANE_CEILINGS)
SHORT_CHECK_SECONDS = 5  # and its health monitor's period
LONG_STALL_SECONDS = 17 * 60  # past the seed's 15-minute ceiling of the default lane


def _stall_env(_free: int, short: bool) -> dict[str, str]:
    if not short:
        return {}
    return {"ZIMMER_ALERT_LANE_CEILINGS": json.dumps({"default": SHORT_CEILING_SECONDS}),
            "ZIMMER_HEALTH_CHECK_SECONDS": str(SHORT_CHECK_SECONDS)}


def _stall_window(short: bool) -> float:
    """How long after the stall began a page must have come: the ceiling, then two critical checks
    in a row (CONSECUTIVE_CRITICAL_TO_ALERT), a check period of slack and a minute for the notifier."""
    ceiling, check = (SHORT_CEILING_SECONDS, SHORT_CHECK_SECONDS) if short else (15 * 60, 60)
    return ceiling + 3 * check + 60


async def _stall_timeline(ctx: Context) -> None:
    """SIGSTOP the service, wait for the page (or the window to pass), SIGCONT, wait for the page to
    resolve; then the run ends: what it set out to show is shown."""
    short = ctx.seconds < LONG_STALL_SECONDS
    window = _stall_window(short)
    loop = asyncio.get_running_loop()
    if not await ctx.sleep(15.0):  # the fleet at work before the stall
        return
    stopped_at = datetime.now(UTC)
    await ctx.stack.signal(STALLED, signal.SIGSTOP)
    paged_after, pages = None, []
    try:
        # The long form holds the stall past the seed's ceiling whatever it sees, and on until the
        # page is in (at most its window); the short one lets go once the page is in.
        held_at_least = loop.time() + (0 if short else LONG_STALL_SECONDS)
        until = loop.time() + window
        while loop.time() < until and not ctx.stop.is_set():
            if paged_after is None and (pages := await _paging(ctx, stopped_at)):
                paged_after = (datetime.now(UTC) - stopped_at).total_seconds()
            if paged_after is not None and loop.time() >= held_at_least:
                break
            await ctx.sleep(5.0)
    finally:
        await ctx.stack.signal(STALLED, signal.SIGCONT)
    counts = ctx.run.ledger.counts
    counts["stall_seconds"] = int((datetime.now(UTC) - stopped_at).total_seconds())
    if paged_after is not None:
        counts["stall_paged_after_seconds"] = int(paged_after)
    ctx.invariants.row(f"a stalled {STALLED} pages within {window:g}s").check(
        paged_after is not None and paged_after <= window, paged_after=paged_after, pages=pages)
    ctx.run.ledger.counts.update({f"page: {title}"[:120]: 1 for title in pages})
    resolved = False
    while not resolved and await ctx.sleep(5.0):
        resolved = not await _paging(ctx, stopped_at)
    resolved = resolved or not await _paging(ctx, stopped_at)
    if resolved:
        counts["stall_resolved_after_seconds"] = int((datetime.now(UTC) - stopped_at).total_seconds())
    ctx.invariants.row("the page resolves after recovery").check(resolved)
    await ctx.sleep(8.0 if short else 20.0)  # the fleet takes turns again before the run ends
    ctx.stop.set()


async def _paging(ctx: Context, since: datetime) -> list[str]:
    """The error-level conditions still true and seen after `since`: their titles."""
    try:
        alerts = await ctx.run.client.call(LIST_ALERTS, AlertQuery(level="error", limit=50))
    except RuntimeRequestError:
        return []
    return [c.title for c in alerts.conditions if c.still_true and c.level == "error" and c.last_seen >= since]


# ---- disk-pressure --------------------------------------------------------------------------

PRESSURE_ORPHANS, PRESSURE_ORPHAN_BYTES = 20, 50_000_000  # 1 GB the fleet leaves for nobody


def _pressure_env(free: int, _short: bool) -> dict[str, str]:
    """Thresholds around what the orphans take: their bytes push the volume under the low mark, and
    removing about half of them brings it back over the high one (other writers' noise fits in the
    other half)."""
    total = PRESSURE_ORPHANS * PRESSURE_ORPHAN_BYTES
    return {"ZIMMER_SWEEPER_FREE_LOW_BYTES": str(max(0, free - total * 3 // 4)),
            "ZIMMER_SWEEPER_FREE_HIGH_BYTES": str(max(0, free - total // 2)),
            "ZIMMER_SWEEPER_FREE_CHECK_SECONDS": "5"}


async def _pressure_expect(ctx: Context) -> None:
    """The sweeper's own account (disk_health, as the Health page reads it): a reclaim ran and reached
    its target, and the host is out of pressure. The volume's free bytes now are not the measure:
    every other writer on it moves them."""
    host, reclaim, pressure = None, None, None
    for _ in range(12):
        try:
            health = await ctx.run.client.call(DISK_HEALTH, DiskHealthQuery())
            host = next((h for h in health.hosts if h.host == ctx.run.config.host), None)
        except RuntimeRequestError:
            host = None
        reclaim = next((r for r in host.runs if r.job == "reclaim_space"), None) if host else None
        pressure = host.pressure if host else None
        if reclaim is not None and reclaim.finished_at is not None and pressure == "ok":
            break
        await asyncio.sleep(5.0)
    ctx.invariants.row("the sweeper reclaims the disk back above its target").check(
        reclaim is not None and reclaim.counts.get("reached", 1) != 0 and pressure == "ok",
        pressure=pressure, reclaim=reclaim.note if reclaim else None)
    gone = [p for p in ctx.run.orphans if not ctx.run.fleet.disk.exists(p)]
    ctx.invariants.row("orphaned clones are reclaimed under pressure").check(bool(gone), reclaimed=len(gone),
                                                                            left=len(ctx.run.orphans) - len(gone))


SHORT = PROFILES["short"]
DEMO = PROFILES["demo"].with_(quiet_share=0.0)  # a scenario's timeline decides when the fleet is quiet
SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    # Accounts with room for the whole run: steady is the fleet at work, not the pool running dry.
    Scenario("steady", "40 sessions of mixed classes taking turns; nothing pages",
             DEMO.with_(sessions=40, capacity_five_hour=100_000.0, capacity_seven_day=1_000_000.0),
             SHORT.with_(sessions=8, capacity_five_hour=100_000.0, capacity_seven_day=1_000_000.0),
             minutes=10, short_minutes=0.6, expect=_steady_expect),
    Scenario("quota-crunch", "the pool fills to its reserve: holds, ceiling pauses, a reset, resumes in precedence order",
             DEMO.with_(accounts=2, capacity_five_hour=8.0, five_hour_cycle_seconds=240, codex_share=0.0, p_archive=0.1,
                        precedences=(0, 50)),
             SHORT.with_(accounts=2, capacity_five_hour=2.0, five_hour_cycle_seconds=60, codex_share=0.0, p_archive=0.3,
                         p_follow_up=0.55, sessions=8, precedences=(0, 50)),
             minutes=10, short_minutes=2.5, timeline=_crunch_timeline, expect=_crunch_expect),
    Scenario("auth-outage", "accounts lose their credentials; sessions park, and run again once they are back",
             DEMO.with_(p_auth_outage=0.15), SHORT.with_(p_auth_outage=0.35, auth_outage_seconds=(5.0, 12.0)),
             minutes=10, short_minutes=0.8, timeline=_auth_timeline, expect=_auth_expect),
    Scenario("outage", "kill -9 of NATS, PostgreSQL and each service mid-run; no report lost or doubled",
             DEMO, SHORT, minutes=10, short_minutes=1.5, healthy=False, needs_owned_stack=True,
             timeline=_outage_timeline, expect=_outage_expect),
    Scenario("stall", f"SIGSTOP of {STALLED} past its lane's ceiling, then SIGCONT: a page, then its resolution",
             DEMO, SHORT, minutes=_stall_window(False) / 60 + 5, short_minutes=3.5, healthy=False, needs_owned_stack=True,
             timeline=_stall_timeline, stack_env=_stall_env),
    Scenario("disk-pressure", "the fleet's orphans fill the clones volume; the sweeper reclaims them, never a live clone",
             DEMO.with_(orphan_clones=PRESSURE_ORPHANS, orphan_bytes=PRESSURE_ORPHAN_BYTES),
             SHORT.with_(orphan_clones=PRESSURE_ORPHANS, orphan_bytes=PRESSURE_ORPHAN_BYTES),
             minutes=5, short_minutes=0.6, needs_owned_stack=True, expect=_pressure_expect, stack_env=_pressure_env,
             measures_free_space=True),
)}
