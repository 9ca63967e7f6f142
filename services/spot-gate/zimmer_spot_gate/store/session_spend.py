"""One session's spend, for its page and get_session (issue 32 #6): the spend ledger's reports
naming it, summed (SQLAlchemy Core over `tables.spend_ledger`; the index `spend_ledger_session`,
migration 0012, keeps it one index range however large the ledger grows)."""

from __future__ import annotations

from sqlalchemy import bindparam, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.spot import SessionSpend
from zimmer_spot_gate.store.tables import spend_ledger

ledger = spend_ledger.c
BY_MODEL = (select(ledger.harness, ledger.model, func.sum(ledger.dollars).label("dollars"),
                   func.count().label("reports"), func.sum(ledger.input_tokens).label("i"),
                   func.sum(ledger.output_tokens).label("o"), func.sum(ledger.cache_write_tokens).label("cw"),
                   func.sum(ledger.cache_read_tokens).label("cr"), func.min(ledger.at).label("first_at"),
                   func.max(ledger.at).label("last_at"))
            .where(ledger.session_id == bindparam("sid")).group_by(ledger.harness, ledger.model)
            .order_by(func.sum(ledger.dollars).desc(), ledger.harness, ledger.model))


async def session_spend(conn: AsyncConnection, session_id: int) -> SessionSpend | None:
    """What the session has spent, or None when no spend report has named it."""
    rows = (await conn.execute(BY_MODEL, {"sid": session_id})).all()
    if not rows:
        return None
    return SessionSpend(
        dollars=float(sum(r.dollars for r in rows)), reports=sum(int(r.reports) for r in rows),
        input_tokens=sum(int(r.i) for r in rows), output_tokens=sum(int(r.o) for r in rows),
        cache_write_tokens=sum(int(r.cw) for r in rows), cache_read_tokens=sum(int(r.cr) for r in rows),
        first_at=min(r.first_at for r in rows), last_at=max(r.last_at for r in rows),
        models=[f"{r.harness}/{r.model}" for r in rows])
