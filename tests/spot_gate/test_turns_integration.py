"""Every turn is gated, against real PostgreSQL and NATS (seed 004)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from zimmer_common.contracts import spot as c
from zimmer_common.contracts.runtime import SessionStatusReport
from zimmer_spot_gate.service import build


def spawn(**kw) -> c.SpawnSession:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return c.SpawnSession(**{"title": "t", "prompt": "Please implement this", **kw})


async def climb_the_ladder(spot, s: c.SessionView, rechecks: int) -> tuple[c.SessionView, list[float]]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """Let the clock reach each re-check and run it; the minutes to each next re-check."""
    delays = [(s.spot_hold_retry_at - spot.clock.now()) / timedelta(minutes=1)]
    for _ in range(rechecks):
        spot.clock.set(s.spot_hold_retry_at)
        async with spot.service.engine.begin() as conn:
            await spot.app.gate.recheck(conn, s.id)
        now = spot.clock.now()
        s = await spot.app.get(c.SessionRef(session_id=s.id))
        delays.append((s.spot_hold_retry_at - now) / timedelta(minutes=1))
    return s, delays


async def test_fail_open_with_no_readings_admits_and_commands_the_runtime(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    result = await spot.app.spawn(spawn(genesis="api"))
    assert result.turn.outcome == "admitted" and result.turn.decision.reason == "no_snapshot"
    assert result.session.status == "running" and result.session.priority_class == "spot"
    commands = await spot.start_turn_commands()
    assert [(cmd["session_id"], cmd["turn_kind"], cmd["prompt"]) for cmd in commands] == [
        (result.session.id, "first_start", "Please implement this")]


async def test_spawn_is_idempotent_under_concurrent_retries(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    results = await asyncio.gather(*(
        spot.bus.request(c.SPAWN, spawn(idempotency_key="backlog:item-7", start=False)) for _ in range(8)))
    assert len({r.session.id for r in results}) == 1
    assert len({r.model_dump_json() for r in results}) == 1  # every retry gets the first answer, whole
    rows = await spot.sql("SELECT count(*) AS n FROM spot_gate.sessions")
    assert rows[0].n == 1


async def test_held_session_is_admitted_by_its_recheck_after_readings_fall(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.95, 0.5), (0.97, 0.5))
    held = await spot.app.spawn(spawn(genesis="github_issue", prompt="fix #1", metadata={"spawned_by": "work-backlog"}))
    assert held.turn.outcome == "held" and held.turn.decision.reason == "at_utilization_limit"
    s = held.session
    assert (s.status, s.spot_hold_reason, s.spot_hold_count, s.queued_prompt_coming) == (
        "waiting", "at_utilization_limit", 1, True)
    assert s.spot_hold_retry_at == spot.clock.now() + timedelta(minutes=10)
    assert await spot.start_turn_commands() == []

    # Nothing is due yet: a re-check pass leaves it alone.
    await spot.service.runner.enqueue("recheck_due")
    await asyncio.sleep(0.5)
    assert (await spot.app.get(c.SessionRef(session_id=s.id))).status == "waiting"

    spot.clock.advance(timedelta(minutes=11))
    await spot.readings((0.10, 0.2), (0.12, 0.2))
    await spot.service.runner.enqueue("recheck_due")
    for _ in range(100):
        after = await spot.app.get(c.SessionRef(session_id=s.id))
        if after.status == "running":
            break
        await asyncio.sleep(0.05)
    assert (after.status, after.spot_hold_reason, after.spot_hold_count, after.queued_prompt_coming) == (
        "running", None, 0, False)
    assert [(cmd["prompt"], cmd["turn_kind"]) for cmd in await spot.start_turn_commands()] == [("fix #1", "first_start")]
    log = await spot.app.decisions(c.GateDecisionQuery(session_id=s.id))
    assert [(d.allowed, d.reason) for d in log.decisions] == [(True, "within_limits"), (False, "at_utilization_limit")]
    assert log.decisions[1].numbers["windows"][0]["utilization"] > 0.9


async def test_custody_and_a_second_refused_turn_is_queued(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.99, 0.5))
    first = await spot.app.spawn(spawn(genesis="schedule", prompt="first"))
    hold_before = (first.session.spot_hold_retry_at, first.session.spot_hold_count)
    second = await spot.app.request_turn(c.RequestTurn(session_id=first.session.id, kind="follow_up", prompt="second",
                                                       attachments=[{"name": "a.png"}]))
    assert second.outcome == "queued"
    s = second.session
    assert (s.spot_hold_retry_at, s.spot_hold_count) == hold_before  # the hold record is left alone
    assert s.enqueued_messages == 1 and s.held_turn_kind == "first_start"
    rows = await spot.sql("SELECT held_prompt FROM spot_gate.sessions WHERE id = :i", i=s.id)
    assert rows[0].held_prompt == "first"  # custody of the first prompt, not overwritten


async def test_priority_is_never_held_and_codex_takes_no_slot(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.99, 0.99))
    await spot.sql("UPDATE spot_gate.spot_policy SET max_sessions = 1")
    web = await spot.app.spawn(spawn(genesis="web_ui"))
    assert (web.turn.outcome, web.turn.exempt_because, web.session.status) == ("passed", "priority", "running")
    codex = await spot.app.spawn(spawn(genesis="api", runtime="codex", harness="codex", model="gpt-5"))
    assert (codex.turn.outcome, codex.turn.exempt_because) == ("passed", "codex")
    # The one slot is the priority session's (priority counts toward the cap); codex takes none.
    await spot.sql("DELETE FROM spot_gate.quota_readings")
    await spot.sql("UPDATE spot_gate.spot_policy SET max_sessions = 2")
    spot_session = await spot.app.spawn(spawn(genesis="api"))
    assert spot_session.turn.outcome == "admitted"


async def test_fleet_at_cap_holds_on_the_shorter_ladder(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.10, 0.10))
    await spot.sql("UPDATE spot_gate.spot_policy SET max_sessions = 1")
    await spot.app.spawn(spawn(genesis="web_ui"))  # priority: starts anyway, and takes the slot
    s = (await spot.app.spawn(spawn(genesis="api"))).session
    assert (s.status, s.spot_hold_reason) == ("waiting", "fleet_at_cap")
    s, delays = await climb_the_ladder(spot, s, rechecks=3)
    assert delays == [10, 20, 30, 30]


async def test_ladder_sequence_and_restart_resets_it(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # The 5-hour window resets past the climb (10 + 20 + 40 + 60 + 60 minutes): a reset inside it
    # would roll the window over and count it as 0 (issue 8 #5).
    await spot.readings((0.99, 0.5), resets_in_minutes=299)
    s = (await spot.app.spawn(spawn(genesis="api"))).session
    s, delays = await climb_the_ladder(spot, s, rechecks=4)
    assert delays == [10, 20, 40, 60, 60]
    assert s.spot_hold_count == 5
    # A person restarts it: the ladder resets, the gate still decides, and it is held again at 10 minutes.
    restarted = await spot.app.request_turn(c.RequestTurn(session_id=s.id, kind="restart"))
    assert restarted.outcome == "held" and restarted.session.spot_hold_count == 1
    assert restarted.session.spot_hold_retry_at - spot.clock.now() == timedelta(minutes=10)
    assert restarted.session.held_turn_kind == "first_start"  # the turn in custody is still the one it carries
    with_prompt = await spot.app.request_turn(c.RequestTurn(session_id=s.id, kind="restart", prompt="and this"))
    assert with_prompt.outcome == "held" and with_prompt.session.enqueued_messages == 1  # its prompt waits, not lost
    # Once readings fall, a restart is admitted and starts the held turn.
    await spot.readings((0.1, 0.1))
    admitted = await spot.app.request_turn(c.RequestTurn(session_id=s.id, kind="restart"))
    assert (admitted.outcome, admitted.session.status, admitted.session.spot_hold_count) == ("admitted", "running", 0)


async def test_recheck_survives_a_service_restart(spot, settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.99, 0.5))
    s = (await spot.app.spawn(spawn(genesis="api", prompt="durable"))).session
    await spot.service.stop()
    spot.clock.advance(timedelta(minutes=15))
    again = build(settings_factory(), clock=spot.clock)
    await again.start()
    try:
        again.app.gate.jitter = lambda: 0.0
        again.app.gate.pool.ttl = 0.0
        await again.app.record_reading(__import__("zimmer_common.contracts.runtime", fromlist=["x"]).QuotaReadingIn(
            account="acct-0", status="active", read_at=spot.clock.now(),
            five_hour={"utilization": 0.1}, seven_day={"utilization": 0.1}))
        await again.runner.enqueue("recheck_due")
        for _ in range(100):
            view = await again.app.get(c.SessionRef(session_id=s.id))
            if view.status == "running":
                break
            await asyncio.sleep(0.05)
        assert view.status == "running" and view.spot_hold_reason is None
    finally:
        await again.stop()
        await spot.service.start()  # the fixture stops it again


async def test_repair_sweep_puts_a_stranded_hold_back_on_the_ladder(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.99, 0.5))
    s = (await spot.app.spawn(spawn(genesis="api"))).session
    await spot.sql("UPDATE spot_gate.sessions SET spot_hold_retry_at = NULL WHERE id = :i", i=s.id)
    await spot.service.runner.enqueue("hold_repair")
    for _ in range(100):
        rows = await spot.sql("SELECT spot_hold_retry_at FROM spot_gate.sessions WHERE id = :i", i=s.id)
        if rows[0].spot_hold_retry_at is not None:
            break
        await asyncio.sleep(0.05)
    retry = rows[0].spot_hold_retry_at
    assert spot.clock.now() <= retry <= spot.clock.now() + timedelta(minutes=3)


async def test_status_from_the_runtime_and_the_queued_prompt_at_the_turn_boundary(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    s = (await spot.app.spawn(spawn(genesis="api"))).session  # admitted: no readings
    await spot.sql("INSERT INTO spot_gate.enqueued_messages (session_id, turn_kind, prompt) VALUES (:i, 'follow_up', 'next')",
                   i=s.id)
    view = await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    assert view.status == "running" and view.enqueued_messages == 0  # delivered, gated, admitted
    assert [cmd["prompt"] for cmd in await spot.start_turn_commands()][-1] == "next"


async def test_concurrent_admissions_across_replicas_never_exceed_the_cap(spot, settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The slot check is exact under concurrency: batches are decided under one advisory lock."""
    await spot.readings((0.05, 0.05))
    await spot.sql("UPDATE spot_gate.spot_policy SET max_sessions = 5")
    sessions = [(await spot.app.spawn(spawn(genesis="api", start=False))).session.id for _ in range(24)]
    replica = build(settings_factory(), clock=spot.clock)
    await replica.start()
    try:
        replica.app.gate.pool.ttl = 0.0
        results = await asyncio.gather(*(
            spot.bus.request(c.REQUEST_TURN, c.RequestTurn(session_id=sid, kind="first_start")) for sid in sessions))
    finally:
        await replica.stop()
    outcomes = sorted(r.outcome for r in results)
    assert outcomes.count("admitted") == 5 and outcomes.count("held") == 19
    assert {r.decision.reason for r in results if r.outcome == "held"} == {"fleet_at_cap"}
    rows = await spot.sql("SELECT count(*) AS n FROM spot_gate.sessions WHERE status = 'running'")
    assert rows[0].n == 5
