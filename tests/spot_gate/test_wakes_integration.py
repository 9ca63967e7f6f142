"""Wall-clock wakes against real PostgreSQL and NATS with a frozen clock (seed 004 "A pause
outranks precedence", "A pause is a floor, not a promotion"): the doors that decline a session
paused until a time it has not reached, and the two that still consume the pause."""

from __future__ import annotations

from datetime import timedelta

import pytest

from test_ceiling_integration import ack_stops, commands, session, spawn
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.runtime import SessionStatusReport
from zimmer_common.errors import ZimmerError

HOUR = timedelta(hours=1)


async def pause_until(spot, sid: int, ahead: timedelta = HOUR, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]
    return await spot.bus.request(c.PAUSE_UNTIL, c.PauseUntil(session_id=sid, until=spot.clock.now() + ahead, **kw))


async def refused(spot, spec, req) -> ZimmerError:  # type: ignore[no-untyped-def]
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(spec, req)
    assert info.value.code.value == "refused", info.value
    return info.value


async def test_pause_until_stops_the_turn_sleeps_in_waiting_and_the_wake_answers_to_the_gate(spot) -> None:  # type: ignore[no-untyped-def]
    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    paused = await pause_until(spot, one.id, prompt="pick up the review", by="ops")
    assert paused.next_wake_at == spot.clock.now() + HOUR
    assert [x["mode"] for x in await commands(spot, "stop_turn")] == ["halt"]  # Pause Until does it unconditionally
    await ack_stops(spot, [one.id])
    assert (await session(spot, one.id)).status == "waiting"  # not needs_input: nobody has to act
    assert await spot.app.wakes.fire_due() == 0  # not before its moment
    spot.clock.advance(HOUR)
    await spot.readings((0.95, 0.3))  # the window is spent when the wake comes due
    assert await spot.app.wakes.fire_due() == 1
    woken = await session(spot, one.id)
    assert (woken.status, woken.spot_hold_reason, woken.held_turn_kind, woken.next_wake_at) == (
        "waiting", "at_utilization_limit", "wake", None)  # a floor, not a promotion: held like any turn
    await spot.readings((0.1, 0.1))
    spot.clock.advance(timedelta(hours=2))  # its re-check comes due: the queue starts it, prompt intact
    async with spot.service.engine.begin() as conn:
        await spot.app.gate.recheck(conn, one.id)
    starts = [x for x in await commands(spot, "start_turn") if x["turn_kind"] == "wake"]
    assert [x["prompt"] for x in starts] == ["pick up the review"]


async def test_the_doors_decline_a_pause_that_is_still_ahead(spot) -> None:  # type: ignore[no-untyped-def]
    await spot.readings((0.95, 0.3))
    held = await spawn(spot, precedence=100)  # held before its first turn
    await pause_until(spot, held.id, ahead=3 * HOUR)
    # 1. the first start (the hold's re-check) stands down, without re-arming the re-check timer
    spot.clock.advance(2 * HOUR)
    await spot.readings((0.1, 0.1))
    before = await session(spot, held.id)
    async with spot.service.engine.connect() as conn:
        from zimmer_spot_gate.store import sessions as store
        assert held.id not in await store.due_holds(conn, spot.clock.now(), 100)
        assert held.id not in await store.stranded_holds(conn, spot.clock.now() - timedelta(minutes=10), 10,
                                                         now=spot.clock.now())
    # making it priority does not start it either
    promoted = await spot.bus.request(c.UPDATE_SESSION, c.UpdateSession(session_id=held.id,
                                                                       scheduling_class="priority"))
    assert promoted.status == "waiting" and promoted.spot_hold_retry_at == before.spot_hold_retry_at
    # 4-5. restart refuses with the seed's sentence; start now too
    error = await refused(spot, c.RESTART, c.RestartSession(session_id=held.id))
    assert "paused until" in error.message and "Take the next candidate" in error.message
    await refused(spot, c.START_NOW, c.StartNow(session_id=held.id))
    # 2. the ceiling sweep skips a paused session with a wake ahead, counted held
    other = await spawn(spot, precedence=5)
    await spot.bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(session_id=other.id))
    await ack_stops(spot, [other.id])
    await spot.sql("INSERT INTO spot_gate.session_wakes (session_id, wake_at, set_by) VALUES (:s, :t, 'test')",
                   s=other.id, t=spot.clock.now() + HOUR)
    report = await spot.app.ceiling.run()
    assert other.id not in report.resumed and report.held_by_wake == 1
    # Past its moment the pause holds nothing back: an ordinary candidate again.
    spot.clock.advance(HOUR + timedelta(minutes=1))
    assert (await spot.bus.request(c.RESTART, c.RestartSession(session_id=held.id))).outcome in ("admitted", "passed")


async def test_the_web_restart_and_a_direct_follow_up_consume_the_pause(spot) -> None:  # type: ignore[no-untyped-def]
    await spot.readings((0.1, 0.1))
    one, two = await spawn(spot), await spawn(spot)
    for s in (one, two):
        await pause_until(spot, s.id, halt=False)
        await spot.app.report_status(SessionStatusReport(session_id=s.id, status="needs_input"))
    taken = await spot.bus.request(c.RESTART, c.RestartSession(session_id=one.id, consume_pause=True))
    assert taken.outcome == "admitted" and taken.session.next_wake_at is None
    direct = await spot.bus.request(c.REQUEST_TURN, c.RequestTurn(session_id=two.id, kind="follow_up", prompt="now"))
    assert direct.outcome == "admitted" and (await session(spot, two.id)).next_wake_at is None
    spot.clock.advance(2 * HOUR)
    assert await spot.app.wakes.fire_due() == 0  # nothing left armed


async def test_a_new_pause_replaces_the_last_and_a_park_cancels_it(spot) -> None:  # type: ignore[no-untyped-def]
    await spot.readings((0.1, 0.1))
    one = await spawn(spot)
    await pause_until(spot, one.id, ahead=HOUR)
    second = await pause_until(spot, one.id, ahead=2 * HOUR)
    assert second.next_wake_at == spot.clock.now() + 2 * HOUR
    [[armed]] = await spot.sql("SELECT count(*) FROM spot_gate.session_wakes WHERE session_id = :s AND "
                               "fired_at IS NULL AND cancelled_at IS NULL", s=one.id)
    assert armed == 1
    parked = await spot.bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(session_id=one.id))
    assert parked.next_wake_at is None and parked.paused_by == "spot_quota"  # "not then, this instead"
    timed = await pause_until(spot, one.id)
    assert timed.paused_by is None  # and a time picked after the queue ends the park
    with pytest.raises(ZimmerError) as past:
        await pause_until(spot, one.id, ahead=-HOUR)
    assert past.value.code.value == "invalid"
