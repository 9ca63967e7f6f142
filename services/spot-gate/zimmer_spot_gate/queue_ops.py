"""Two operations on the spot queue (seed 004 "Joining the queue on purpose", "Starting a queued
session now"), each one transaction under the admission lock.

- pause_into_spot_queue: the same dormancy the ceiling sweep leaves, reached on purpose: the same
  record and resume path, with `spot_pause_reason: user_spot_queue` (left out of the "paused
  mid-run" count), a priority session made spot (the sweep would otherwise resume it at once), the
  "Resume with" prompt on the session, and the turn stopped now only with `halt`.
- start_now: held → its re-check pulled forward; paused → the pause's own resume; neither → the
  continue nudge. It stays gated for spot sessions, so it is not a queue jump: when the gate would
  hold, nothing changes (the hold record included) and the answer says why.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_common.contracts.runtime import STOP_TURN, StopTurn
from zimmer_common.contracts.spot import (
    SESSION_PAUSED, PauseIntoSpotQueue, SessionEvent, SessionView, StartNow, StartNowResult, TurnResult)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outbox import emit_many
from zimmer_spot_gate.ceiling import SPOT_QUOTA, read_gate, resume
from zimmer_spot_gate.domain.classes import resolve_class
from zimmer_spot_gate.domain.gate import Candidate
from zimmer_spot_gate.domain.wakes import paused_until
from zimmer_spot_gate.domain.wakes import refusal as wake_refusal
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, SessionStatus, TurnKind
from zimmer_spot_gate.store import sessions as store
from zimmer_spot_gate.store.tables import sessions as s
from zimmer_spot_gate.turns import SCHEMA, TurnGate, exemption

CONTINUE_NUDGE = "Continue."


class QueueOps:
    def __init__(self, engine: Callable[[], AsyncEngine], gate: TurnGate, now: Callable[[], datetime],
                 kick: Callable[[], None] = lambda: None):
        self._engine = engine
        self.gate = gate
        self.now = now
        self._kick = kick

    async def pause_into_spot_queue(self, req: PauseIntoSpotQueue) -> SessionView:
        async with self._engine().begin() as conn:
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
            await emit_many(conn, SCHEMA, events)  # type: ignore[arg-type]
        self._kick()
        return view

    async def start_now(self, req: StartNow) -> StartNowResult:
        async with self._engine().begin() as conn:
            g = await read_gate(self.gate, conn)
            row = await store.fetch_live(conn, req.session_id, "it takes no more turns")
            ahead = paused_until(row.next_wake_at, self.now())
            if ahead is not None:  # its wake is its next event and carries its own prompt
                raise ZimmerError(ErrorCode.REFUSED, wake_refusal(req.session_id, ahead),
                                  {"session_id": req.session_id, "paused_until": ahead.isoformat()})
            held, paused = row.spot_hold_reason is not None, row.paused_by is not None
            if row.status == SessionStatus.RUNNING.value and not paused:  # a repeated click starts nothing twice
                return StartNowResult(did="running", sentence="It is running: there is nothing to start.",
                                      session=store.to_view(row, g.policy.overrides))
            gated = exemption(dict(row._mapping), g.policy.overrides) is None
            if (held or paused) and gated:
                if not g.readable:
                    raise ZimmerError(ErrorCode.REFUSED, "the spot queue cannot be read now, so nothing is started "
                                      "ahead of it; try again shortly", {"session_id": req.session_id})
                decision = g.decide(Candidate(g.burn.get((row.harness, row.model), 0.0)), g.fleet, 0.0)
                if not decision.allowed:  # nothing changes, the hold record included
                    return StartNowResult(did="held", sentence=decision.sentence,
                                          session=store.to_view(row, g.policy.overrides))
            if paused and row.status == SessionStatus.RUNNING.value:
                raise ZimmerError(ErrorCode.REFUSED, f"session {req.session_id} is being stopped for its pause; start "
                                  "it now once the runtime has reported the turn over", {"status": row.status})
            if held:
                out = await self.gate.recheck(conn, req.session_id, force=True)
                did, sentence = "rechecked", "Its held turn was re-checked now, prompt intact."
            elif paused:
                [out] = await resume(self.gate, conn, [req.session_id], {req.session_id: row.resume_prompt})
                did, sentence = "resumed", "Its pause was resumed now."
            else:
                out = await self.gate.request_turn(conn, req.session_id, TurnKind.FOLLOW_UP, CONTINUE_NUDGE, [])
                did, sentence = "nudged", "It was sent the continue nudge."
            if isinstance(out, ZimmerError):
                raise out
            turn = out if isinstance(out, TurnResult) else None
            if turn is not None and turn.outcome == "held":
                did, sentence = "held", turn.decision.sentence if turn.decision else "The gate holds it."
            if turn is not None and turn.outcome == "queued":
                sentence = "A turn is in flight: the continue nudge waits behind it."
            view = turn.session if turn is not None else store.to_view(await store.fetch(conn, req.session_id),
                                                                       g.policy.overrides)
        self._kick()
        return StartNowResult(did=did, sentence=sentence, session=view, turn=turn)  # type: ignore[arg-type]



