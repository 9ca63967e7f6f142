"""The record's runs, as the dry-run's replay uses them: each session's recorded runs (start, end),
the run each decision led to, and which runs the replay has taken over (it runs that work on a
path of its own, so the record running it is a slot the replay does not use). Pure."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from statistics import median

from zimmer_spot_gate.domain.replay_model import Record

TYPICAL_RUN = timedelta(minutes=30)


class Runs:
    def __init__(self, record: Record):
        self.until = record.until
        self.by_session, self.edge_run = _runs(record)
        self.taken: dict[int, set[int]] = defaultdict(set)
        spot = {e.session_id for e in (*record.running_at_since, *record.edges) if e.exempt is None}
        done = [end - start for sid in spot for start, end in self.by_session.get(sid, ()) if end is not None]
        # What a session the record never started in the span is taken to run: the span's median spot run.
        self.typical = median(done) if done else TYPICAL_RUN

    def led_to(self, sid: int, at: datetime) -> int | None:
        """The recorded run a decision at `at` led to: the one running then, else the next."""
        for i, (start, end) in enumerate(self.by_session.get(sid, ())):
            if (start <= at and (end is None or end > at)) or start >= at:
                return i
        return None

    def is_taken(self, sid: int, run: int | None) -> bool:
        return run is not None and run in self.taken[sid]

    def after(self, sid: int, run: int | None) -> int | None:
        """The run after `run`, if the record has one."""
        return run + 1 if run is not None and run + 1 < len(self.by_session.get(sid, ())) else None

    def take(self, sid: int, run: int | None, at: datetime) -> timedelta:
        """The replay takes over a recorded run: what of it is left to run after `at` (the typical
        run when there is none; nothing when already taken)."""
        if run is None:
            return self.typical
        if run in self.taken[sid]:
            return timedelta(0)
        self.taken[sid].add(run)
        start, end = self.by_session[sid][run]
        return max(timedelta(0), (end or self.until) - max(start, at))


def _runs(record: Record) -> tuple[dict[int, list[tuple[datetime, datetime | None]]], list[int]]:
    """Each session's recorded runs (start, end or None: still running at the span's end), and
    the run each edge belongs to."""
    runs: dict[int, list[list[datetime | None]]] = defaultdict(list)
    for e in record.running_at_since:
        runs[e.session_id].append([e.at, None])
    edge_run: list[int] = []
    for e in record.edges:
        mine = runs[e.session_id]
        if e.running:
            if not mine or mine[-1][1] is not None:
                mine.append([e.at, None])
        elif not mine or mine[-1][1] is not None:
            mine.append([record.since, e.at])  # running since before the span, unrecorded
        else:
            mine[-1][1] = e.at
        edge_run.append(len(mine) - 1)
    return {sid: [(r[0], r[1]) for r in mine] for sid, mine in runs.items()}, edge_run  # type: ignore[misc]  # r[0] is always a datetime
