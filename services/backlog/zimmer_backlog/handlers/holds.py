"""WorkBacklog::Hold (seed 000 "Held for a human decision"): the one operation behind MCP
hold_work_backlog_item_for_decision, POST /api/v1/work_backlog_items/{id}/hold and the Issues
page's Hold form. It stamps the reason, who and when, and the verdict the hold was placed against;
it is not a removal and changes no status. The hold lapses after HOLD_DURATION on its own clock."""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import aliased

from zimmer_backlog.domain.liveness import HOLD_DURATION, HoldCandidate, hold_refusal
from zimmer_backlog.store import queue
from zimmer_backlog.store.tables import items
from zimmer_common.clock import Clock
from zimmer_common.contracts.backlog import ITEM_HELD, HoldItem, ItemEvent, ItemView
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitsOfWork

_newer = aliased(items)
NEWER_ROW = (select(func.min(_newer.c.id)).where(_newer.c.key == items.c.key, _newer.c.id > items.c.id)
             .scalar_subquery())


class Holds:
    def __init__(self, units: UnitsOfWork, clock: Clock):
        self._units = units
        self.clock = clock

    async def hold(self, req: HoldItem) -> ItemView:
        now = self.clock.now()
        async with self._units.begin() as uow:
            conn = uow.conn
            row = (await conn.execute(
                select(items.c.status, items.c.liveness_state, items.c.liveness_checked_at, items.c.held_until,
                       queue.CLAIMED.label("claimed"), NEWER_ROW.label("newer_row")).select_from(queue.WITH_SESSION)
                .where(items.c.id == req.item_id).with_for_update(of=items))).first()
            if row is None:
                raise ZimmerError(ErrorCode.NOT_FOUND, f"work backlog item {req.item_id} does not exist",
                                  {"item_id": req.item_id})
            refused = hold_refusal(HoldCandidate(row.status, bool(row.claimed), row.liveness_state, row.held_until,
                                                 row.newer_row, row.liveness_checked_at), now)
            if refused is not None:
                code, why = refused
                raise ZimmerError(ErrorCode.REFUSED, f"item {req.item_id} cannot be held: {why}",
                                  {"item_id": req.item_id, "refusal": code.value})
            by = req.by or (f"session {req.acting_session_id}" if req.acting_session_id else "unknown")
            await conn.execute(update(items).where(items.c.id == req.item_id).values(
                held_at=now, held_until=now + HOLD_DURATION, held_by=by, held_by_session_id=req.acting_session_id,
                hold_reason=req.reason.strip(), held_liveness_state=row.liveness_state))
            item = await queue.fetch(conn, req.item_id)
            await uow.emit(ITEM_HELD, "item_held", ItemEvent(item=item))
        return item
