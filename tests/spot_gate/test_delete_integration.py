"""Deleting a session (DELETE /api/v1/sessions/{id} is its door) on real PostgreSQL and NATS: the row
and its own history go in one transaction with `session_deleted`, a running turn is stopped, and of
any number of concurrent deletes exactly one finds the row."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from zimmer_common.contracts import clones as k
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.subjects import Stream
from zimmer_common.errors import ZimmerError

DEPENDENTS = ("enqueued_messages", "gate_decisions", "session_wakes", "session_warnings")


async def spawn(spot, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return (await spot.bus.request(c.SPAWN, c.SpawnSession(**{"genesis": "schedule", "start": False, **kw}))).session


async def delete(spot, session_id: int) -> k.SessionDeletion:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await spot.bus.request(k.DELETE_SESSION, c.SessionRef(session_id=session_id))


async def relayed(spot, stream: Stream, subject: str) -> list[dict]:  # type: ignore[type-arg]  # JSON of any shape
    """The payloads on `stream` under `subject`, once the outbox has relayed everything."""
    for _ in range(200):
        if await spot.service.relay.pending() == 0:
            break
        await asyncio.sleep(0.05)
    info = await spot.bus.js_api(f"STREAM.INFO.{stream.value}")
    out = []
    if info["state"]["messages"]:
        for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
            msg = await spot.bus.js_api(f"STREAM.MSG.GET.{stream.value}", {"seq": seq})
            if "message" in msg and msg["message"]["subject"] == subject:
                out.append(json.loads(base64.b64decode(msg["message"]["data"]))["data"])
    return out


async def counts(spot, session_id: int) -> dict[str, int]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return {t: (await spot.sql(f"SELECT count(*) AS n FROM spot_gate.{t} WHERE session_id = :i", i=session_id))[0].n
            for t in DEPENDENTS}


async def test_a_delete_takes_the_row_and_everything_that_references_it(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Deleting one (DELETE /api/v1/sessions/:id) is a different door: the row goes immediately,
    and with it the only handle anything had on those bytes."""
    await spot.readings((0.1, 0.1))
    parent = await spawn(spot, prompt="go", start=True)  # running: a gate decision logged
    child, fork = await spawn(spot, parent_session_id=parent.id), await spawn(spot, forked_from_session_id=parent.id)
    await spot.bus.request(c.REQUEST_TURN, c.RequestTurn(session_id=parent.id, kind="follow_up", prompt="queued"))
    await spot.sql("INSERT INTO spot_gate.session_wakes (session_id, wake_at, set_by) VALUES (:i, now(), 'test')",
                   i=parent.id)
    await spot.bus.request(k.RECORD_SESSION_WARNING, k.SessionWarningIn(
        session_id=parent.id, kind="clone_reap_refused", message="m", source="sweeper"))
    assert all((await counts(spot, parent.id)).values()), await counts(spot, parent.id)

    gone = await delete(spot, parent.id)
    assert (gone.session_id, gone.stopped_turn) == (parent.id, True)
    assert await counts(spot, parent.id) == dict.fromkeys(DEPENDENTS, 0)
    assert await spot.sql("SELECT 1 FROM spot_gate.sessions WHERE id = :i", i=parent.id) == []
    with pytest.raises(ZimmerError) as missing:
        await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=parent.id))
    assert missing.value.code.value == "not_found"
    kept_child = await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=child.id))
    kept_fork = await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=fork.id))
    assert (kept_child.parent_session_id, kept_fork.forked_from_session_id) == (None, None)
    assert kept_child.version > child.version  # unlinking is a change of the row like any other

    [event] = await relayed(spot, Stream.EVENTS, c.SESSION_DELETED)
    assert (event["session_id"], event["reason"]) == (parent.id, "deleted")
    assert [x["session_id"] for x in await relayed(spot, Stream.RUNTIME, "zimmer.runtime.cmd.stop_turn")] == [parent.id]


async def test_a_session_that_is_not_running_is_deleted_without_a_stop(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    waiting = await spawn(spot)
    assert (await delete(spot, waiting.id)).stopped_turn is False
    assert await relayed(spot, Stream.RUNTIME, "zimmer.runtime.cmd.stop_turn") == []


async def test_deleting_twice_or_an_unknown_id_is_not_found(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    s = await spawn(spot)
    assert (await delete(spot, s.id)).session_id == s.id
    for sid in (s.id, 999_999):
        with pytest.raises(ZimmerError) as missing:
            await delete(spot, sid)
        assert missing.value.code.value == "not_found"
        assert missing.value.details == {"session_id": sid}
    assert len(await relayed(spot, Stream.EVENTS, c.SESSION_DELETED)) == 1


async def test_ten_concurrent_deletes_one_succeeds_one_event(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1))
    s = await spawn(spot, prompt="go", start=True)
    outcomes = await asyncio.gather(*(delete(spot, s.id) for _ in range(10)), return_exceptions=True)
    won = [o for o in outcomes if isinstance(o, k.SessionDeletion)]
    lost = [o for o in outcomes if isinstance(o, ZimmerError)]
    assert len(won) == 1 and won[0].stopped_turn is True, outcomes
    assert [e.code.value for e in lost] == ["not_found"] * 9, outcomes
    assert len(await relayed(spot, Stream.EVENTS, c.SESSION_DELETED)) == 1
    assert len(await relayed(spot, Stream.RUNTIME, "zimmer.runtime.cmd.stop_turn")) == 1


async def test_a_deleted_session_is_tracked_by_nobody(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Once the row is gone there is no query left that can find the directories: the sweepers'
    questions answer that nobody owns them (and session_deleted tells them to take them)."""
    s = await spawn(spot)
    async with spot.service.engine.begin() as conn:
        from zimmer_common.unit_of_work import UnitsOfWork
        from zimmer_spot_gate.handlers.clones import Clones

        await Clones(UnitsOfWork(spot.service, "spot_gate")).record_report(
            conn, k.CloneReport(session_id=s.id, clone_path="/srv/clones/zimmer-x-1"), spot.clock.now())
    await delete(spot, s.id)
    [answer] = (await spot.bus.request(k.CLONE_OWNERSHIP,
                                       k.CloneOwnershipQuery(paths=["/srv/clones/zimmer-x-1"]))).answers
    assert answer.tracked_by == []
    exist = await spot.bus.request(k.SESSIONS_EXIST, k.SessionIdsQuery(ids=[s.id]))
    assert (exist.existing, exist.any_sessions) == ([], False)
