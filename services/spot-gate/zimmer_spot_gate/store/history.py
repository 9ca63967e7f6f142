"""The charts' reads and writes in spot-gate (issue 32 #4): the pool's history table (through
`zimmer_common.history_store`), the decision log's events since the point before, and spend per
model and bucket straight from the spend ledger (the ledger already is the history: the Costs
charts read it by its time index, as the Costs page's 7-day totals do)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.history import ReadRange
from zimmer_common.history_store import bucket
from zimmer_spot_gate.store.history_tables import POOL_HISTORY
from zimmer_spot_gate.store.tables import gate_decisions, spend_ledger

g = gate_decisions.c
ledger = spend_ledger.c

EVENTS = select(
    func.count().filter(and_(g.event == "turn", g.allowed.is_(False))).label("holds"),
    func.count().filter(g.event == "ceiling_pause").label("pauses"),
    func.count().filter(and_(g.event == "ceiling_resume", g.allowed.is_(True))).label("resumes"))


async def decision_events(conn: AsyncConnection, since: datetime, until: datetime) -> tuple[int, int, int]:
    """Turns held, ceiling pauses and ceiling resumes logged in [since, until)."""
    row = (await conn.execute(EVENTS.where(g.decided_at >= since, g.decided_at < until))).one()
    return int(row.holds), int(row.pauses), int(row.resumes)


async def spend_models(conn: AsyncConnection, since: datetime, until: datetime) -> int:
    """How many harness + model combinations spent in [since, until)."""
    models = select(ledger.harness, ledger.model).where(ledger.at >= since, ledger.at < until).distinct().subquery()
    return int((await conn.execute(select(func.count()).select_from(models))).scalar_one())


async def spend_buckets(conn: AsyncConnection, span: ReadRange) -> list[Any]:
    """List-price dollars per harness, model and bucket of `span`, for buckets with spend."""
    at = bucket(ledger.at, span.step_minutes)
    query = (select(ledger.harness, ledger.model, at.label("at"), func.sum(ledger.dollars).label("dollars"))
             .where(ledger.at >= span.since, ledger.at < span.until)
             .group_by(ledger.harness, ledger.model, at).order_by(ledger.harness, ledger.model, at))
    return list((await conn.execute(query)).all())


__all__ = ["POOL_HISTORY", "decision_events", "spend_buckets", "spend_models"]
