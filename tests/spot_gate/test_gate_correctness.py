"""Issue 8's numbered failures, each against real PostgreSQL and NATS; each test's docstring is
the seed's paragraph (or the issue's finding) it holds the code to."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import SessionStatusReport, SpendReport
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_spot_gate.domain.gate import Policy, Snapshot, decide
from zimmer_spot_gate.domain.model import AccountReading, AccountStatus, Window, WindowReading
from zimmer_spot_gate.domain.pool import pooled_windows
from zimmer_spot_gate.handlers.snapshot import read_pool_parts
from zimmer_spot_gate.store import quota


def spawn(**kw) -> c.SpawnSession:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return c.SpawnSession(**{"title": "t", "prompt": "go", "genesis": "api", **kw})


async def set_max(spot, n: int) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    await spot.app.policy.set(p.SetPolicy(max_sessions=n))


async def test_concurrent_spawns_hold_the_cap_exactly_and_never_fail_open(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#1. Seed 004 "The concurrency limit" and "Fail-open": 50 spawns at once against 7 slots
    admit exactly 7 and hold 43 on fleet_at_cap, every one answered; the gate never admits on
    its own congestion (`unavailable` is for unreadable inputs only)."""
    await spot.readings((0.1, 0.1))
    await set_max(spot, 7)
    results = await asyncio.gather(*(spot.bus.request(c.SPAWN, spawn(title=f"s{i}")) for i in range(50)))
    outcomes = [r.turn.outcome for r in results]
    assert outcomes.count("admitted") == 7 and outcomes.count("held") == 43
    assert {r.turn.decision.reason for r in results if r.turn.outcome == "held"} == {"fleet_at_cap"}
    rows = await spot.sql("SELECT reason, count(*) AS n FROM spot_gate.gate_decisions GROUP BY reason")
    assert {r.reason: r.n for r in rows} == {"within_limits": 7, "fleet_at_cap": 43}
    running = await spot.sql("SELECT count(*) AS n FROM spot_gate.sessions WHERE status = 'running'")
    assert running[0].n == 7


async def test_a_turn_for_a_running_session_waits_for_its_turn_boundary(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#2. Seed 004 "Every turn is gated": a second turn for a session with a turn in flight goes
    into enqueued_messages and is delivered at the next turn boundary; it never sends the
    runtime a second start_turn, and never flips the running session to waiting."""
    s = (await spot.app.spawn(spawn(genesis="web_ui", prompt="first"))).session  # priority: runs at once
    assert s.status == "running"
    more = await spot.app.request_turn(c.RequestTurn(session_id=s.id, kind="follow_up", prompt="second"))
    assert (more.outcome, more.session.status, more.session.enqueued_messages) == ("queued", "running", 1)
    assert [cmd["prompt"] for cmd in await spot.start_turn_commands()] == ["first"]
    after = await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    assert (after.status, after.enqueued_messages) == ("running", 0)
    assert [cmd["prompt"] for cmd in await spot.start_turn_commands()] == ["first", "second"]


async def test_the_freed_slot_goes_to_the_higher_precedence(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#3. Seed 004 "Precedence decides who gets the headroom back": two fleet_at_cap holds, one
    slot frees; the re-check pass admits precedence 1000 over precedence 0 (created first)."""
    await spot.readings((0.1, 0.1), resets_in_minutes=299)
    await set_max(spot, 1)
    busy = (await spot.app.spawn(spawn(genesis="web_ui"))).session  # priority takes the one slot
    low = (await spot.app.spawn(spawn(precedence=0))).session
    high = (await spot.app.spawn(spawn(precedence=1000))).session
    assert low.spot_hold_reason == high.spot_hold_reason == "fleet_at_cap"
    await spot.app.report_status(SessionStatusReport(session_id=busy.id, status="archived"))
    spot.clock.advance(timedelta(minutes=15))
    await spot.service.runner.enqueue("recheck_due")
    for _ in range(200):
        got = await spot.app.get(c.SessionRef(session_id=high.id))
        if got.status == "running":
            break
        await asyncio.sleep(0.05)
    assert got.status == "running"
    assert (await spot.app.get(c.SessionRef(session_id=low.id))).spot_hold_reason == "fleet_at_cap"


async def test_calibration_prices_claude_spend_since_the_window_started_at_opus(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#4. Seed 003 QuotaCapacityCalibrationJob and DESIGN §9 "Calibration": a window's capacity is
    Claude spend since that window started (its reset minus its length), every model's tokens at
    Opus list prices, ÷ the pool's average utilization. Codex spend, and spend from before the
    window started, are outside it."""
    now = spot.clock.now()
    await spot.readings((0.5, 0.5), resets_in_minutes=120)  # the 5-hour window started 3 hours ago
    for rid, model, harness, at in (("in", "claude-sonnet-4", "claude_code", now - timedelta(hours=1)),
                                    ("codex", "gpt-5-codex", "codex", now - timedelta(hours=1)),
                                    ("before", "claude-opus-4", "claude_code", now - timedelta(hours=4))):
        await spot.spend(SpendReport(request_id=rid, harness=harness, model=model, output_tokens=1_000_000, at=at))
    await spot.service.runner.enqueue("quota_calibration")
    rows = []
    for _ in range(200):
        rows = await spot.sql("SELECT window_name, capacity_dollars FROM spot_gate.window_calibration")
        if any(r.window_name == "five_hour" for r in rows):
            break
        await asyncio.sleep(0.05)
    five = next(r.capacity_dollars for r in rows if r.window_name == "five_hour")
    assert five == pytest.approx(75.0 / 0.5)  # 1M Sonnet output tokens priced as Opus ($75), ÷ 50%


def test_a_window_past_its_reset_counts_as_zero_until_read_again() -> None:
    """#5. Seed 004 "When the pool comes back": a past reset describes a window that has already
    rolled over. Its stale utilization must not keep spot work held until the next sample."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    stale = AccountReading("a", AccountStatus.ACTIVE, now - timedelta(hours=1),
                           {Window.FIVE_HOUR: WindowReading(0.99, now - timedelta(minutes=1)),
                            Window.SEVEN_DAY: WindowReading(0.3, now + timedelta(days=2))})
    fresh = AccountReading("b", AccountStatus.ACTIVE, now, {Window.FIVE_HOUR: WindowReading(0.4, now + timedelta(hours=1))})
    pooled = pooled_windows([stale, fresh], now)
    assert pooled[Window.FIVE_HOUR].utilization == pytest.approx(0.2)  # (0 + 0.4) / 2
    assert pooled[Window.FIVE_HOUR].accounts_rolled_over == 1
    from zimmer_spot_gate.domain.gate import Candidate, FleetState, WindowState

    w = pooled[Window.FIVE_HOUR]
    d = decide(Snapshot(Policy(), (WindowState(Window.FIVE_HOUR, w.utilization, 60, None, 0.0, w.accounts_rolled_over),),
                        FleetState(0, 0.0), Candidate(), 2, 2))
    assert d.allowed and "1 whose window reset since its last reading counted as 0" in d.sentence


async def test_status_reports_follow_the_lifecycle(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#6. An ended session takes no status and no class change (409 naming its status); a
    session the gate holds is not started by a report."""
    s = (await spot.app.spawn(spawn(genesis="web_ui"))).session
    await spot.app.report_status(SessionStatusReport(session_id=s.id, status="archived"))
    with pytest.raises(ZimmerError) as info:
        await spot.app.report_status(SessionStatusReport(session_id=s.id, status="running"))
    assert info.value.code is ErrorCode.REFUSED and info.value.details["status"] == "archived"
    with pytest.raises(ZimmerError) as info:
        await spot.app.update(c.UpdateSession(session_id=s.id, scheduling_class="spot"))
    assert info.value.code is ErrorCode.REFUSED and "archived" in info.value.message
    assert (await spot.sql("SELECT count(*) AS n FROM spot_gate.sessions WHERE status = 'running'"))[0].n == 0

    await spot.readings((0.99, 0.5))
    held = (await spot.app.spawn(spawn())).session
    with pytest.raises(ZimmerError) as info:
        await spot.app.report_status(SessionStatusReport(session_id=held.id, status="running"))
    assert info.value.code is ErrorCode.REFUSED and "holds" in info.value.message
    same = await spot.app.report_status(SessionStatusReport(session_id=held.id, status="waiting"))
    assert same.status == "waiting"  # the status it has: nothing changes


async def test_codex_and_forks_stay_outside_the_fleet(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#8. Codex spends nothing against a Claude window and status-summary forks are bookkeeping:
    neither takes a slot, adds to the fleet's burn, or keeps the idle-fleet waiver from applying."""
    await spot.sql("INSERT INTO spot_gate.burn_rates (harness, model, dollars_per_minute, sessions_counted) "
                   "VALUES ('claude_code', 'claude-opus-4', 5.0, 3)")
    codex = (await spot.app.spawn(spawn(runtime="codex", harness="codex", model="gpt-5-codex"))).session
    fork = (await spot.app.spawn(spawn(genesis="web_ui", is_status_summary_fork=True))).session
    assert codex.status == fork.status == "running"
    async with spot.service.engine.connect() as conn:
        fleet = await quota.fleet(conn)
    assert (fleet.running_slots, fleet.burn_dollars_per_minute) == (0, 0.0)


async def test_session_events_carry_a_version_from_the_database(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#9. Every change bumps the session's version in the same UPDATE; consumers order by it,
    never by timestamps from two clocks (this service's clock is frozen here)."""
    s = (await spot.app.spawn(spawn(genesis="web_ui"))).session
    a = await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    b = await spot.app.report_status(SessionStatusReport(session_id=s.id, status="archived"))
    assert s.version < a.version < b.version
    assert b.updated_at != spot.clock.now()  # the row's own clock, not the frozen service clock


async def test_the_pool_cache_is_refilled_only_after_a_reading_commits(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#10. Invalidating before the commit lets a concurrent admission re-cache the old readings."""
    spec = next(cs for cs, _ in spot.service._consumer_specs if cs.durable == "spot_gate_quota_readings")
    assert spec.after_commit == spot.app.gate.pool.invalidate
    async with spot.service.engine.connect() as conn:
        parts = await read_pool_parts(conn, spot.clock.now())
    assert parts.windows == ()


async def test_a_pool_read_failure_is_not_a_second_connection(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#1, the cause: the admission reads the pool on its own connection (a savepoint), so a batch
    holds one connection however large; with the pool at 1 connection spawns still succeed."""
    engine = spot.service.engine
    pool_size = engine.pool.size()
    await spot.readings((0.1, 0.1))
    await set_max(spot, 3)
    spot.app.gate.pool.ttl = 0.0  # every batch reads the pool
    results = await asyncio.gather(*(spot.app.spawn(spawn(title=f"c{i}")) for i in range(3 * pool_size)))
    assert sum(r.turn.outcome == "admitted" for r in results) == 3
    reasons = await spot.sql("SELECT DISTINCT reason FROM spot_gate.gate_decisions")
    assert "unavailable" not in {r.reason for r in reasons}
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1
