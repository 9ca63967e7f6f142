"""A session's spend when it ends (issue 32 #2): the figure its page shows, observed once as it
is archived or fails, for the histogram `zimmer_spot_session_spend_dollars` (a label per session
would be unbounded; the histogram by class and end status is four series). A session that ends
again after an Undo is observed again; spend reported after the end is on its page, not here."""

from __future__ import annotations

from collections.abc import Callable

from zimmer_common.contracts.spot import SessionView
from zimmer_common.unit_of_work import UnitOfWork
from zimmer_spot_gate.domain.lifecycle import ENDED
from zimmer_spot_gate.store.session_spend import session_spend

ENDED_NAMES = frozenset(s.value for s in ENDED)
Observe = Callable[[str, str, float], None]  # (class, end status, dollars)


async def observe_if_ended(uow: UnitOfWork, before_status: str, view: SessionView, observe: Observe) -> None:
    """Observe the session's spend when this move ended it (from a status that had not), once the
    move has committed: a rolled-back end is not counted."""
    if before_status in ENDED_NAMES or view.status not in ENDED_NAMES:
        return
    spend = await session_spend(uow.conn, view.id)
    dollars = spend.dollars if spend is not None else 0.0
    uow.after_commit(lambda: observe(view.priority_class, view.status, dollars))
