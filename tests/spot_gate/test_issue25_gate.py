"""Issue 25's numbered failures of the gate itself (#1, #2, #4, #5, #6), each against real PostgreSQL
and NATS; each docstring is the seed's sentence (or DESIGN §9's) the test holds the code to."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import QuotaReadingIn, SessionStatusReport, SpendReport, WindowReadingIn
from zimmer_common.contracts.subjects import Stream
from zimmer_spot_gate.domain.model import Window
from zimmer_spot_gate.handlers.snapshot import read_pool_parts
from zimmer_spot_gate.store import quota


def spawn(**kw) -> c.SpawnSession:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return c.SpawnSession(**{"title": "t", "prompt": "go", "genesis": "api", **kw})


async def set_max(spot, n: int) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    await spot.app.policy.set(p.SetPolicy(max_sessions=n))


async def running(spot) -> int:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return (await spot.sql("SELECT count(*) AS n FROM spot_gate.sessions WHERE status = 'running'"))[0].n


async def windowless_reading(spot) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """An account read, but with no readable window: the gate has nothing to decide the quota on."""
    await spot.app.record_reading(QuotaReadingIn(account="acct-blind", status="active", read_at=spot.clock.now()))


async def test_the_cap_holds_when_there_is_no_quota_reading(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "A free slot": "Skipped only for a session that is already running when the gate
    runs." #1: with no quota reading and max_sessions 3, 50 concurrent spot spawns were all admitted
    `no_snapshot` (50 running). The fail-open rule is about the reading, not the cap."""
    await set_max(spot, 3)
    results = await asyncio.gather(*(spot.bus.request(c.SPAWN, spawn(prompt=f"work {i}")) for i in range(50)))
    outcomes = [(r.turn.outcome, r.turn.decision.reason) for r in results]
    assert outcomes.count(("admitted", "no_snapshot")) == 3
    assert outcomes.count(("held", "fleet_at_cap")) == 47
    assert await running(spot) == 3
    held = next(r for r in results if r.turn.outcome == "held")
    assert "all 3 session slots are taken" in held.turn.decision.sentence


async def test_the_ceiling_sweep_never_resumes_past_the_free_slots_when_blind(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "What brings it back": "a batch of five per sweep, and never more than the free
    slots under Max sessions at once." #1: with windowless readings and 6 of 6 slots taken, the
    sweep resumed 5 more (11 running)."""
    await set_max(spot, 6)
    for i in range(6):
        assert (await spot.app.spawn(spawn(prompt=f"run {i}"))).turn.outcome == "admitted"
    parked = [(await spot.app.spawn(spawn(start=False))).session for _ in range(5)]
    for s in parked:
        await spot.bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(session_id=s.id))
    await windowless_reading(spot)
    report = await spot.app.ceiling.run()
    assert (report.decision.reason.value, report.resumed) == ("fleet_at_cap", [])
    assert await running(spot) == 6
    # Two slots free up: the sweep resumes exactly two, in precedence order, and no more.
    for sid in (1, 2):
        await spot.app.report_status(SessionStatusReport(session_id=sid, status="archived"))
    report = await spot.app.ceiling.run()
    assert report.decision.reason.value == "no_snapshot" and len(report.resumed) == 2
    assert await running(spot) == 6


async def status_events(spot, session_id: int) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
    return [e["session"] for e in await spot.messages(Stream.EVENTS, "session_status_changed")
            if e["session"]["id"] == session_id]


async def test_a_queued_follow_up_keeps_its_slot_at_the_turn_boundary(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "The concurrency limit": "It is checked when a session starts and never again." #2:
    running sessions 51–53 with max_sessions 2, a follow-up to 51 queued, then the runtime reports
    needs_input: 51 went waiting, held fleet_at_cap, and a session_status_changed to needs_input
    was announced for a turn that never ran ("no session_needs_input event that would wake a parent
    … about a turn that never ran")."""
    await set_max(spot, 3)
    first, *_ = [(await spot.app.spawn(spawn(prompt=f"run {i}"))).session for i in range(3)]
    await set_max(spot, 2)  # lowered under a running fleet: it interrupts nothing
    queued = await spot.app.request_turn(c.RequestTurn(session_id=first.id, kind="follow_up", prompt="and then this"))
    assert queued.outcome == "queued"
    after = await spot.app.report_status(SessionStatusReport(session_id=first.id, status="needs_input"))
    assert (after.status, after.spot_hold_reason, after.enqueued_messages) == ("running", None, 0)
    prompts = [(cmd["session_id"], cmd["prompt"]) for cmd in await spot.start_turn_commands()]
    assert prompts[-1] == (first.id, "and then this")
    assert all(e["status"] != "needs_input" for e in await status_events(spot, first.id))
    assert await running(spot) == 3  # the slot was kept, not taken a second time


async def test_a_boundary_turn_is_still_gated_on_quota_and_goes_dormant_not_needs_input(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "Every turn is gated": the queued turn spends fresh quota, so the quota checks apply;
    held, "the session goes back to dormant waiting (not needs_input: nobody has to do anything
    about it)", its prompt in the gate's custody."""
    await spot.readings((0.1, 0.1))
    s = (await spot.app.spawn(spawn())).session
    await spot.app.request_turn(c.RequestTurn(session_id=s.id, kind="follow_up", prompt="more"))
    await spot.readings((0.99, 0.5))
    after = await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    assert (after.status, after.spot_hold_reason, after.held_turn_kind, after.queued_prompt_coming) == (
        "waiting", "at_utilization_limit", "follow_up", True)
    assert [e["status"] for e in await status_events(spot, s.id)] == ["running", "waiting"]  # never needs_input
    assert (await spot.sql("SELECT held_prompt FROM spot_gate.sessions WHERE id = :i", i=s.id))[0].held_prompt == "more"
    # A priority session's queued turn passes at its boundary and keeps running.
    pri = (await spot.app.spawn(spawn(genesis="web_ui"))).session
    await spot.app.request_turn(c.RequestTurn(session_id=pri.id, kind="follow_up", prompt="p2"))
    assert (await spot.app.report_status(SessionStatusReport(session_id=pri.id, status="needs_input"))).status == "running"


async def calibrated_pool(spot, *, utilization: float, resets_in_minutes: float) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    await spot.readings((utilization, 0.05), resets_in_minutes=resets_in_minutes)
    await spot.sql("INSERT INTO spot_gate.window_calibration (window_name, capacity_dollars) VALUES ('five_hour', 100), "
                   "('seven_day', 100000)")
    spot.app.gate.pool.invalidate()


async def test_the_policy_view_and_the_gate_cannot_disagree(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "MCP parity": "The page and the tool render the same decision — … of which there is
    exactly one — so the card's badge and the tool's answer cannot disagree." #4: the view said
    at_utilization_limit ("fleet would burn $5.89/min") in the same second a spawn was admitted
    within_limits: its typical candidate averaged in Codex's $10/min, which spends nothing against
    a Claude account."""
    await spot.sql("INSERT INTO spot_gate.burn_rates (harness, model, dollars_per_minute, opus_dollars_per_minute, "
                   "sessions_counted) VALUES ('claude_code', 'claude-opus-4', 1.0, 1.0, 5), ('codex', 'gpt-5', 10.0, 0, 5)")
    # $100 window, 20% reserve: $80 budget, $55 spent. One Opus session runs at $1/min; the next
    # adds $1/min: $75 projected in 10 minutes fits. With Codex's $10/min averaged in it did not.
    await calibrated_pool(spot, utilization=0.55, resets_in_minutes=5)
    assert (await spot.app.spawn(spawn(genesis="web_ui"))).turn.outcome == "passed"
    view = await spot.app.policy.get()
    admitted = await spot.app.spawn(spawn())
    assert (view.decision.reason, admitted.turn.decision.reason) == ("within_limits", "within_limits")
    assert view.decided_for is not None and view.decided_for.burn_per_minute == 1.0
    assert view.decided_for.model == admitted.session.model
    # Now the budget is spent for a second one: both say so, with the same sentence.
    view = await spot.app.policy.get()
    held = await spot.app.spawn(spawn())
    assert (view.decision.reason, held.turn.decision.reason) == ("at_utilization_limit", "at_utilization_limit")
    assert view.decision.sentence == held.turn.decision.sentence


async def test_spend_totals_keep_claude_and_codex_apart(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#4: "spend totals on Costs separate Claude and Codex too"."""
    now = spot.clock.now()
    await spot.spend(SpendReport(request_id="r1", harness="claude_code", model="claude-sonnet-4-5",
                                 output_tokens=1_000_000, at=now))
    await spot.spend(SpendReport(request_id="r2", harness="codex", model="gpt-5-codex", output_tokens=1_000_000, at=now))
    costs = await spot.app.policy.costs()
    assert (costs.spend_five_hour_claude_dollars, costs.spend_five_hour_codex_dollars) == (15.0, 10.0)
    assert costs.spend_seven_day_dollars == 25.0


async def test_one_currency_for_pacing(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """DESIGN §9 "One currency for pacing": "capacity is calibrated in Opus-priced dollars, so every
    burn rate the gate compares with it … is Opus-priced too. The Costs page and the spend ledger
    keep each model's list price, and say which is which." #5: a Sonnet fleet's burn read about 5x
    too low against capacity."""
    start = spot.clock.now()
    for i, sid in enumerate((101, 102)):
        for k in range(2):  # two ledger entries 10 minutes apart: a 10-minute session
            await spot.spend(SpendReport(request_id=f"s{sid}-{k}", session_id=sid, harness="claude_code",
                                         model="claude-sonnet-4-5", output_tokens=100_000,
                                         at=start + timedelta(minutes=10 * k + i)))
    select = "SELECT dollars_per_minute AS list, opus_dollars_per_minute AS opus FROM spot_gate.burn_rates"

    async def computed() -> bool:
        return bool(await spot.sql(select))

    await spot.run_job("burn_rate_recompute", computed)
    rows = await spot.sql(select)
    # 200k output tokens over 10 minutes a session: $3 at Sonnet's $15/M, $15 at Opus 4's $75/M.
    assert rows[0].list == 0.3 and abs(rows[0].opus - 1.5) < 1e-9
    sonnet = (await spot.app.spawn(spawn(genesis="web_ui", model="claude-sonnet-4-5"))).session
    async with spot.service.engine.connect() as conn:
        fleet = await quota.fleet(conn)
    assert (fleet.running_slots, fleet.burn_dollars_per_minute) == (1, 1.5)  # Opus-priced, as capacity is
    costs = await spot.app.policy.costs()
    [rate] = costs.burn_rates
    assert (rate.dollars_per_minute, rate.opus_dollars_per_minute, costs.currency) == (0.3, 1.5, "claude-opus-4")
    assert sonnet.model == "claude-sonnet-4-5"


async def test_the_early_burn_estimate_is_the_pools_climb(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "Before the first calibration": "only the burn-rate projection is unavailable …
    an estimate is never presented as a measurement." #6: two readings seconds apart produced
    "373.5% projected over the next 10 minutes"; the climb of the one account read twice was taken
    for the pool's (about N times too high)."""
    async def serving_account_reads(utilization: float) -> float:
        """acct-0 reads again; the pool's estimated 5-hour climb per minute as the gate now sees it."""
        await spot.app.record_reading(QuotaReadingIn(
            account="acct-0", status="active", read_at=spot.clock.now(),
            five_hour=WindowReadingIn(utilization=utilization, resets_at=spot.clock.now() + timedelta(hours=2))))
        async with spot.service.engine.connect() as conn:
            parts = await read_pool_parts(conn, spot.clock.now())
        return next(w for w in parts.windows if w.window is Window.FIVE_HOUR).observed_rate

    await spot.readings((0.40, 0.1), (0.10, 0.1), (0.10, 0.1))  # three accounts, read at t0
    spot.clock.advance(timedelta(seconds=20))
    assert await serving_account_reads(0.60) == 0.0  # 20 s apart: no estimate at all
    spot.clock.advance(timedelta(minutes=10))
    rate = await serving_account_reads(0.70)
    # acct-0 climbed 30 points in 10m20s; the pool (three accounts) climbed a third of that.
    assert abs(rate - 0.30 / 3 / (10 + 20 / 60)) < 1e-9
    await spot.app.spawn(spawn(genesis="web_ui"))  # something runs: the pace check applies
    held = await spot.app.spawn(spawn())
    assert held.turn.outcome == "held" and "estimated" in held.turn.decision.sentence
    view = await spot.app.policy.get()
    assert next(w for w in view.windows if w.window == "five_hour").fleet_burn_estimated
