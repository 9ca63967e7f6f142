"""Wall-clock wakes (seed 004 "A pause outranks precedence", "A pause is a floor, not a promotion").

- pause_until: a person's Pause Until (the turn is stopped now) or an agent's wake_me_up_later
  (its turn ends on its own): the session sleeps in waiting with one armed one-time wake, which
  replaces any earlier one and ends a park in the spot queue ("not then, this instead").
- fire_due (every minute): a due wake delivers its prompt as a `wake` turn, and that turn answers to
  the gate like any other: a pause can keep a session out of a slot, never take one the queue
  would not give.
- restart: the door an agent or a script starts a waiting session through; it refuses a session
  paused until a time it has not reached, naming the pause (the web Restart, `consume_pause`, and a
  follow-up addressed to the session directly take the session over and consume the pause).

Every guard reads `domain.wakes` (one "is the wake due" test, the firing path's too).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from zimmer_common.contracts.runtime import STOP_TURN, StopTurn
from zimmer_common.contracts.spot import SESSION_PAUSED, PauseUntil, RestartSession, SessionEvent, SessionView, TurnResult
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.paging import PageFn, page_or_log
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain import wakes
from zimmer_spot_gate.domain.lifecycle import ENDED
from zimmer_spot_gate.domain.model import SessionStatus, TurnKind
from zimmer_spot_gate.handlers.queue_ops import CONTINUE_NUDGE
from zimmer_spot_gate.handlers.turns import TurnGate
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store import sessions as store

FIRE_BATCH = 100
WAKE_NUDGE = "Your scheduled wake-up has come: continue."


class Wakes:
    def __init__(self, units: UnitsOfWork, gate: TurnGate, now: Callable[[], datetime], page: PageFn | None = None):
        self.units = units
        self.gate = gate
        self.now = now
        self.page = page

    async def pause_until(self, req: PauseUntil) -> SessionView:
        now = self.now()
        if not wakes.paused_until(req.until, now):
            raise ZimmerError(ErrorCode.INVALID, "a pause needs a moment in the future", {"field": "until"})
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)
            row = await store.fetch_live(conn, req.session_id, "it cannot be paused")
            await store.arm_wake(conn, req.session_id, req.until, req.prompt, req.by or "a person", now)
            await store.end_pause(conn, req.session_id)  # a time picked after the queue: "not then, this instead"
            running = row.status == SessionStatus.RUNNING.value
            fields = {} if running else {"status": SessionStatus.WAITING.value}
            view = store.to_view(await store.update_fields(conn, req.session_id, **fields),
                                 (await quota.policy(conn)).overrides)
            view = view.model_copy(update={"paused_until": wakes.paused_until(view.next_wake_at, now)})
            events: list[tuple[str, str, object]] = [(SESSION_PAUSED, "session_paused", SessionEvent(
                session=view, previous={"status": row.status}, spawned_by=(row.metadata or {}).get("spawned_by")))]
            if running and req.halt:
                events.append((STOP_TURN, "stop_turn", StopTurn(session_id=req.session_id, mode="halt",
                                                                reason=f"paused until {req.until.isoformat()}")))
            await uow.emit_many(events)
        return view

    async def fire_due(self) -> int:
        """Deliver every due wake as a gated `wake` turn, one transaction each."""
        async with self.units.read() as conn:
            due = await store.due_wakes(conn, self.now(), FIRE_BATCH)
        fired = 0
        for wake in due:
            try:
                async with self.units.begin() as uow:
                    conn = uow.conn
                    await self.gate.lock_admissions(conn)
                    if not await store.mark_fired(conn, wake.id):
                        continue  # cancelled or fired by another worker meanwhile
                    row = await store.fetch(conn, wake.session_id, lock=True)
                    if SessionStatus(row.status) not in ENDED:
                        await self.gate.request_turn(conn, wake.session_id, TurnKind.WAKE,
                                                     wake.prompt or WAKE_NUDGE, [])
                fired += 1
            except Exception as exc:  # noqa: BLE001 - this wake stays armed; the next tick retries it
                await page_or_log(self.page, "Wake not fired", f"session {wake.session_id}'s due wake could not be "
                                  "fired; it stays armed and the next tick retries it", ["fire_wakes",
                                                                                          type(exc).__name__],
                                  snippet_source=exc, wake_id=wake.id, session_id=wake.session_id)
        return fired

    async def restart(self, req: RestartSession) -> TurnResult:
        now = self.now()
        async with self.units.begin() as uow:
            conn = uow.conn
            await self.gate.lock_admissions(conn)
            row = await store.fetch(conn, req.session_id, lock=True)
            ahead = wakes.paused_until(row.next_wake_at, now)
            if ahead is not None and not req.consume_pause:
                refused = ZimmerError(ErrorCode.REFUSED, wakes.refusal(req.session_id, ahead),
                                      {"session_id": req.session_id, "paused_until": ahead.isoformat()})
                await store.log_decisions(conn, [{"session_id": req.session_id, "allowed": False,
                                                  "reason": "wake_ahead", "sentence": refused.message,
                                                  "event": "restart"}], now)
            else:
                refused = None
                await store.cancel_wakes(conn, req.session_id)
                result = await self.gate.request_turn(conn, req.session_id, TurnKind.RESTART,
                                                      req.prompt or CONTINUE_NUDGE, [], event="restart")
        if refused is not None:
            raise refused  # once the decision log's row has committed
        return result
