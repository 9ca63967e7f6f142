"""The invariants a scenario holds, checked against the control plane's own answers (its RPCs, the
same ones REST and MCP serve) and the simulator's ledger. Each prints as a row: checks, violations.

Checked while the fleet runs: the slot cap and one turn in flight (at every start_turn, by the
fleet), live sessions' clones and transcripts still on disk, nothing paging in a healthy run.
Checked at the end, once every report is flushed: each held prompt delivered once and in order,
spend counted exactly once (the fleet's tokens at the control plane's prices = Costs), every log
line readable once, no backlog issue started twice.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from zimmer_common.contracts.alerts import LIST_ALERTS, AlertQuery
from zimmer_common.contracts.backlog import GET_ITEMS, ItemQuery
from zimmer_common.contracts.logs import GET_SESSION_LOGS, LogQuery
from zimmer_common.contracts.spot_policy import GET_COSTS, CostsQuery, CostsView
from zimmer_runtime import RuntimeRequestError
from zimmer_sim.fleet import LOG_MARK
from zimmer_sim.runner import FleetRun

SETTLE_SECONDS = 60.0  # the end's checks wait this long at most for the last reports to land
ANSWER_TIMEOUT = 5.0  # one question to the control plane; the checks' own deadlines bound the rest
COMMAND_SLACK = 30.0  # an admitted turn's command reaches the fleet within this (outages included)
LOG_SESSIONS_CHECKED = 200  # a long run's log check reads this many sessions' timelines, not all


@dataclass
class Invariant:
    name: str
    checks: int = 0
    violations: list[dict[str, Any]] = field(default_factory=list)

    def check(self, ok: bool, **detail: Any) -> None:
        self.checks += 1
        if not ok:
            self.violations.append(detail)


@dataclass
class Invariants:
    """`healthy`: nothing may page (a scenario that breaks the system on purpose says False)."""

    healthy: bool = True
    owned_backlog: bool = False  # the run's stack is its own: nothing but the fleet fed its backlog
    table: dict[str, Invariant] = field(default_factory=dict)
    costs_at_start: CostsView | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def row(self, name: str) -> Invariant:
        return self.table.setdefault(name, Invariant(name))

    async def start(self, run: FleetRun) -> None:
        self.costs_at_start = await _answer(run, GET_COSTS, CostsQuery())
        self.started_at = datetime.now(UTC)

    async def during(self, run: FleetRun) -> None:
        for record in list(run.ledger.sessions.values()):
            if not record.archived and record.clone_path:
                self.row("live clones and transcripts stay on disk").check(
                    run.fleet.disk.exists(record.clone_path) and (record.transcript_dir is None
                                                                  or run.fleet.disk.exists(record.transcript_dir)),
                    session_id=record.session_id, clone=record.clone_path)
        if self.healthy:
            alerts = await _answer(run, LIST_ALERTS, AlertQuery(level="error", limit=50))
            if alerts is not None:
                paging = [c.title for c in alerts.conditions if c.still_true and c.level == "error"]
                paging += [i.title for i in alerts.issues if i.level == "error" and i.last_seen >= self.started_at]
                self.row("nothing pages in a healthy run").check(not paging, pages=paging)

    async def finish(self, run: FleetRun) -> None:
        """The end's checks (the fleet has stopped; its client is still open)."""
        self._fleet_rows(run)
        prompts = self.row("a held prompt is delivered exactly once, in order")
        for problem in run.ledger.prompt_order_violations():
            prompts.violations.append(problem)
        prompts.checks += sum(len(s.delivered_prompts) for s in run.ledger.sessions.values())
        started = self.row("an admitted turn's start_turn reaches the runtime")
        started.checks += len(run.ledger.admitted)
        started.violations += run.ledger.admitted_never_started(datetime.now(UTC) - timedelta(seconds=COMMAND_SLACK))
        await run.client.flush(timeout=30)
        await self._spend(run)
        await self._logs(run)
        if run.github is not None:
            twice = run.github.ledger.started_twice()  # type: ignore[attr-defined]  # run.github is the GithubWorld when set
            row = self.row("no backlog issue is started twice")
            row.check(not twice, keys=twice)
            if self.owned_backlog:
                await self._backlog_counts(run)

    def _fleet_rows(self, run: FleetRun) -> None:
        counts = run.ledger.counts
        for key, name, checks in (("max_sessions", "running spot sessions stay under max_sessions", "cap_checks"),
                                  ("one_turn_in_flight", "no session has two turns in flight", "turns_started")):
            row = self.row(name)
            row.checks += counts[checks]
            row.violations += [v for v in run.ledger.violations if v["invariant"] == key]

    async def _spend(self, run: FleetRun) -> None:
        """Costs' 5-hour spend grew by exactly what the fleet's tokens cost at Costs' own prices."""
        row = self.row("every spend report is counted exactly once")
        start = self.costs_at_start.spend_five_hour_dollars if self.costs_at_start else 0.0
        expected = 0.0
        got = None
        deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            costs = await _answer(run, GET_COSTS, CostsQuery())
            if costs is not None:
                expected = _dollars(run.ledger.tokens, costs)
                got = costs.spend_five_hour_dollars - start
                if abs(got - expected) <= 1e-6 * max(1.0, expected):
                    break
            await asyncio.sleep(1.0)
        row.check(got is not None and abs(got - expected) <= 1e-6 * max(1.0, expected),
                  expected_dollars=round(expected, 6), costs_dollars=None if got is None else round(got, 6))

    async def _logs(self, run: FleetRun) -> None:
        """Each session's timeline holds every line the fleet sent, once (the control plane's own
        notes in it, a pause or a resume, are not the fleet's and are not counted)."""
        row = self.row("every log line sent is readable once")
        sent = {sid: run.ledger.log_lines[sid] for sid in sorted(run.ledger.log_lines)[-LOG_SESSIONS_CHECKED:]}
        read: dict[int, tuple[int, int] | None] = {}
        deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
        pending = list(sent)
        while pending:
            for sid in pending:
                if asyncio.get_running_loop().time() > deadline:
                    break  # what is still unread counts as unreadable
                read[sid] = await _fleet_lines(run, sid)
            pending = [sid for sid in pending if read.get(sid) != (sent[sid], sent[sid])]
            if not pending or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(2.0)
        for sid, n in sent.items():
            got = read.get(sid)
            row.check(got == (n, n), session_id=sid, sent=n, read=None if got is None else got[0],
                      distinct=None if got is None else got[1])

    async def _backlog_counts(self, run: FleetRun) -> None:
        """On a backlog only this run fed: its queue is exactly what the fleet appended and neither
        pulled nor removed, and its claimed count the pulled sessions the fleet has not archived."""
        gh = run.github.ledger  # type: ignore[attr-defined]  # run.github is the GithubWorld when set
        row = self.row("the backlog's counts equal the fleet's view")
        expected_queue = gh.appended - set(gh.pulled) - set(gh.removed)
        pulled_sessions = {sid for ids in gh.sessions.values() for sid in ids}
        expected_claimed = sum(1 for sid in pulled_sessions
                               if not (run.ledger.sessions.get(sid) and run.ledger.sessions[sid].archived))
        queue, claimed = None, None
        deadline = asyncio.get_running_loop().time() + SETTLE_SECONDS
        while asyncio.get_running_loop().time() < deadline:
            queue, claimed = await _backlog_view(run)
            if queue == expected_queue and claimed == expected_claimed:
                break
            await asyncio.sleep(2.0)
        row.check(queue == expected_queue and claimed == expected_claimed,
                  queue_only_in_backlog=sorted((queue or set()) - expected_queue)[:10],
                  queue_only_in_fleet=sorted(expected_queue - (queue or set()))[:10],
                  claimed=claimed, expected_claimed=expected_claimed)

    def failed(self) -> bool:
        return any(row.violations for row in self.table.values())

    def report(self) -> dict[str, Any]:
        return {name: {"checks": row.checks, "violations": len(row.violations), "examples": row.violations[:5]}
                for name, row in self.table.items()}

    def text(self) -> str:
        width = max([len("invariant"), *(len(n) for n in self.table)])
        lines = [f"{'invariant':<{width}}  {'checks':>8}  {'violations':>10}", "-" * (width + 22)]
        lines += [f"{n:<{width}}  {r.checks:>8}  {len(r.violations):>10}" for n, r in self.table.items()]
        return "\n".join(lines)


def _dollars(tokens: dict[str, list[int]], costs: CostsView) -> float:
    priced_as = {m.model: m.priced_as for m in costs.models}
    total = 0.0
    for model, (tokens_in, tokens_out) in tokens.items():
        prices = costs.prices_per_million_tokens.get(priced_as.get(model, model), {})
        total += (tokens_in * prices.get("input", 0.0) + tokens_out * prices.get("output", 0.0)) / 1_000_000
    return total


async def _fleet_lines(run: FleetRun, session_id: int) -> tuple[int, int] | None:
    """(the fleet's lines in the session's timeline, how many distinct), or None when unreadable."""
    messages: list[str] = []
    cursor = None
    while True:
        page = await _answer(run, GET_SESSION_LOGS, LogQuery(session_id=session_id, cursor=cursor, limit=1000,
                                                             levels=["verbose", "info", "warning", "error"]))
        if page is None:
            return None
        messages += [line.message for line in page.lines if line.message.startswith(LOG_MARK)]
        if page.next_cursor is None:
            return len(messages), len(set(messages))
        cursor = page.next_cursor


async def _backlog_view(run: FleetRun) -> tuple[set[str] | None, int | None]:
    """The backlog's queued keys and its claimed count, as it answers them."""
    keys: set[str] = set()
    offset: int | None = 0
    claimed = None
    while offset is not None:
        page = await _answer(run, GET_ITEMS, ItemQuery(status="queued", limit=1000, offset=offset))
        if page is None:
            return None, None
        keys |= {item.key for item in page.items}
        claimed, offset = page.counts.claimed, page.next_offset
    return keys, claimed


async def _answer(run: FleetRun, spec: Any, payload: Any) -> Any:
    try:
        return await run.client.call(spec, payload, timeout=ANSWER_TIMEOUT)
    except RuntimeRequestError:
        return None

