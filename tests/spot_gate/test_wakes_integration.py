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


async def pause_until(spot, sid: int, ahead: timedelta = HOUR, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await spot.bus.request(c.PAUSE_UNTIL, c.PauseUntil(session_id=sid, until=spot.clock.now() + ahead, **kw))


async def refused(spot, spec, req) -> ZimmerError:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    with pytest.raises(ZimmerError) as info:
        await spot.bus.request(spec, req)
    assert info.value.code.value == "refused", info.value
    return info.value


async def test_pause_until_stops_the_turn_sleeps_in_waiting_and_the_wake_answers_to_the_gate(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
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


async def test_the_doors_decline_a_pause_that_is_still_ahead(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
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


async def test_the_web_restart_and_a_direct_follow_up_consume_the_pause(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
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


async def test_a_new_pause_replaces_the_last_and_a_park_cancels_it(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
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


async def test_a_sleeper_nothing_will_wake_is_resumed_five_a_pass_three_times_at_most(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """#855: session 6412 sat 38.7 hours asleep on a wake that could never fire."""
    from zimmer_spot_gate.jobs.stranded_sleep import MAX_ACTIONS_PER_SWEEP, SYSTEM_RECOVERY

    await spot.readings((0.1, 0.1))
    sleepers = [await spawn(spot) for _ in range(7)]
    fresh = await spawn(spot)
    resting = await spawn(spot)
    for s in [*sleepers, fresh, resting]:
        await spot.app.report_status(SessionStatusReport(session_id=s.id, status="waiting"))
    await pause_until(spot, resting.id, ahead=timedelta(days=2), halt=False)  # a wake still ahead: resting
    quiet = spot.clock.now() - timedelta(minutes=20)
    await spot.sql("UPDATE spot_gate.sessions SET updated_at = :t WHERE id <> :f", t=quiet, f=fresh.id)
    await spot.sql("UPDATE spot_gate.sessions SET updated_at = :t WHERE id = :f", t=spot.clock.now(), f=fresh.id)
    report = await spot.app.stranded_sleep.run()
    assert len(report.resumed) == MAX_ACTIONS_PER_SWEEP and set(report.resumed) <= {s.id for s in sleepers}
    assert fresh.id not in report.resumed and resting.id not in report.resumed
    starts = [x for x in await commands(spot, "start_turn") if x["turn_kind"] == "restart"]
    assert {x["session_id"] for x in starts} == set(report.resumed) and {x["prompt"] for x in starts} == {SYSTEM_RECOVERY}
    second = await spot.app.stranded_sleep.run()
    assert len(second.resumed) == 2  # the two past the batch kept their place
    one = sleepers[0].id
    for _ in range(3):  # it keeps falling asleep: rescued three times, then it pages and is left alone
        await spot.app.report_status(SessionStatusReport(session_id=one, status="waiting"))
        await spot.sql("UPDATE spot_gate.sessions SET updated_at = :t, stranded_rescues = 3 WHERE id = :i",
                       t=quiet, i=one)
    final = await spot.app.stranded_sleep.run()
    assert final.given_up == [one] and one not in final.resumed
    [[page]] = await spot.sql("SELECT payload->'data'->>'title' FROM spot_gate.outbox "
                              "WHERE subject = 'zimmer.alerts.cmd.page' ORDER BY id DESC LIMIT 1")
    assert "nothing to wake them" in page


async def test_a_wake_just_come_due_is_still_in_flight_and_an_overdue_one_is_stranded(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    due, overdue = await spawn(spot), await spawn(spot)
    for s in (due, overdue):
        await pause_until(spot, s.id, ahead=timedelta(minutes=1), halt=False)
        await spot.app.report_status(SessionStatusReport(session_id=s.id, status="waiting"))
    await spot.sql("UPDATE spot_gate.session_wakes SET wake_at = :t WHERE session_id = :s",
                   t=spot.clock.now() - timedelta(minutes=11), s=overdue.id)
    await spot.sql("UPDATE spot_gate.session_wakes SET wake_at = :t WHERE session_id = :s",
                   t=spot.clock.now() - timedelta(minutes=2), s=due.id)
    await spot.sql("UPDATE spot_gate.sessions SET updated_at = :t", t=spot.clock.now() - timedelta(hours=1))
    report = await spot.app.stranded_sleep.run()
    assert report.resumed == [overdue.id]  # SCHEDULE_FIRE_SETTLE: the one due two minutes ago is in flight
    assert await spot.app.wakes.fire_due() == 1  # only the in-flight one fires: the rescued one's was cancelled


async def test_auth_outage_parks_two_populations_neither_starts_the_others(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn

    async def account(status: str) -> None:
        await spot.app.record_reading(QuotaReadingIn(
            account="acct-0", status=status, read_at=spot.clock.now(),
            five_hour=WindowReadingIn(utilization=0.1, resets_at=spot.clock.now() + HOUR),
            seven_day=WindowReadingIn(utilization=0.1, resets_at=spot.clock.now() + 48 * HOUR)))

    await account("needs_reauth")
    boss = await spawn(spot, genesis="web_ui")
    worker = await spawn(spot, precedence=9)
    sleeper = await spawn(spot, genesis="web_ui")
    for s in (boss, worker, sleeper):
        parked = await spot.bus.request(c.PARK_FOR_AUTH_OUTAGE, c.ParkForAuthOutage(session_id=s.id, account="acct-0"))
        assert (parked.status, parked.paused_by, parked.spot_pause_reason) == ("waiting", "auth_outage", "auth_outage")
    await spot.sql("INSERT INTO spot_gate.session_wakes (session_id, wake_at, set_by) VALUES (:s, :t, 'test')",
                   s=sleeper.id, t=spot.clock.now() + HOUR)
    assert await spot.app.parks.unpark() == []  # the account is still out
    ceiling = await spot.app.ceiling.run()
    assert ceiling.resumed == [worker.id]  # the spot park is the queue's; the priority one is not the sweep's
    await account("active")
    assert await spot.app.parks.unpark() == [boss.id]  # the wall-clock pause outranks the recovery
    assert (await session(spot, boss.id)).status == "running"
    policy = await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=sleeper.id))
    assert policy.paused_by == "auth_outage" and "auth outage" in (policy.pause_sentence or "")


@pytest.mark.parametrize("late", ["needs_input", "waiting"])
async def test_a_report_that_lands_after_the_park_keeps_it_parked_and_resumable(spot, late: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # The runtime reports the turn's end over ingest and parks over RPC: the park may land first
    # (found by `zimmer sim --scenario auth-outage`: sessions moved to needs_input, never resumed).
    from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn

    await spot.app.record_reading(QuotaReadingIn(
        account="acct-0", status="active", read_at=spot.clock.now(),
        five_hour=WindowReadingIn(utilization=0.1, resets_at=spot.clock.now() + HOUR),
        seven_day=WindowReadingIn(utilization=0.1, resets_at=spot.clock.now() + 48 * HOUR)))
    boss = await spawn(spot, genesis="web_ui")
    await spot.bus.request(c.PARK_FOR_AUTH_OUTAGE, c.ParkForAuthOutage(session_id=boss.id, account="acct-0"))
    kept = await spot.app.report_status(SessionStatusReport(session_id=boss.id, status=late))
    assert (kept.status, kept.paused_by) == ("waiting", "auth_outage")
    assert await spot.app.parks.unpark() == [boss.id]
    assert (await session(spot, boss.id)).status == "running"
