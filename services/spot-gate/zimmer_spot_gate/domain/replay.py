"""The policy dry-run's replay (issue 32 #5): one recorded span asked again at other settings,
through `evaluate_call`, `plan_ceiling` and `hold_delay` — the functions the live gate decides
with, never a copy of their arithmetic. Pure: the record comes in as values, the answer goes out.

How the replay runs, and what it has to assume:

- Every recorded gate decision (a turn, a held turn's re-check, a ceiling pause, resume or keep)
  is asked again at its recorded time with the call it was made from, under the settings tried
  (a field not given keeps what that decision recorded), the running count and burn adjusted by
  what the replay ran differently so far, and each calibrated window's utilization moved by the
  spend that difference made since the window last reset. At the recorded settings nothing
  differs, so every decision comes out as the gate made it.
- Where the replay decides otherwise, the session leaves the record's path. Its work is taken
  to be the record's: the run the decision led to lasts as long as it did. A session the replay
  holds re-checks on the hold ladder (jitter at its midpoint); a session it admits runs at once;
  its recorded decisions meanwhile are not asked again (it has one turn in the gate's custody),
  but any run they led to is owed too. A session the record never started in the span runs the
  span's median spot run (30 minutes when there is none).
- Each recorded ceiling sweep is asked again: one the replay would pause on pauses the spot work
  the replay has running, and the sweeps after it resume the replay's paused sessions through
  `plan_ceiling` (by pause time: precedence is not recorded). Between sweeps and decisions the
  windows are as last read.
- A window resets where its pooled time to reset jumps up and its utilization falls; the
  difference in spend starts again from nothing there.
- Nothing recorded says what a session waited on before its first decision in the span.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from zimmer_spot_gate.domain.ceiling import Sleeper, plan_ceiling
from zimmer_spot_gate.domain.gate import Candidate, Decision, FleetState, GateCall, WindowState, evaluate_call
from zimmer_spot_gate.domain.ladder import hold_delay
from zimmer_spot_gate.domain.model import Reason, Window
from zimmer_spot_gate.domain.replay_hours import HELD, PAUSED, Hours, Waits, count, kind_of, wait
from zimmer_spot_gate.domain.replay_model import (
    SESSIONS_LISTED,
    Answer,
    Asked,
    Differently,
    Hour,
    Record,
    RunEdge,
    Settings,
    Swept,
)
from zimmer_spot_gate.domain.replay_runs import Runs
from zimmer_spot_gate.domain.replay_windows import WindowReadings

LADDER_JITTER = 0.5  # the ladder's jitter at its midpoint: 30 seconds
RUN = "run"
GATE_REASONS = frozenset(r.value for r in Reason)
NOT_DECIDING = (Reason.AT_UTILIZATION_LIMIT, Reason.FLEET_AT_CAP, Reason.UNAVAILABLE)  # a sweep resumes nothing


@dataclass
class _Off:
    """A session off the record's path: what the replay does with it instead."""

    mode: str  # held, paused or run
    since: datetime
    owed: timedelta  # running still owed (a run's end is `until`)
    until: datetime | None = None
    holds: int = 0
    version: int = 0


def replay(record: Record, settings: Settings) -> Answer:
    return _Replay(record, settings).run()


def _ceiling(d: Decision) -> str | None:
    return d.ceiling.value if d.ceiling else None


class _Replay:
    def __init__(self, record: Record, settings: Settings):
        self.r, self.s = record, settings
        self.hours = Hours(record.since, record.until)
        self.rec_waits, self.rep_waits = Waits(), Waits()
        self.rec_running: dict[int, RunEdge] = {e.session_id: e for e in record.running_at_since}
        self.rec_slots = sum(1 for e in self.rec_running.values() if e.takes_slot)
        self.runs = Runs(record)
        self.cur_run: dict[int, int] = {sid: 0 for sid in self.rec_running}
        self.off: dict[int, _Off] = {}
        self.rep_holds: dict[int, int] = {}
        self.burn: dict[int, float] = {}
        burns = [a.call.candidate.burn_dollars_per_minute for a in record.asked if a.call is not None]
        self.typical_burn = sum(burns) / len(burns) if burns else 0.0
        self.contrib: dict[int, tuple[int, float]] = {}
        self.d_slots, self.d_burn = 0, 0.0
        self.d_spent = dict.fromkeys(Window, 0.0)
        self.env: GateCall | None = None
        self.rec_burn = 0.0  # the record's fleet burn, estimated: each running session at its own (or the mean)
        self.rec_burn_of = {sid: self.typical_burn for sid, e in self.rec_running.items() if e.takes_slot}
        self.rec_burn += sum(self.rec_burn_of.values())
        self.env_rec = (0, 0.0)  # the record's running slots and burn when `env` was read
        self.windows = WindowReadings()
        self.heap: list[tuple[datetime, int, str, int, int]] = []
        self.seq = itertools.count(1)  # 0 is an _Off's version before anything is scheduled
        self.answer = Answer(self.hours.hours, [], [])
        self.changed: set[int] = set()

    # ---- the loop ---------------------------------------------------------------------

    def run(self) -> Answer:
        self._peak(self.r.since)
        events: list[tuple[datetime, int, int]] = [(sw.at, 0, i) for i, sw in enumerate(self.r.sweeps)]
        events += [(a.at, 1, i) for i, a in enumerate(self.r.asked)]
        events += [(e.at, 2, i) for i, e in enumerate(self.r.edges)]
        events.sort()
        for at, kind, i in events:
            if at >= self.r.until:
                break
            self._simulated(before=at)
            self._advance(at)
            if kind == 0:
                self._sweep(self.r.sweeps[i])
            elif kind == 1:
                self._asked(self.r.asked[i])
            else:
                self._edge(self.r.edges[i], self.runs.edge_run[i])
            self._peak(at)
        self._simulated(before=self.r.until)
        self._advance(self.r.until)
        self.answer.sessions_changed = len(self.changed)
        return self.answer

    def _simulated(self, before: datetime) -> None:
        while self.heap and self.heap[0][0] < before:
            at, _, what, sid, version = heapq.heappop(self.heap)
            off = self.off.get(sid)
            if off is None or off.version != version:
                continue  # superseded
            self._advance(at)
            if what == "recheck":
                self._recheck(sid, off, at)
            else:
                del self.off[sid]
                self.rep_holds[sid] = 0
                self._recontribute(sid)
            self._peak(at)

    def _schedule(self, at: datetime, what: str, sid: int) -> None:
        """One event pending per session: scheduling another supersedes it (a version never reused)."""
        off = self.off[sid]
        off.version = next(self.seq)
        heapq.heappush(self.heap, (at, off.version, what, sid, off.version))

    def _advance(self, to: datetime) -> None:
        def accrue(hour: Hour, minutes: float) -> None:
            self.rec_waits.accrue(hour.recorded, minutes)
            self.rep_waits.accrue(hour.replayed, minutes)
            if self.d_burn:
                for w in Window:
                    self.d_spent[w] += self.d_burn * minutes

        self.hours.advance(to, accrue, lambda hour: self._peak(hour.start))

    def _peak(self, at: datetime) -> None:
        hour = self.hours.at(at)
        hour.recorded.peak_running = max(hour.recorded.peak_running, self.rec_slots)
        hour.replayed.peak_running = max(hour.replayed.peak_running, self.rec_slots + self.d_slots)

    # ---- the record's events ------------------------------------------------------------

    def _edge(self, e: RunEdge, run: int) -> None:
        sid = e.session_id
        if e.running:
            if sid not in self.rec_running and e.takes_slot:
                self.rec_slots += 1
                self.rec_burn_of[sid] = self.burn.get(sid, self.typical_burn)
                self.rec_burn += self.rec_burn_of[sid]
            self.rec_running[sid] = e
            self.cur_run[sid] = run
            self.rec_waits.clear(sid)  # started, however it was started
            if sid not in self.off:
                self.rep_waits.clear(sid)
        else:
            old = self.rec_running.pop(sid, None)
            if old is not None and old.takes_slot:
                self.rec_slots -= 1
                self.rec_burn -= self.rec_burn_of.pop(sid, 0.0)
        if e.exempt is None:
            self._recontribute(sid)

    def _asked(self, a: Asked) -> None:
        sid, at = a.session_id, a.at
        if a.call is None:
            if a.allowed:  # started without asking the gate: whatever it waited on is over
                self.rec_waits.clear(sid)
                if sid not in self.off:
                    self.rep_waits.clear(sid)
            elif a.reason in GATE_REASONS:  # a gate decision recorded before its call was
                self.answer.not_replayed += 1
                self.answer.not_recorded_until = at
            return
        self._read_windows(at, a.call)
        if a.call.candidate.burn_dollars_per_minute > 0:
            self.burn[sid] = a.call.candidate.burn_dollars_per_minute
            self._recontribute(sid)
        hour = self.hours.at(at)
        rec = kind_of(a.event, a.allowed)
        count(hour.recorded, rec, a.event)
        wait(self.rec_waits, sid, rec, a.ceiling)
        run = self.runs.led_to(sid, at)
        if sid in self.off:
            self._owe(sid, run, at)
            return
        if self.runs.is_taken(sid, run):
            return  # the replay has already run the work this decision led to
        d = evaluate_call(self._adjusted(a.call))
        hour.decisions += 1
        self.answer.decisions_replayed += 1
        rep = kind_of(a.event, d.allowed)
        count(hour.replayed, rep, a.event)
        if d.allowed == a.allowed:
            self.answer.reasons_changed += int((d.reason.value, _ceiling(d)) != (a.reason, a.ceiling))
            wait(self.rep_waits, sid, rep, _ceiling(d))
            self.rep_holds[sid] = 0 if d.allowed else self.rep_holds.get(sid, 0) + 1
            return
        self.answer.decisions_changed += 1
        self._differently(sid, at, rec, rep, held=not d.allowed)
        if d.allowed:
            owed = self.runs.take(sid, run, at)
            if a.event == "ceiling_pause" and (resumed := self.runs.after(sid, run)) is not None:
                owed += self.runs.take(sid, resumed, at)  # the rest of its work came after the record's resume
            self._start(sid, at, owed)
        else:
            self._hold(sid, at, self.runs.take(sid, run, at), d, paused=a.event == "ceiling_resume")

    def _sweep(self, sw: Swept) -> None:
        self._read_windows(sw.at, sw.call)
        d = evaluate_call(self._adjusted(sw.call))
        if d.reason is Reason.AT_UTILIZATION_LIMIT and sw.reason != Reason.AT_UTILIZATION_LIMIT.value:
            self._pause_running(sw.at)
        elif d.reason not in NOT_DECIDING:
            self._resume_paused(sw.at, sw.call)

    # ---- the replay's own path ----------------------------------------------------------

    def _start(self, sid: int, at: datetime, owed: timedelta) -> None:
        self.off[sid] = _Off(RUN, at, owed, until=at + owed)
        self.rep_waits.clear(sid)
        self.rep_holds[sid] = 0
        self._schedule(at + owed, "end", sid)
        self._recontribute(sid)

    def _hold(self, sid: int, at: datetime, owed: timedelta, d: Decision, *, paused: bool) -> None:
        holds = self.rep_holds.get(sid, 0) + 1
        self.rep_holds[sid] = holds
        self.off[sid] = _Off(PAUSED if paused else HELD, at, owed, holds=holds)
        if paused:
            self.rep_waits.set(sid, PAUSED)
        else:
            self.rep_waits.set(sid, HELD, _ceiling(d))
            self._schedule(at + hold_delay(d.reason, holds, LADDER_JITTER), "recheck", sid)
        self._recontribute(sid)

    def _recheck(self, sid: int, off: _Off, at: datetime) -> None:
        if self.env is None:
            return
        d = evaluate_call(self._adjusted(self.env, candidate=Candidate(self.burn.get(sid, self.typical_burn)),
                                         margin=0.0, fleet=self._fleet_now()))
        hour = self.hours.at(at)
        count(hour.replayed, kind_of("turn", d.allowed), "turn")
        if d.allowed:
            self._start(sid, at, off.owed)
        else:
            self._hold(sid, at, off.owed, d, paused=False)

    def _pause_running(self, at: datetime) -> None:
        """A sweep the replay pauses on and the record did not: every spot session the replay
        has running, and the record has not paused already, is paused."""
        hour = self.hours.at(at)
        for sid, e in list(self.rec_running.items()):
            if e.exempt is None and sid not in self.off and not self.runs.is_taken(sid, self.cur_run.get(sid)) \
                    and self.rec_waits.by_session.get(sid, ("",))[0] != PAUSED:
                self._pause(sid, at, self.runs.take(sid, self.cur_run.get(sid), at), hour)
        for sid, off in list(self.off.items()):
            if off.mode == RUN and off.until is not None:
                self._pause(sid, at, off.until - at, hour)

    def _pause(self, sid: int, at: datetime, owed: timedelta, hour: Hour) -> None:
        self.off[sid] = _Off(PAUSED, at, owed)  # a new record: whatever was scheduled for it is superseded
        self.rep_waits.set(sid, PAUSED)
        hour.replayed.paused += 1
        self._differently(sid, at, "running", "paused", held=True)
        self._recontribute(sid)

    def _resume_paused(self, at: datetime, call: GateCall) -> None:
        paused = [Sleeper(sid, 0, off.since, None, self.burn.get(sid, self.typical_burn))
                  for sid, off in self.off.items() if off.mode == PAUSED]
        if not paused:
            return

        def gate(candidate: Candidate, fleet: FleetState, margin: float) -> Decision:
            return evaluate_call(self._adjusted(call, candidate=candidate, margin=margin, fleet=fleet))

        plan = plan_ceiling([], paused, self._fleet_now(), gate)
        hour = self.hours.at(at)
        for sid in plan.resume:
            hour.replayed.admitted += 1
            self._start(sid, at, self.off[sid].owed)

    # ---- bookkeeping ------------------------------------------------------------------

    def _adjusted(self, call: GateCall, *, candidate: Candidate | None = None, margin: float | None = None,
                  fleet: FleetState | None = None) -> GateCall:
        """`call` under the settings tried, with what the replay runs differently."""
        if fleet is None and (self.d_slots or self.d_burn):
            fleet = FleetState(max(0, call.fleet.running_slots + self.d_slots),
                               max(0.0, call.fleet.burn_dollars_per_minute + self.d_burn))
        windows = call.windows
        if windows is not None and any(self.d_spent.values()):
            windows = tuple(self._moved(w) for w in windows)
        return replace(call, policy=self.s.apply(call.policy), windows=windows, fleet=fleet or call.fleet,
                       candidate=candidate or call.candidate,
                       reserve_margin=call.reserve_margin if margin is None else margin)

    def _fleet_now(self) -> FleetState:
        """The fleet for a decision the record did not make: as the windows' last call read it, moved
        by what the record started and stopped since, and by what the replay runs differently."""
        assert self.env is not None
        slots, burn = self.env_rec
        f = self.env.fleet
        return FleetState(max(0, f.running_slots + self.rec_slots - slots + self.d_slots),
                          max(0.0, f.burn_dollars_per_minute + self.rec_burn - burn + self.d_burn))

    def _moved(self, w: WindowState) -> WindowState:
        spent = self.d_spent[w.window]
        if not spent or not w.capacity_dollars or w.capacity_dollars <= 0:
            return w  # not calibrated: the fleet's burn is the pool's observed climb, not dollars
        return replace(w, utilization=min(1.0, max(0.0, w.utilization + spent / w.capacity_dollars)))

    def _read_windows(self, at: datetime, call: GateCall) -> None:
        """The windows as this call read them: the hour's spot budget left in both histories, and
        the resets since the last call (the difference in spend starts again there)."""
        self.env, self.env_rec = call, (self.rec_slots, self.rec_burn)
        lefts, resets = self.windows.read(at, call, self.s.apply(call.policy), self._moved, self.d_spent)
        self.answer.resets.extend(resets)
        if lefts:
            self.hours.at(at).left = lefts

    def _owe(self, sid: int, run: int | None, at: datetime) -> None:
        """A recorded decision of a session off the record's path is not asked again, but the run
        it led to is work the session still owes."""
        if run is None or self.runs.is_taken(sid, run):
            return
        more = self.runs.take(sid, run, at)
        off = self.off[sid]
        off.owed += more
        if off.mode == RUN and off.until is not None:
            off.until += more
            self._schedule(off.until, "end", sid)

    def _recontribute(self, sid: int) -> None:
        """This session's share of what the replay runs beyond (or short of) the record."""
        rec = sid in self.rec_running
        off = self.off.get(sid)
        rep = off.mode == RUN if off is not None else rec and not self.runs.is_taken(sid, self.cur_run.get(sid))
        slots = int(rep) - int(rec)
        new = (slots, slots * self.burn.get(sid, self.typical_burn))
        old = self.contrib.get(sid, (0, 0.0))
        self.contrib[sid] = new
        self.d_slots += new[0] - old[0]
        self.d_burn += new[1] - old[1]
        if not any(c[0] or c[1] for c in self.contrib.values()):
            self.d_slots, self.d_burn = 0, 0.0  # no drift left over from adding and taking away

    def _differently(self, sid: int, at: datetime, recorded: str, replayed: str, *, held: bool) -> None:
        hour = self.hours.at(at)
        if held:
            hour.held_instead += 1
        else:
            hour.admitted_instead += 1
        self.changed.add(sid)
        if len(self.answer.differently) < SESSIONS_LISTED:
            self.answer.differently.append(Differently(sid, at, recorded, replayed))
