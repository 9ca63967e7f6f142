"""What the policy dry-run replays (issue 32 #5): sessions starting and stopping (`session_runs`),
every ceiling sweep's own decision and call (`gate_sweeps`), both kept 15 days, and the bounded
read of one span of them with the decision log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_spot_gate.domain.gate_record import UnreadableCall, call_of
from zimmer_spot_gate.domain.replay_model import (
    KEPT_DAYS,
    MAX_DECISIONS,
    MAX_RUN_EDGES,
    MAX_SWEEPS,
    Asked,
    Record,
    RunEdge,
    Swept,
)
from zimmer_spot_gate.store.tables import gate_decisions, gate_sweeps, session_runs

PRUNE_BATCH = 5_000  # rows deleted per table per sweep: bounded, and far above what 5 minutes adds

INSERT_RUN_EDGES = insert(session_runs)
INSERT_SWEEP = insert(gate_sweeps)


async def record_run_edges(conn: AsyncConnection, edges: list[dict[str, Any]], at: datetime) -> None:
    """Sessions starting or stopping running (each dict: session_id, running, takes_slot, exempt)."""
    if edges:
        await conn.execute(INSERT_RUN_EDGES, [{**e, "at": at} for e in edges])


async def record_sweep(conn: AsyncConnection, at: datetime, allowed: bool, reason: str, ceiling: str | None,
                       paused: int, inputs: str | None) -> None:
    if inputs is not None:
        await conn.execute(INSERT_SWEEP, {"swept_at": at, "allowed": allowed, "reason": reason, "ceiling": ceiling,
                                          "paused": paused, "inputs": json.loads(inputs)})


def _oldest(t: Any, at: Any, before: datetime) -> Any:
    return delete(t).where(t.c.id.in_(select(t.c.id).where(at < before).order_by(t.c.id).limit(PRUNE_BATCH)))


async def prune(conn: AsyncConnection, now: datetime) -> int:
    """Drop what is older than KEPT_DAYS, at most PRUNE_BATCH rows of each table a call."""
    before = now - timedelta(days=KEPT_DAYS)
    runs = await conn.execute(_oldest(session_runs, session_runs.c.at, before))
    sweeps = await conn.execute(_oldest(gate_sweeps, gate_sweeps.c.swept_at, before))
    return int(runs.rowcount or 0) + int(sweeps.rowcount or 0)


g, w, r = gate_decisions.c, gate_sweeps.c, session_runs.c
DECISIONS = (select(g.id, g.session_id, g.decided_at, g.event, g.allowed, g.reason, g.ceiling, g.inputs)
             .where(g.decided_at >= bindparam("since"), g.decided_at < bindparam("until"))
             .order_by(g.decided_at, g.id).limit(bindparam("n")))
SWEEPS = (select(w.swept_at, w.reason, w.inputs).where(w.swept_at >= bindparam("since"), w.swept_at < bindparam("until"))
          .order_by(w.swept_at, w.id).limit(bindparam("n")))
EDGES = (select(r.session_id, r.at, r.running, r.takes_slot, r.exempt)
         .where(r.at >= bindparam("since"), r.at < bindparam("until")).order_by(r.at, r.id).limit(bindparam("n")))
# Each session's newest edge before the span, within what is kept: the runs still open at its start.
_newest = (select(r.session_id, r.at, r.running, r.takes_slot, r.exempt).ext(distinct_on(r.session_id))
           .where(r.at < bindparam("since"), r.at >= bindparam("kept")).order_by(r.session_id, r.at.desc(), r.id.desc())
           .subquery("newest"))
BEFORE = select(_newest).where(_newest.c.running).limit(MAX_RUN_EDGES)


@dataclass(frozen=True)
class SpanRead:
    record: Record
    truncated: bool  # a bound was reached: `record.until` is where the whole record ends
    unreadable: int  # recorded calls this version could not read (asked as not recorded)


async def read_span(conn: AsyncConnection, since: datetime, until: datetime) -> SpanRead:
    """The span's records, oldest first, each kind bounded: when one reaches its bound, the span
    ends at the last instant read whole and every kind is cut there."""
    span = {"since": since, "until": until}
    decisions = (await conn.execute(DECISIONS, {**span, "n": MAX_DECISIONS + 1})).all()
    sweeps = (await conn.execute(SWEEPS, {**span, "n": MAX_SWEEPS + 1})).all()
    edges = (await conn.execute(EDGES, {**span, "n": MAX_RUN_EDGES + 1})).all()
    end = until
    for rows, bound, at in ((decisions, MAX_DECISIONS, "decided_at"), (sweeps, MAX_SWEEPS, "swept_at"),
                            (edges, MAX_RUN_EDGES, "at")):
        if len(rows) > bound:
            end = min(end, getattr(rows[bound], at))  # everything before the first row left out is whole
    before = (await conn.execute(BEFORE, {"since": since, "kept": since - timedelta(days=KEPT_DAYS)})).all()
    unreadable = 0

    def call(data: Any) -> Any:
        nonlocal unreadable
        if data is None:
            return None
        try:
            return call_of(data)
        except UnreadableCall:
            unreadable += 1
            return None

    asked = tuple(Asked(d.id, d.session_id, d.decided_at, d.event, d.allowed, d.reason, d.ceiling, call(d.inputs))
                  for d in decisions if d.decided_at < end)
    swept = tuple(Swept(s.swept_at, c, s.reason) for s in sweeps if s.swept_at < end and (c := call(s.inputs)))
    record = Record(since, end, asked, swept,
                    tuple(RunEdge(e.session_id, e.at, e.running, e.takes_slot, e.exempt) for e in edges if e.at < end),
                    tuple(RunEdge(e.session_id, e.at, e.running, e.takes_slot, e.exempt) for e in before))
    return SpanRead(record, end < until, unreadable)

