"""The ceiling sweep against real PostgreSQL and NATS with a frozen clock (seed 004 "The budget is
a ceiling", seed 003 SpotCeilingSweepJob): 2026-08-20, when twelve sessions ran a window past its
target because admission only stopped new work, is what it prevents."""

from __future__ import annotations

import logging

import pytest

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import SessionStatusReport
from zimmer_spot_gate.jobs.ceiling import RECOVERY_NUDGE


async def spawn(spot, genesis: str = "schedule", precedence: int = 0, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    result = await spot.bus.request(c.SPAWN, c.SpawnSession(genesis=genesis, precedence=precedence, prompt="go", **kw))
    return result.session


async def session(spot, sid: int) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=sid))


async def ack_stops(spot, ids: list[int]) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """The runtime stops each process and reports the turn ended, as it does after any turn."""
    for sid in ids:
        await spot.app.report_status(SessionStatusReport(session_id=sid, status="needs_input"))


async def commands(spot, kind: str) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
    import base64
    import json

    from zimmer_common.contracts.subjects import Stream

    for _ in range(100):
        if await spot.service.relay.pending() == 0:
            break
        import asyncio
        await asyncio.sleep(0.05)
    info = await spot.bus.js_api(f"STREAM.INFO.{Stream.RUNTIME.value}")
    out = []
    if info["state"]["messages"]:
        for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
            msg = await spot.bus.js_api(f"STREAM.MSG.GET.{Stream.RUNTIME.value}", {"seq": seq})
            if "message" in msg and msg["message"]["subject"].endswith(kind):
                out.append(json.loads(base64.b64decode(msg["message"]["data"]))["data"])
    return out


async def test_at_the_limit_running_spot_work_is_paused_and_nothing_else(spot, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    spots = [await spawn(spot, precedence=n) for n in range(3)]
    priority = await spawn(spot, genesis="web_ui")
    codex = await spawn(spot, runtime="codex", harness="codex", model="gpt-5")
    fork = await spawn(spot, is_status_summary_fork=True)
    assert {(await session(spot, s.id)).status for s in [*spots, priority, codex, fork]} == {"running"}
    await spot.readings((0.95, 0.3))  # the 5-hour window is past its 80% budget
    with caplog.at_level(logging.WARNING, logger="zimmer.spot_gate.ceiling"):
        report = await spot.app.ceiling.run()
    assert report.decision.reason.value == "at_utilization_limit" and sorted(report.paused) == [s.id for s in spots]
    stops = await commands(spot, "stop_turn")
    assert sorted(x["session_id"] for x in stops) == [s.id for s in spots] and {x["mode"] for x in stops} == {"halt"}
    warned = [r for r in caplog.records if r.getMessage() == "spot sessions paused mid-run for quota headroom"]
    assert len(warned) == 1 and warned[0].__dict__["fields"]["sessions"] == [s.id for s in spots]
    paused = await session(spot, spots[0].id)
    assert (paused.paused_by, paused.spot_pause_reason, paused.spot_pause_count) == (
        "spot_quota", "at_utilization_limit", 1)
    assert paused.status == "running"  # until the runtime says the process is gone, it keeps its slot
    assert paused.pause_sentence and "Paused mid-run for quota headroom" in paused.pause_sentence
    assert "5-hour" in (paused.spot_pause_detail or "")
    for other in (priority, codex, fork):
        assert (await session(spot, other.id)).paused_by is None
    # The runtime's acknowledgement: needs_input is carried to waiting (not the action queue).
    await ack_stops(spot, [s.id for s in spots])
    assert {(await session(spot, s.id)).status for s in spots} == {"waiting"}
    policy = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    assert policy.paused == {"at_utilization_limit": 3, "user_spot_queue": 0, "auth_outage": 0}
    # Still at the limit: the next sweep pauses nothing more and resumes nothing.
    again = await spot.app.ceiling.run()
    assert (again.paused, again.resumed, again.still_paused) == ([], [], 3)


async def test_headroom_brings_them_back_in_precedence_order_five_a_sweep_against_the_margin(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.bus.request(p.SET_POLICY, p.SetPolicy(max_sessions=20))
    await spot.readings((0.1, 0.1))
    sessions = [await spawn(spot, precedence=prec) for prec in (5, 50, 5, 0, 99, 7, 1)]
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    await ack_stops(spot, [s.id for s in sessions])
    await spot.readings((0.77, 0.3))  # inside the 80% budget, not inside the 75% the resume margin asks
    report = await spot.app.ceiling.run()
    assert report.decision.allowed and report.resumed == [] and report.still_paused == 7
    await spot.readings((0.3, 0.3))
    report = await spot.app.ceiling.run()
    by_id = {s.id: s.precedence for s in sessions}
    assert [by_id[i] for i in report.resumed] == [99, 50, 7, 5, 5] and report.still_paused == 2
    assert report.resumed[3] < report.resumed[4]  # oldest pause first in a tie (paused together: then id)
    starts = [x for x in await commands(spot, "start_turn") if x["turn_kind"] == "restart"]
    assert [x["session_id"] for x in starts] == report.resumed and {x["prompt"] for x in starts} == {RECOVERY_NUDGE}
    resumed = await session(spot, report.resumed[0])
    assert (resumed.status, resumed.paused_by, resumed.spot_pause_count) == ("running", None, 1)
    report = await spot.app.ceiling.run()
    assert [by_id[i] for i in report.resumed] == [1, 0] and report.still_paused == 0  # they kept their place


async def test_never_more_than_the_free_slots_and_fleet_at_cap_pauses_nothing(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.bus.request(p.SET_POLICY, p.SetPolicy(max_sessions=3))
    await spot.readings((0.1, 0.1))
    first = [await spawn(spot) for _ in range(3)]
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    await ack_stops(spot, [s.id for s in first])
    await spot.readings((0.1, 0.1))
    busy = [await spawn(spot, genesis="web_ui") for _ in range(2)]  # priority work takes two of three slots
    report = await spot.app.ceiling.run()
    assert len(report.resumed) == 1 and report.still_paused == 2
    report = await spot.app.ceiling.run()  # the fleet is at its cap: nothing paused, nothing resumed
    assert report.decision.reason.value == "fleet_at_cap" and (report.paused, report.resumed) == ([], [])
    assert all([(await session(spot, s.id)).status == "running" for s in busy])


async def test_a_paused_session_made_priority_resumes_whatever_the_windows_say(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    report = await spot.app.ceiling.run()
    assert report.resumed == []  # not acknowledged yet: its process may still be running
    # Made priority while its turn is still being stopped: nothing can start yet; the sweep resumes it.
    promoted = await spot.bus.request(c.UPDATE_SESSION, c.UpdateSession(session_id=one.id, scheduling_class="priority"))
    assert (promoted.status, promoted.paused_by) == ("running", "spot_quota")
    await ack_stops(spot, [one.id])
    report = await spot.app.ceiling.run()
    assert report.decision.reason.value == "at_utilization_limit" and report.resumed == [one.id]
    assert (await session(spot, one.id)).status == "running"


async def test_a_direct_follow_up_goes_through_the_gate_and_ends_the_pause_when_admitted(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    await ack_stops(spot, [one.id])
    held = await spot.bus.request(c.REQUEST_TURN, c.RequestTurn(session_id=one.id, kind="follow_up", prompt="more"))
    assert held.outcome == "held" and held.session.paused_by == "spot_quota"
    await spot.readings((0.1, 0.1))
    await spot.app.ceiling.run()  # the sweep resumes it; its held follow-up waits behind the resumed turn
    now = await session(spot, one.id)
    assert (now.status, now.paused_by) == ("running", None)


@pytest.mark.parametrize("reported", ["needs_input", "waiting"])
async def test_the_stop_acknowledgement_never_delivers_a_queued_turn(spot, reported: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    queued = await spot.bus.request(c.REQUEST_TURN, c.RequestTurn(session_id=one.id, kind="follow_up", prompt="next"))
    assert queued.outcome == "queued"
    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    await spot.app.report_status(SessionStatusReport(session_id=one.id, status=reported))
    after = await session(spot, one.id)
    assert (after.status, after.enqueued_messages) == ("waiting", 1)


# ---- joining the queue on purpose, and starting a queued session now ------------------------------


async def park(spot, sid: int, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await spot.bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(session_id=sid, **kw))


async def test_a_parked_priority_session_becomes_spot_and_resumes_with_its_prompt(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    boss = await spawn(spot, genesis="web_ui", precedence=40)
    parked = await park(spot, boss.id, resume_with="Resume with: check the deploy first")
    assert (parked.priority_class, parked.precedence, parked.paused_by, parked.spot_pause_reason) == (
        "spot", 40, "spot_quota", "user_spot_queue")
    assert parked.status == "running" and not [x for x in await commands(spot, "stop_turn")]  # the turn finishes
    await ack_stops(spot, [boss.id])
    policy = await spot.bus.request(p.GET_POLICY, p.PolicyQuery())
    assert policy.paused == {"at_utilization_limit": 0, "user_spot_queue": 1, "auth_outage": 0}  # not the ceiling
    assert "Parked in the spot queue" in (await session(spot, boss.id)).pause_sentence
    report = await spot.app.ceiling.run()
    assert report.resumed == [boss.id]
    [start] = [x for x in await commands(spot, "start_turn") if x["turn_kind"] == "restart"]
    assert start["prompt"] == "Resume with: check the deploy first"


async def test_park_with_halt_stops_the_turn_and_an_ended_session_is_refused(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    from zimmer_common.errors import ZimmerError

    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    await park(spot, one.id, halt=True)
    assert [x["mode"] for x in await commands(spot, "stop_turn")] == ["halt"]
    await spot.app.report_status(SessionStatusReport(session_id=one.id, status="archived"))
    with pytest.raises(ZimmerError) as refused:
        await park(spot, one.id)
    assert refused.value.code.value == "refused"


async def test_start_now_in_its_three_cases_and_gated_for_spot_work(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.95, 0.3))
    held = await spawn(spot)  # held at the gate before its first turn
    before = await session(spot, held.id)
    assert before.spot_hold_reason == "at_utilization_limit"
    answer = await spot.bus.request(c.START_NOW, c.StartNow(session_id=held.id))
    assert answer.did == "held" and "5-hour" in answer.sentence  # not a queue jump
    after = await session(spot, held.id)
    assert (after.spot_hold_count, after.spot_hold_retry_at) == (before.spot_hold_count, before.spot_hold_retry_at)
    await spot.readings((0.1, 0.1))
    answer = await spot.bus.request(c.START_NOW, c.StartNow(session_id=held.id))
    assert answer.did == "rechecked" and answer.session.status == "running"
    [first] = [x for x in await commands(spot, "start_turn") if x["session_id"] == held.id]
    assert first["prompt"] == "go"  # prompt intact

    await spot.readings((0.95, 0.3))
    await spot.app.ceiling.run()
    await ack_stops(spot, [held.id])
    await spot.readings((0.1, 0.1))
    answer = await spot.bus.request(c.START_NOW, c.StartNow(session_id=held.id))
    assert answer.did == "resumed" and (answer.session.status, answer.session.paused_by) == ("running", None)

    await spot.app.report_status(SessionStatusReport(session_id=held.id, status="needs_input"))
    answer = await spot.bus.request(c.START_NOW, c.StartNow(session_id=held.id))
    assert answer.did == "nudged" and answer.session.status == "running"


async def test_ten_concurrent_start_nows_start_one_turn(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    import asyncio

    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    await spot.app.report_status(SessionStatusReport(session_id=one.id, status="needs_input"))
    answers = await asyncio.gather(*(spot.bus.request(c.START_NOW, c.StartNow(session_id=one.id)) for _ in range(10)))
    assert sorted(a.did for a in answers) == ["nudged"] + ["running"] * 9
    after = await session(spot, one.id)
    assert (after.status, after.enqueued_messages) == ("running", 0)  # one turn, nothing queued behind it


async def test_ten_concurrent_parks_and_sweeps_leave_one_consistent_pause(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    import asyncio

    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    results = await asyncio.gather(*(park(spot, one.id, halt=True) for _ in range(5)),
                                   *(spot.app.ceiling.run() for _ in range(5)), return_exceptions=True)
    assert not [r for r in results if isinstance(r, BaseException)], results
    now = await session(spot, one.id)
    assert (now.paused_by, now.spot_pause_reason, now.spot_pause_count) == ("spot_quota", "user_spot_queue", 5)
