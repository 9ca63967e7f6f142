"""Issue 32 #7: the Ranked view's Trash → Undo restores exactly what the Trash took. Archiving
drops a hold or a pause (an ended session waits for nothing); the undo brought a held session back
`waiting` with no hold, no held turn and its prompt gone, so nothing ever started it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import SessionStatusReport
from zimmer_spot_gate.handlers.trash import NOTHING_WAITED_FOR

WAITS = ", ".join(NOTHING_WAITED_FOR)


async def waits(spot, session_id: int) -> dict:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    rows = await spot.sql(f"SELECT status, {WAITS} FROM spot_gate.sessions WHERE id = {int(session_id)}")
    return dict(rows[0]._mapping)


async def test_undo_of_a_trashed_held_session_brings_back_its_hold_and_its_turn_which_then_starts(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await spot.readings((0.1, 0.1), resets_in_minutes=299)
    await spot.app.policy.set(p.SetPolicy(max_sessions=1))
    busy = (await spot.app.spawn(c.SpawnSession(title="t", prompt="busy", genesis="web_ui"))).session
    held = (await spot.app.spawn(c.SpawnSession(title="t", prompt="the held prompt", genesis="api"))).session
    assert (held.status, held.spot_hold_reason, held.held_turn_kind) == ("waiting", "fleet_at_cap", "first_start")
    before = await waits(spot, held.id)
    assert before["held_prompt"] == "the held prompt"

    trashed = await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=held.id))
    assert (trashed.status, trashed.spot_hold_reason) == ("archived", None)  # an ended session waits for nothing
    back = await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=held.id))
    assert await waits(spot, held.id) == before  # exactly what the Trash took
    assert (back.status, back.spot_hold_reason, back.held_turn_kind) == ("waiting", "fleet_at_cap", "first_start")

    # And the hold works as any other: the slot frees, the re-check starts it with its prompt.
    await spot.app.report_status(SessionStatusReport(session_id=busy.id, status="archived"))
    spot.clock.advance(timedelta(minutes=15))
    await spot.service.runner.enqueue("recheck_due")
    for _ in range(200):
        if (await spot.app.get(c.SessionRef(session_id=held.id))).status == "running":
            break
        await asyncio.sleep(0.05)
    assert (await spot.app.get(c.SessionRef(session_id=held.id))).status == "running"
    assert "the held prompt" in [cmd["prompt"] for cmd in await spot.start_turn_commands()]


async def test_undo_restores_a_ceiling_pause_and_trashing_twice_keeps_the_first_record(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A paused session (the ceiling sweep's pause, recorded on the row) comes back paused, so the
    sweep resumes it in its turn; an archive of an archived session changes nothing, so what the
    undo restores is still what the first Trash took."""
    session = (await spot.app.spawn(c.SpawnSession(title="t", prompt="go", genesis="api", start=False))).session
    await spot.sql(f"UPDATE spot_gate.sessions SET paused_by = 'spot_quota', spot_pause_at = now() - interval '3 minutes', "
                   f"spot_pause_reason = 'at_utilization_limit', spot_pause_detail = 'the 5-hour window is at 81%', "
                   f"held_turn_kind = 'follow_up', held_prompt = 'carry on' WHERE id = {session.id}")
    before = await waits(spot, session.id)
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=session.id))
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=session.id))
    await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=session.id))
    assert await waits(spot, session.id) == before
    # Nothing of it stays behind on the row once restored: a second trash and undo start afresh.
    leftover = await spot.sql(f"SELECT archived_waits FROM spot_gate.sessions WHERE id = {session.id}")
    assert leftover[0][0] is None
