"""Precedence operations against real PostgreSQL and NATS (seed 004 "The Ranked view"): a drop
between neighbours, the nudge, demote to the top of the spot queue, "Run as spot" spawns."""

from __future__ import annotations

import pytest

from zimmer_common.contracts import spot as c
from zimmer_common.errors import ZimmerError


async def spawn(spot, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return (await spot.bus.request(c.SPAWN, c.SpawnSession(start=False, **{"genesis": "schedule", **kw}))).session


async def reorder(spot, sid: int, above: int | None, below: int | None) -> c.ReorderResult:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await spot.bus.request(c.REORDER, c.ReorderSession(session_id=sid, above_session_id=above,
                                                              below_session_id=below))


async def test_a_drop_takes_the_midpoint_or_nudges_its_neighbours(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    a, b, c_, moved = [await spawn(spot, precedence=p) for p in (30, 20, 21, 0)]
    first = await reorder(spot, moved.id, a.id, b.id)
    assert first.session.precedence == 25 and first.nudged == []
    second = await reorder(spot, moved.id, c_.id, b.id)  # 21 and 20: no midpoint
    assert second.session.precedence == 20
    assert sorted((v.id, v.precedence) for v in second.nudged) == sorted([(c_.id, 22), (b.id, 19)])
    top = await reorder(spot, moved.id, None, a.id)
    assert top.session.precedence == 35
    ordered = await spot.bus.request(c.LIST_SESSIONS, c.SessionQuery(priority_class="spot", order="precedence"))
    assert [s.id for s in ordered.sessions] == [moved.id, a.id, c_.id, b.id]


async def test_a_drop_refuses_a_missing_or_ended_neighbour_and_moves_nothing(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    from zimmer_common.contracts.runtime import SessionStatusReport

    a, b, moved = [await spawn(spot, precedence=p) for p in (21, 20, 0)]
    with pytest.raises(ZimmerError) as missing:
        await reorder(spot, moved.id, a.id, 999_999)
    assert missing.value.code.value == "not_found"
    await spot.app.report_status(SessionStatusReport(session_id=b.id, status="archived"))
    with pytest.raises(ZimmerError) as ended:
        await reorder(spot, moved.id, a.id, b.id)  # the nudge would move an ended session
    assert ended.value.code.value == "refused"
    assert (await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=a.id))).precedence == 21
    assert (await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=moved.id))).precedence == 0
    reply = await spot.bus.nc.request(c.REORDER.subject, f'{{"session_id": {moved.id}}}'.encode(), timeout=5)
    assert b'"invalid"' in reply.data  # no neighbour at all


async def test_demote_and_run_as_spot_land_above_the_top_of_the_spot_queue(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spawn(spot, precedence=100)
    await spawn(spot, precedence=40)
    boss = await spawn(spot, genesis="web_ui", precedence=7)
    demoted = await spot.bus.request(c.UPDATE_SESSION, c.UpdateSession(
        session_id=boss.id, scheduling_class="spot", place="top_of_spot"))
    assert (demoted.priority_class, demoted.precedence) == ("spot", 105)
    run_as_spot = await spawn(spot, genesis="web_ui", scheduling_class="spot", precedence_above_top_spot=True)
    assert run_as_spot.precedence == 110
    web_spot = await spawn(spot, genesis="web_ui", scheduling_class="spot")  # a web-UI spot submission
    assert web_spot.precedence == 115
    child = await spawn(spot, genesis="web_ui", scheduling_class="spot", parent_session_id=boss.id)
    assert child.precedence == 106  # a child lands just above its parent
    reply = await spot.bus.nc.request(c.UPDATE_SESSION.subject, f'{{"session_id": {boss.id}, "scheduling_class": '
                                      f'"priority", "place": "top_of_spot"}}'.encode(), timeout=5)
    assert b'"invalid"' in reply.data


async def test_archive_stops_and_ends_and_unarchive_brings_it_back(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    from test_ceiling_integration import commands

    await spot.readings((0.1, 0.1))
    running = (await spot.bus.request(c.SPAWN, c.SpawnSession(genesis="schedule", prompt="go"))).session
    never = await spawn(spot)
    trashed = await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=running.id))
    assert (trashed.status, trashed.archived_at is not None) == ("archived", True)
    assert [x["session_id"] for x in await commands(spot, "stop_turn")] == [running.id]
    again = await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=running.id))
    assert again.version == trashed.version  # nothing changed
    with pytest.raises(ZimmerError) as ended:
        await spot.bus.request(c.REQUEST_TURN, c.RequestTurn(session_id=running.id, kind="follow_up", prompt="x"))
    assert ended.value.code.value == "refused"
    back = await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=running.id))
    assert (back.status, back.archived_at) == ("needs_input", None)
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=never.id))
    assert (await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=never.id))).status == "waiting"
    with pytest.raises(ZimmerError) as not_archived:
        await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=never.id))
    assert not_archived.value.code.value == "refused"
    subjects = [r[0] for r in await spot.sql("SELECT subject FROM spot_gate.outbox ORDER BY id")]
    assert subjects.count(c.SESSION_ARCHIVED) == 2
    assert subjects.count(c.SESSION_UNARCHIVED) == 2


async def test_a_runtime_that_archives_a_session_archives_it_as_the_trash_does(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 003 "A deleted session takes its directories with it": archiving runs the session
    through the trash pipeline, however the archive came. The runtime's own `archived` report
    writes what the Trash writes (when, from which status) and announces session_archived, so
    the sweeper reaps its clone on time; unarchive then puts it back as it was."""
    from zimmer_common.contracts.runtime import SessionStatusReport

    session = await spawn(spot)
    archived = await spot.app.report_status(SessionStatusReport(session_id=session.id, status="archived"))
    assert (archived.status, archived.archived_at is not None) == ("archived", True)
    subjects = [r[0] for r in await spot.sql(
        f"SELECT subject FROM spot_gate.outbox WHERE payload->'data'->'session'->>'id' = '{session.id}' ORDER BY id")]
    assert subjects.count(c.SESSION_ARCHIVED) == 1 and subjects.count(c.SESSION_STATUS_CHANGED) >= 1
    back = await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=session.id))
    assert back.status == "waiting"  # where it was
