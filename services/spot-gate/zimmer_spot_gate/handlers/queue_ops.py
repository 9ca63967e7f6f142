"""Two operations on the spot queue (seed 004 "Joining the queue on purpose", "Starting a queued
session now"), each one transaction under the admission lock.

- pause_into_spot_queue: the same dormancy the ceiling sweep leaves, reached on purpose: the same
  record and resume path, with `spot_pause_reason: user_spot_queue` (left out of the "paused
  mid-run" count), a priority session made spot (the sweep would otherwise resume it at once), the
  "Resume with" prompt on the session, and the turn stopped now only with `halt`.
- start_now: held → its re-check pulled forward; paused → the pause's own resume; never ran → its
  first turn with its first prompt; ran and idle → the continue nudge. It stays gated for spot
  sessions, so it is not a queue jump: when the gate would hold, nothing changes (the hold record
  included) and the answer says why. A promote to priority does the same (`start_in`), except that
  a session that ran and has nothing scheduled gets nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from zimmer_common.contracts.runtime import STOP_TURN, StopTurn
from zimmer_common.contracts.spot import (
    SESSION_PAUSED,
    PauseIntoSpotQueue,
    SessionEvent,
    SessionView,
    StartNow,
    StartNowResult,
    TurnResult,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitOfWork, UnitsOfWork
from zimmer_spot_gate.domain.classes import resolve_class
from zimmer_spot_gate.domain.gate import Candidate
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, SessionStatus, TurnKind
from zimmer_spot_gate.domain.wakes import paused_until
from zimmer_spot_gate.domain.wakes import refusal as wake_refusal
from zimmer_spot_gate.handlers.turns import TurnGate, exemption
from zimmer_spot_gate.jobs.ceiling import SPOT_QUOTA, GateReading, decision_row, read_gate, resume
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.store.tables import sessions as s

CONTINUE_NUDGE = "Continue."


class QueueOps:
    def __init__(self, units: UnitsOfWork, gate: TurnGate, now: Callable[[], datetime]):
        self.units = units
        self.gate = gate
        self.now = now

    async def pause_into_spot_queue(self, req: PauseIntoSpotQueue) -> SessionView:
        async with self.units.begin() as uow:
            conn = uow.conn
            g = await read_gate(self.gate, conn)
            row = await store.fetch_live(conn, req.session_id, "it cannot be parked")
            own = SchedulingClass(row.scheduling_class) if row.scheduling_class else None
            fields: dict[str, object] = dict(
                paused_by=SPOT_QUOTA, spot_pause_at=self.now(), spot_pause_reason="user_spot_queue",
                spot_pause_detail=f"Parked in the spot queue by {req.by or 'a person'}.",
                spot_pause_count=s.c.spot_pause_count + 1,
                # What was held or said next is what it resumes with, unless the caller says otherwise.
                resume_prompt=req.resume_with or row.held_prompt or row.resume_prompt,
                spot_hold_reason=None, spot_hold_retry_at=None, held_turn_kind=None, held_prompt=None,
                held_attachments=None)
            if resolve_class(own, Genesis(row.genesis), g.policy.overrides) is SchedulingClass.PRIORITY:
                fields["scheduling_class"] = SchedulingClass.SPOT.value  # "Make this session priority" reverses it
            running = row.status == SessionStatus.RUNNING.value
            if running:
                fields["spot_pause_acked_at"] = None  # until the runtime reports the turn over
            else:
                fields.update(status=SessionStatus.WAITING.value, spot_pause_acked_at=self.now())
            await store.cancel_wakes(conn, req.session_id)  # "not then, this instead"
            updated = await store.update_fields(conn, req.session_id, **fields)
            view = store.to_view(updated, g.policy.overrides)
            events: list[tuple[str, str, object]] = [(SESSION_PAUSED, "session_paused", SessionEvent(
                session=view, previous={"status": row.status, "paused_by": row.paused_by},
                spawned_by=(row.metadata or {}).get("spawned_by")))]
            if running and req.halt:
                events.append((STOP_TURN, "stop_turn", StopTurn(session_id=req.session_id, mode="halt",
                                                                reason="parked in the spot queue")))
            await uow.emit_many(events)
        return view

    async def start_now(self, req: StartNow) -> StartNowResult:
        async with self.units.begin() as uow:
            g = await read_gate(self.gate, uow.conn)
            row = await store.fetch_live(uow.conn, req.session_id, "it takes no more turns")
            done = await start_in(self.gate, uow, row, self.now(), g.policy.overrides, reading=g)
        if isinstance(done, ZimmerError):
            raise done  # a refusal the decision log keeps: raised once its row has committed
        return done


async def start_in(gate: TurnGate, uow: UnitOfWork, row: Any, now: datetime, overrides: Any, *,
                   reading: GateReading | None = None) -> StartNowResult | ZimmerError:
    """Start a dormant session now, in the caller's unit of work (under the admission lock, the
    session's row locked): seed 004's Start now table. With `reading` it is Start now (a spot
    session is asked again, still gated, so it is no queue jump; a refusal is raised or recorded);
    without, a promote to priority, which starts what it can and otherwise does nothing.

    held       its held turn is re-checked now, prompt intact (one turn, never a second)
    paused     the pause's own resume (the "Resume with" prompt, or the recovery nudge)
    never ran  its first turn, with its stored first prompt
    ran, idle  Start now sends the continue nudge; a promote sends nothing
    """
    conn, sid = uow.conn, row.id
    promote = reading is None
    event = "promote" if promote else "start_now"
    ahead = paused_until(row.next_wake_at, now)
    if ahead is not None:  # its wake is its next event and carries its own prompt
        if promote:
            return _nothing(row, overrides, f"Nothing started: it is paused until {ahead.isoformat()}.")
        await store.log_decisions(conn, [{"session_id": sid, "allowed": False, "reason": "wake_ahead",
                                          "sentence": wake_refusal(sid, ahead), "event": event}], now)
        return ZimmerError(ErrorCode.REFUSED, wake_refusal(sid, ahead), {"session_id": sid,
                                                                        "paused_until": ahead.isoformat()})
    held, paused = row.spot_hold_reason is not None, row.paused_by is not None
    running = row.status == SessionStatus.RUNNING.value
    if running and not paused:  # a repeated click starts nothing twice
        return StartNowResult(did="running", sentence="It is running: there is nothing to start.",
                              session=store.to_view(row, overrides))
    if reading is not None and (held or paused) and exemption(dict(row._mapping), overrides) is None:
        if not reading.readable:
            raise ZimmerError(ErrorCode.REFUSED, "the spot queue cannot be read now, so nothing is started "
                              "ahead of it; try again shortly", {"session_id": sid})
        decision = reading.decide(Candidate(reading.inputs.burn_of(row.harness, row.model)), reading.fleet)
        if not decision.allowed:  # nothing changes, the hold record included; the log says why
            await store.log_decisions(conn, [decision_row(sid, event, decision)], now)
            return StartNowResult(did="held", sentence=decision.sentence, session=store.to_view(row, overrides))
    if paused and running:
        if promote:
            return _nothing(row, overrides, "Nothing started yet: its turn is being stopped for its pause; the next "
                            "sweep resumes it.")
        raise ZimmerError(ErrorCode.REFUSED, f"session {sid} is being stopped for its pause; start it now once the "
                          "runtime has reported the turn over", {"status": row.status})
    if held:
        out = await gate.recheck(conn, sid, force=True, event=event)
        did, sentence = "rechecked", "Its held turn was re-checked now, prompt intact."
    elif paused:
        [out] = await resume(gate, uow, [sid], {sid: row.resume_prompt}, event=event, at=now)
        did, sentence = "resumed", "Its pause was resumed now."
    elif not row.ever_started:
        out = await gate.request_turn(conn, sid, TurnKind.FIRST_START, row.prompt, [], event=event)
        did, sentence = "started", "Its first turn was asked for now, with its first prompt."
    elif promote:
        return _nothing(row, overrides, "Nothing to start: it has run and has nothing scheduled.")
    else:
        out = await gate.request_turn(conn, sid, TurnKind.FOLLOW_UP, CONTINUE_NUDGE, [], event=event)
        did, sentence = "nudged", "It was sent the continue nudge."
    if isinstance(out, ZimmerError):
        raise out
    turn = out if isinstance(out, TurnResult) else None
    if turn is not None and turn.outcome == "held":
        did, sentence = "held", turn.decision.sentence if turn.decision else "The gate holds it."
    if turn is not None and turn.outcome == "queued":
        sentence = "A turn is in flight: the continue nudge waits behind it."
    view = turn.session if turn is not None else store.to_view(await store.fetch(conn, sid), overrides)
    return StartNowResult(did=did, sentence=sentence, session=view, turn=turn)  # type: ignore[arg-type]  # pydantic validates the string into the literal


def _nothing(row: Any, overrides: Any, sentence: str) -> StartNowResult:
    return StartNowResult(did="nothing", sentence=sentence, session=store.to_view(row, overrides))
