"""Policy, genesis classes, triggers, costs and the quota jobs against real PostgreSQL + NATS."""

from __future__ import annotations

from datetime import timedelta

import pytest

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import SpendReport
from zimmer_common.errors import ErrorCode, ZimmerError


async def test_policy_before_calibration_speaks_in_fractions(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    view = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    assert view.windows == [] and view.decision.reason == "no_snapshot" and view.unblock.state == "no_readings"
    await spot.readings((0.5, 0.3), (0.7, 0.3))
    view = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    five = next(w for w in view.windows if w.window == "five_hour")
    assert (five.calibrated, five.capacity_dollars, five.spot_budget_left_dollars) == (False, None, None)
    assert five.utilization == pytest.approx(0.6) and five.accounts_averaged == 2
    assert five.spot_budget_left_fraction == pytest.approx(0.8 - 0.6)
    assert view.decision.reason == "within_limits" and view.unblock.state == "not_blocked"


async def test_policy_after_calibration_speaks_in_dollars(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.5, 0.25))
    for i in range(3):
        await spot.spend(SpendReport(request_id=f"r{i}", session_id=None, harness="claude_code",
                                                      model="claude-opus-4", output_tokens=1_000_000,
                                                      at=spot.clock.now() - timedelta(minutes=30)))

    async def calibrated() -> bool:
        rows = await spot.sql("SELECT count(*) AS n FROM spot_gate.window_calibration")
        return rows[0].n == 2

    await spot.run_job("quota_calibration", calibrated)
    view = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    five = next(w for w in view.windows if w.window == "five_hour")
    # $225 spent at 50% utilization → the 5-hour window is worth $450; 20% reserved.
    assert five.calibrated and five.capacity_dollars == pytest.approx(450)
    assert five.reserve_dollars == pytest.approx(90) and five.spot_budget_left_dollars == pytest.approx(360 - 225)


async def test_set_gating_and_bad_input_names_the_field(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    view = await spot.bus.request(p.SET_POLICY, p.SetPolicy(gating_enabled=False, reserve_five_hour_percent=35,
                                                            max_sessions=4))
    assert (view.gating_enabled, view.max_sessions) == (False, 4)
    reply = await spot.bus.nc.request(p.SET_POLICY.subject, b'{"reserve_seven_day_percent": 140}', timeout=5)
    assert b'"invalid"' in reply.data and b"reserve_seven_day_percent" in reply.data
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(p.SET_POLICY, p.SetPolicy())
    assert info.value.code is ErrorCode.INVALID
    again = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    assert (again.gating_enabled, again.max_sessions) == (False, 4)  # the refused call wrote nothing


async def test_promoting_a_genesis_moves_existing_deriving_sessions(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    derived = (await spot.app.spawn(c.SpawnSession(genesis="api", start=False))).session
    chose = (await spot.app.spawn(c.SpawnSession(genesis="api", scheduling_class="spot", start=False))).session
    await spot.bus.request(p.GENESIS_ACTION, p.GenesisAction(action="promote_genesis", genesis="api"))
    assert (await spot.app.get(c.SessionRef(session_id=derived.id))).priority_class == "priority"
    assert (await spot.app.get(c.SessionRef(session_id=chose.id))).priority_class == "spot"
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(p.GENESIS_ACTION, p.GenesisAction(action="promote_genesis", genesis="slack"))
    assert info.value.code is ErrorCode.INVALID and "trigger" in info.value.message
    view = await spot.bus.request(p.GENESIS_ACTION, p.GenesisAction(action="reset_genesis_classes"))
    assert {g.genesis: g.effective for g in view.genesis_classes}["api"] == "spot"
    listing = await spot.app.search(c.SessionQuery(priority_class="spot"))
    assert {s.id for s in listing.sessions} == {derived.id, chose.id}


async def test_trigger_class_is_stamped_once_at_fire(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    t = await spot.bus.request(p.CREATE_TRIGGER, p.CreateTrigger(kind="schedule", name="nightly", precedence=5,
                                                                 prompt="sweep"))
    fired = await spot.bus.request(p.FIRE_TRIGGER, p.FireTrigger(trigger_id=t.id))
    s1 = fired.session
    assert (s1.genesis, s1.scheduling_class, s1.priority_class, s1.precedence, s1.trigger_id) == (
        "schedule", None, "spot", 5, t.id)
    await spot.bus.request(p.UPDATE_TRIGGER, p.UpdateTrigger(trigger_id=t.id, scheduling_class="priority"))
    s2 = (await spot.bus.request(p.FIRE_TRIGGER, p.FireTrigger(trigger_id=t.id))).session
    assert (s2.scheduling_class, s2.priority_class) == ("priority", "priority")
    assert (await spot.app.get(c.SessionRef(session_id=s1.id))).priority_class == "spot"  # not moved
    by_hand = (await spot.bus.request(p.INVOKE_TRIGGER, p.FireTrigger(trigger_id=t.id))).session
    assert by_hand.genesis == "api"
    found = await spot.bus.request(p.SEARCH_TRIGGERS, p.TriggerQuery(name_contains="nigh"))
    assert [x.id for x in found.triggers] == [t.id]
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(p.FIRE_TRIGGER, p.FireTrigger(trigger_id=999))
    assert info.value.code is ErrorCode.NOT_FOUND


async def test_spend_ledger_is_idempotent_and_feeds_burn_rates(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    s = (await spot.app.spawn(c.SpawnSession(genesis="api", start=False))).session
    now = spot.clock.now()
    for i, minutes in enumerate((0, 10)):
        report = SpendReport(request_id=f"req-{i}", session_id=s.id, harness="claude_code", model="claude-opus-4",
                             output_tokens=100_000, at=now - timedelta(minutes=20 - minutes))
        assert await spot.spend(report) is True
        assert await spot.spend(report) is False  # the same request_id again

    async def computed() -> bool:
        return bool((await spot.bus.request(p.GET_COSTS, p.CostsQuery())).burn_rates)

    await spot.run_job("burn_rate_recompute", computed)
    costs = await spot.bus.request(p.GET_COSTS, p.CostsQuery())
    [rate] = costs.burn_rates
    assert (rate.harness, rate.model, rate.sessions_counted) == ("claude_code", "claude-opus-4", 1)
    assert rate.dollars_per_minute == pytest.approx(15.0 / 10)  # $7.50 × 2 over 10 active minutes
    assert costs.spend_five_hour_dollars == pytest.approx(15.0)


async def test_usage_sampler_asks_for_the_serving_and_stale_accounts(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    import nats

    await spot.readings((0.1, 0.1), (0.1, 0.1), (0.1, 0.1), (0.1, 0.1))
    await spot.sql("UPDATE spot_gate.accounts SET serving = (account = 'acct-0')")
    await spot.sql("UPDATE spot_gate.quota_readings SET read_at = read_at - interval '2 hours' WHERE account <> 'acct-3'")
    nc = await nats.connect(spot.service.settings.nats_url)
    sub = await nc.subscribe("zimmer.runtime.cmd.sample_quota")
    try:
        await spot.service.runner.enqueue("usage_sampler")
        msg = await sub.next_msg(timeout=10)
        import json

        assert json.loads(msg.data)["data"]["accounts"] == ["acct-0", "acct-1", "acct-2"]
    finally:
        await nc.close()


async def test_metrics_carry_every_number_of_the_policy_view(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.95, 0.3))
    await spot.app.spawn(c.SpawnSession(genesis="api"))  # held: at_utilization_limit
    await spot.app.spawn(c.SpawnSession(genesis="web_ui"))  # priority: running, never consulted
    spot.app.metrics.observe(await spot.app.policy.get())  # what the 15-second refresh does
    sample = spot.service.metrics.registry.get_sample_value
    assert sample("zimmer_spot_decisions_total", {"reason": "at_utilization_limit"}) == 1
    assert sample("zimmer_spot_held_sessions", {"reason": "at_utilization_limit"}) == 1
    assert sample("zimmer_spot_running_sessions", {"class": "priority"}) == 1
    assert sample("zimmer_spot_pool_utilization", {"window": "five_hour"}) == pytest.approx(0.95)
    assert sample("zimmer_spot_budget_left_fraction", {"window": "five_hour"}) == pytest.approx(0.8 - 0.95)
    assert sample("zimmer_spot_budget_left_dollars", {"window": "five_hour"}) is None  # not calibrated: no $0.00
    assert sample("zimmer_spot_sustainable_rate", {"window": "seven_day"}) > 0
    assert sample("zimmer_spot_gate_allowed") == 0 and sample("zimmer_spot_max_sessions") == 10
