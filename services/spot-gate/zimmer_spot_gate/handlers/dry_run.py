"""The policy dry-run (issue 32 #5): one span of the record read (bounded), replayed by
`domain/replay.py` at the settings asked, and answered per hour beside what happened. The replay
is pure CPU work over at most a few tens of thousands of rows: it runs in a worker thread, one
at a time per replica, so admissions keep their event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime

from zimmer_common.contracts.policy_dry_run import (
    MAX_SPAN,
    SINCE_AFTER_UNTIL,
    DryRunFigures,
    DryRunGap,
    DryRunHour,
    DryRunLeft,
    DryRunReset,
    DryRunSession,
    DryRunSettings,
    PolicyDryRun,
    PolicyDryRunView,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.domain.replay import replay
from zimmer_spot_gate.domain.replay_hours import gaps
from zimmer_spot_gate.domain.replay_model import Answer, Figures, Left, Settings
from zimmer_spot_gate.store import replay_records
from zimmer_spot_gate.store.replay_records import SpanRead

WINDOW_WORDS = {"five_hour": "5-hour", "seven_day": "7-day"}


def span(req: PolicyDryRun, now: datetime) -> tuple[datetime, datetime]:
    """The span asked: `until` defaults to now (or 7 days after `since`, if earlier), `since` to
    7 days before `until`."""
    until = req.until or (now if req.since is None else min(now, req.since + MAX_SPAN))
    since = req.since or until - MAX_SPAN
    if since >= until:
        raise ZimmerError(ErrorCode.INVALID, f"{SINCE_AFTER_UNTIL} (now, when until is not given): "
                          f"{since.isoformat()} is in the future", {"field": "since"})
    return since, until


def settings_of(req: PolicyDryRun) -> Settings:
    return Settings(gating_enabled=req.gating_enabled,
                    reserve_five_hour=None if req.reserve_five_hour_percent is None else req.reserve_five_hour_percent / 100,
                    reserve_seven_day=None if req.reserve_seven_day_percent is None else req.reserve_seven_day_percent / 100,
                    max_sessions=req.max_sessions)


class DryRuns:
    def __init__(self, units: UnitsOfWork, now: Callable[[], datetime],
                 on_answer: Callable[[str, float], None] = lambda outcome, seconds: None):
        self.units = units
        self.now = now
        self.on_answer = on_answer  # metrics: ("served" | "refused", seconds)
        self._one = asyncio.Semaphore(1)

    async def dry_run(self, req: PolicyDryRun) -> PolicyDryRunView:
        started = time.monotonic()
        try:
            since, until = span(req, self.now())
        except ZimmerError:
            self.on_answer("refused", time.monotonic() - started)
            raise
        async with self._one:
            async with self.units.read() as conn:
                read = await replay_records.read_span(conn, since, until)
            answer = await asyncio.to_thread(replay, read.record, settings_of(req))
        view = view_of(req, since, until, read, answer)
        self.on_answer("served", time.monotonic() - started)
        return view


def _figures(f: Figures) -> DryRunFigures:
    by = {k: round(v, 3) for k, v in sorted(f.held_minutes.items())}
    return DryRunFigures(admitted=f.admitted, held=f.held, paused=f.paused, held_minutes=round(sum(by.values()), 3),
                         held_minutes_by_ceiling=by, paused_minutes=round(f.paused_minutes, 3),
                         peak_running=f.peak_running)


def _left(left: Left) -> DryRunLeft:
    return DryRunLeft(window=left.window.value, unit="dollars" if left.calibrated else "fraction",
                      recorded=left.recorded, replayed=left.replayed, utilization_recorded=left.utilization_recorded,
                      utilization_replayed=left.utilization_replayed)


def view_of(req: PolicyDryRun, since: datetime, until: datetime, read: SpanRead, answer: Answer) -> PolicyDryRunView:
    record = read.record
    recorded, replayed = Figures(), Figures()
    for h in answer.hours:
        recorded.add(h.recorded)
        replayed.add(h.replayed)
    missing = [DryRunGap(since=a, until=b, what=what)
               for a, b, what in gaps(since, record.until, answer.not_recorded_until, [s.at for s in record.sweeps])]
    if read.truncated:
        missing.append(DryRunGap(since=record.until, until=until, what=(
            "Not replayed: one dry-run reads at most 20,000 decisions, 4,000 sweeps and 40,000 session starts and "
            "stops; ask again from here")))
    held_instead = sum(h.held_instead for h in answer.hours)
    admitted_instead = sum(h.admitted_instead for h in answer.hours)
    return PolicyDryRunView(
        since=since, until=until, replayed_until=record.until, truncated=read.truncated,
        settings=DryRunSettings(gating_enabled=req.gating_enabled, reserve_five_hour_percent=req.reserve_five_hour_percent,
                                reserve_seven_day_percent=req.reserve_seven_day_percent, max_sessions=req.max_sessions),
        decisions_replayed=answer.decisions_replayed, decisions_changed=answer.decisions_changed,
        reasons_changed=answer.reasons_changed, sessions_changed=answer.sessions_changed,
        recorded=_figures(recorded), replayed=_figures(replayed),
        hours=[DryRunHour(hour=h.start, decisions=h.decisions, recorded=_figures(h.recorded),
                          replayed=_figures(h.replayed), held_instead=h.held_instead,
                          admitted_instead=h.admitted_instead, spot_budget_left=[_left(x) for x in h.left])
               for h in answer.hours],
        resets=[DryRunReset(at=r.at, left=_left(r.left)) for r in answer.resets],
        sessions=[DryRunSession(session_id=d.session_id, at=d.at, recorded=d.recorded, replayed=d.replayed)  # type: ignore[arg-type]  # pydantic validates the words into the literals
                  for d in answer.differently],
        missing=missing,
        sentence=sentence(req, answer, recorded, replayed, held_instead, admitted_instead, read.unreadable))


def _settings_words(req: PolicyDryRun) -> str:
    parts = []
    if req.gating_enabled is not None:
        parts.append("gating " + ("on" if req.gating_enabled else "off"))
    for name, value in (("five_hour", req.reserve_five_hour_percent), ("seven_day", req.reserve_seven_day_percent)):
        if value is not None:
            parts.append(f"a {WINDOW_WORDS[name]} reserve of {value:g}%")
    if req.max_sessions is not None:
        parts.append(f"at most {req.max_sessions} sessions at once")
    if not parts:
        return "at the recorded settings"
    return "with " + ", ".join(parts) + (" (the rest as recorded)" if len(parts) < 4 else "")


def _times(n: int) -> str:
    return {0: "never", 1: "once"}.get(n, f"{n:,} times")


def sentence(req: PolicyDryRun, answer: Answer, recorded: Figures, replayed: Figures, held_instead: int,
             admitted_instead: int, unreadable: int) -> str:
    waited = (f"spot work would have waited {sum(replayed.held_minutes.values()):,.0f} minutes at the gate instead of "
              f"{sum(recorded.held_minutes.values()):,.0f} and {replayed.paused_minutes:,.0f} paused instead of "
              f"{recorded.paused_minutes:,.0f}; at most {replayed.peak_running} sessions at once instead of "
              f"{recorded.peak_running}")
    text = (f"Replayed {answer.decisions_replayed:,} recorded gate decisions {_settings_words(req)}: "
            f"{answer.decisions_changed:,} came out the other way, and {answer.sessions_changed:,} sessions went "
            f"differently ({_times(held_instead)} held or paused where the record let them run, "
            f"{_times(admitted_instead)} let run where they were held or paused); {waited}.")
    if answer.not_replayed:
        text += f" {answer.not_replayed:,} decisions were recorded without their inputs and were not asked again."
    if unreadable:
        text += f" {unreadable:,} recorded inputs could not be read and were taken as not recorded."
    return text
