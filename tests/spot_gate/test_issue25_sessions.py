"""Issue 25's numbered failures around sessions (#3, #7–#14), each against real PostgreSQL and NATS;
each docstring is the seed's sentence the test holds the code to."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import SessionStatusReport, SpendReport
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.jobs import JobContext


def spawn(**kw) -> c.SpawnSession:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return c.SpawnSession(**{"title": "t", "prompt": "go", "genesis": "api", **kw})


async def decisions(spot, sid: int, **kw) -> list[c.GateDecisionRow]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return (await spot.app.decisions(c.GateDecisionQuery(session_id=sid, **kw))).decisions


@pytest.mark.parametrize("model", ["claude-opus-5", "opusplan", "default", "claude-3-opus-20240229"])
async def test_pricing_never_refuses_a_spawn(spot, model: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "Classes": priority "Starts whenever it is ready. Never consulted about quota or
    concurrency." #3: an unpriced model refused the spawn (422), even a web_ui session's."""
    priority = await spot.app.spawn(spawn(genesis="web_ui", model=model))
    assert (priority.turn.outcome, priority.session.model) == ("passed", model)
    assert (await spot.app.spawn(spawn(model=model))).turn.outcome == "admitted"


async def test_an_unknown_models_spend_is_dearest_and_costs_says_so(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#3: an unknown model is priced at the dearest known price, logged once, and shown on Costs
    as "unknown model, priced as X"; Opus 4.5 is priced at its own list price, not Opus 4's."""
    now = spot.clock.now()
    await spot.spend(SpendReport(request_id="a", harness="claude_code", model="default", output_tokens=1_000_000, at=now))
    await spot.spend(SpendReport(request_id="b", harness="claude_code", model="claude-opus-4-5-20251101",
                                 output_tokens=1_000_000, at=now))
    rows = {r.model: r.dollars for r in await spot.sql("SELECT model, dollars FROM spot_gate.spend_ledger")}
    assert rows == {"default": 75.0, "claude-opus-4-5-20251101": 25.0}
    costs = await spot.app.policy.costs()
    notes = {m.model: (m.how, m.note) for m in costs.models}
    assert notes["default"] == ("unknown", "unknown model, priced as claude-opus-4-1 (the dearest known price)")
    assert notes["claude-opus-4-5-20251101"] == ("version", "priced as claude-opus-4-5")


async def test_a_ceiling_pause_park_and_resume_write_to_the_session_log(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "What a pause does": "The session log — A warning line naming the window, what it
    ran out of, and what brings the session back." #7: the session's log was empty after the pause;
    the same for a park on auth outage and its resume."""
    await spot.readings((0.1, 0.1))
    s = (await spot.app.spawn(spawn())).session
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    [line] = await spot.log_lines(s.id)
    assert line["level"] == "warning"
    assert "5-hour window" in line["message"] and "spot budget" in line["message"]
    assert "resumes when the windows have 5 points more headroom" in line["message"]
    await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    await spot.readings((0.1, 0.1))
    await spot.app.ceiling.run()
    assert [x["message"] for x in await spot.log_lines(s.id)][-1].startswith("Resumed from the spot queue")

    parked = (await spot.app.spawn(spawn(genesis="web_ui"))).session
    await spot.bus.request(c.PARK_FOR_AUTH_OUTAGE, c.ParkForAuthOutage(session_id=parked.id, account="acct-0"))
    [park] = await spot.log_lines(parked.id)
    assert park["level"] == "warning" and "auth outage of its account (acct-0)" in park["message"]
    assert await spot.app.parks.unpark() == [parked.id]  # acct-0 reads active
    assert [x["message"] for x in await spot.log_lines(parked.id)][-1].startswith("Resumed after an auth outage")


async def test_the_decision_log_answers_why_it_was_held_at_an_instant(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """DESIGN §2: "a decision log ("why was this session held at 14:02?")". #8: ceiling pauses and
    resumes, start-now refusals and wake stand-downs were not recorded, and gate_decisions had no
    time query."""
    await spot.readings((0.1, 0.1))
    s = (await spot.app.spawn(spawn())).session
    t_admitted = spot.clock.now()
    spot.clock.advance(timedelta(minutes=5))
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()  # paused mid-run
    t_paused = spot.clock.now()
    await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    spot.clock.advance(timedelta(minutes=5))
    refused = await spot.bus.request(c.START_NOW, c.StartNow(session_id=s.id))  # still over: held, nothing changes
    assert refused.did == "held"
    spot.clock.advance(timedelta(minutes=5))
    await spot.readings((0.1, 0.1))
    await spot.app.ceiling.run()  # resumed
    log = await decisions(spot, s.id)
    assert [(d.event, d.allowed, d.reason) for d in log] == [
        ("ceiling_resume", True, "within_limits"), ("start_now", False, "at_utilization_limit"),
        ("ceiling_pause", False, "at_utilization_limit"), ("turn", True, "within_limits")]
    assert log[2].turn_kind is None and log[0].turn_kind == "restart"
    # The decision in force at an instant: the newest at or before it.
    [at_pause] = await decisions(spot, s.id, at=t_paused + timedelta(minutes=2))
    assert at_pause.event == "ceiling_pause" and "5-hour" in at_pause.sentence
    [first] = await decisions(spot, s.id, at=t_admitted)
    assert first.event == "turn" and first.allowed
    assert await decisions(spot, s.id, at=t_admitted - timedelta(seconds=1)) == []
    window = await decisions(spot, s.id, since=t_paused, until=t_paused + timedelta(minutes=6))
    assert [d.event for d in window] == ["start_now", "ceiling_pause"]
    with pytest.raises(ValueError, match="give at alone"):
        c.GateDecisionQuery(session_id=s.id, at=t_paused, since=t_admitted)


async def test_wake_stand_downs_and_wake_refusals_are_logged(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "A pause outranks precedence": the re-check "Stands down and logs why, without
    re-arming the re-check timer"; restart "Refuses with an error naming the pause"."""
    await spot.readings((0.99, 0.5))
    s = (await spot.app.spawn(spawn())).session  # held at the gate
    wake_at = spot.clock.now() + timedelta(hours=2)
    await spot.bus.request(c.PAUSE_UNTIL, c.PauseUntil(session_id=s.id, until=wake_at))
    spot.clock.advance(timedelta(minutes=15))  # the re-check is due; the wake is still ahead

    async def stood_down() -> bool:
        return any(d.event == "wake_stand_down" for d in await decisions(spot, s.id))

    await spot.run_job("recheck_due", stood_down)
    await spot.run_job("recheck_due", lambda: _true())  # a second pass records nothing more
    assert [d.event for d in await decisions(spot, s.id)].count("wake_stand_down") == 1
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(c.RESTART, c.RestartSession(session_id=s.id))
    assert info.value.code is ErrorCode.REFUSED
    with pytest.raises(ZimmerError):
        await spot.bus.request(c.START_NOW, c.StartNow(session_id=s.id))
    newest = await decisions(spot, s.id, limit=2)
    assert [(d.event, d.reason) for d in newest] == [("start_now", "wake_ahead"), ("restart", "wake_ahead")]


async def _true() -> bool:
    return True


async def test_two_re_check_passes_at_once_stand_down_once(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The schedule ticks recheck_due every 15 s, so an enqueued run (or a second replica) can
    overlap it: both passes read "no stand-down recorded yet" and both logged one. The first pass
    locks the rows it logs for; the second skips them."""
    await spot.readings((0.99, 0.5))
    s = (await spot.app.spawn(spawn())).session
    await spot.bus.request(c.PAUSE_UNTIL, c.PauseUntil(session_id=s.id, until=spot.clock.now() + timedelta(hours=2)))
    spot.clock.advance(timedelta(minutes=15))
    [recheck] = [j for j in spot.service.job_specs if j.name == "recheck_due"]

    async def progress() -> None:
        return None

    def context(n: int) -> JobContext:
        return JobContext("recheck_due", f"probe-{n}", spot.bus, spot.service.engine, spot.clock, progress)

    await asyncio.gather(*(recheck.fn(context(n)) for n in range(6)))
    assert [d.event for d in await decisions(spot, s.id, limit=50)].count("wake_stand_down") == 1


async def test_a_declared_genesis_outranks_inherited_spot(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "Genesis is inherited": "The chat bubble … carries a parent so the conversation
    threads, but a human typed the message, so it declares web_ui rather than inheriting spot from
    whatever session was on screen." #9: the child inherited spot. Lineage still gives precedence."""
    parent = (await spot.app.spawn(spawn(genesis="web_ui", scheduling_class="spot", precedence=40))).session
    child = (await spot.app.spawn(c.SpawnSession(parent_session_id=parent.id, genesis="web_ui", prompt="hi"))).session
    assert (child.genesis, child.scheduling_class, child.priority_class, child.precedence) == (
        "web_ui", None, "priority", 41)
    # Without a declared genesis the explicit class is inherited, as before.
    inherited = (await spot.app.spawn(c.SpawnSession(parent_session_id=parent.id, prompt="hi"))).session
    assert (inherited.genesis, inherited.scheduling_class) == ("web_ui", "spot")


async def test_a_fork_named_in_metadata_inherits(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004: "Forks inherit through metadata["forked_from_session_id"], the only lineage edge a
    fork has." #10: only the top-level field worked."""
    origin = (await spot.app.spawn(spawn(genesis="schedule", scheduling_class="spot", precedence=7))).session
    fork = (await spot.bus.request(c.SPAWN, c.SpawnSession(
        prompt="fork", metadata={"forked_from_session_id": origin.id}))).session
    assert (fork.forked_from_session_id, fork.genesis, fork.scheduling_class, fork.precedence) == (
        origin.id, "schedule", "spot", 8)
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(c.SPAWN, c.SpawnSession(prompt="x", metadata={"forked_from_session_id": 999}))
    assert info.value.details.get("field") == "forked_from_session_id"


async def test_start_now_on_a_session_that_never_ran_sends_its_first_prompt(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004's Start now table; #11: promote / start now on a session that never ran sent
    "Continue." instead of its first turn. One that ran and has nothing scheduled gets nothing from
    a promote, and the continue nudge from Start now."""
    never = (await spot.app.spawn(spawn(prompt="the real first prompt", start=False))).session
    done = await spot.bus.request(c.START_NOW, c.StartNow(session_id=never.id))
    assert (done.did, done.session.status) == ("started", "running")
    assert (await spot.start_turn_commands())[-1]["prompt"] == "the real first prompt"
    promoted = (await spot.app.spawn(spawn(prompt="promote me", start=False))).session
    view = await spot.bus.request(c.UPDATE_SESSION, c.UpdateSession(session_id=promoted.id, scheduling_class="priority"))
    assert view.status == "running" and (await spot.start_turn_commands())[-1]["prompt"] == "promote me"

    ran = (await spot.app.spawn(spawn())).session
    await spot.app.report_status(SessionStatusReport(session_id=ran.id, status="needs_input"))
    before = len(await spot.start_turn_commands())
    view = await spot.bus.request(c.UPDATE_SESSION, c.UpdateSession(session_id=ran.id, scheduling_class="priority"))
    assert view.status == "needs_input" and len(await spot.start_turn_commands()) == before  # nothing from a promote
    nudged = await spot.bus.request(c.START_NOW, c.StartNow(session_id=ran.id))
    assert nudged.did == "nudged" and (await spot.start_turn_commands())[-1]["prompt"] == "Continue."


@pytest.mark.parametrize("how", ["ceiling", "parked", "held"])
async def test_making_a_paused_session_priority_starts_it_now(spot, how: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 004 "MCP parity": start now happens "as a side effect of change_scheduling_class to
    priority". #12: a paused or parked session made priority waited for the next sweep."""
    await spot.readings((0.95 if how == "held" else 0.1, 0.1))
    s = (await spot.app.spawn(spawn())).session
    if how == "ceiling":
        await spot.readings((0.95, 0.3))
        await spot.app.ceiling.run()
    elif how == "parked":
        await spot.bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(session_id=s.id, halt=True))
    if how != "held":
        await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))  # the stop acknowledged
    view = await spot.bus.request(c.UPDATE_SESSION, c.UpdateSession(session_id=s.id, scheduling_class="priority"))
    assert (view.status, view.paused_by, view.priority_class) == ("running", None, "priority")
    assert (await decisions(spot, s.id, limit=1))[0].event == "promote"


async def test_pause_until_answers_with_the_pause(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#13: `POST …/pause_until` answered `paused_until: null`."""
    s = (await spot.app.spawn(spawn(genesis="web_ui"))).session
    until = spot.clock.now() + timedelta(hours=1)
    view = await spot.bus.request(c.PAUSE_UNTIL, c.PauseUntil(session_id=s.id, until=until))
    assert view.paused_until == until and view.next_wake_at == until


async def test_a_replayed_keyed_spawn_returns_its_first_answer_whole(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#14: the first answer was `turn.outcome: admitted`; the same request with the same key
    answered with `turn: null` (a client whose answer was lost in a gateway kill got exactly this)."""
    first = await spot.bus.request(c.SPAWN, spawn(idempotency_key="k-14"))
    assert first.turn is not None and first.turn.outcome == "admitted"
    await spot.app.report_status(SessionStatusReport(session_id=first.session.id, status="needs_input"))
    again = await spot.bus.request(c.SPAWN, spawn(idempotency_key="k-14"))
    assert again == first
    assert len(await spot.start_turn_commands()) == 1  # nothing started twice
    policy = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    assert policy.running_slots == 0
