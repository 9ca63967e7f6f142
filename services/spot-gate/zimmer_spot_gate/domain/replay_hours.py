"""The dry-run's bookkeeping per hour: what waits in each history (held, by binding ceiling, or
paused by the ceiling), minutes accrued hour by hour as the replay's clock moves, and the peak of
sessions taking a slot. Pure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from zimmer_spot_gate.domain.replay_model import Figures, Hour

HOUR = timedelta(hours=1)
PAUSED, HELD = "paused", "held"


def hour_of(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def kind_of(event: str, allowed: bool) -> str:
    """What a decision did: admitted, held, paused, or (a pause not made) left running."""
    if event == "ceiling_pause":
        return "running" if allowed else "paused"
    if event == "ceiling_kept":
        return "admitted" if allowed else "paused"
    return "admitted" if allowed else "held"


def count(f: Figures, kind: str, event: str) -> None:
    if kind == "admitted":
        f.admitted += 1
    elif kind == "held":
        f.held += 1
    elif kind == "paused" and event != "ceiling_kept":
        f.paused += 1


def wait(waits: Waits, sid: int, kind: str, ceiling: str | None) -> None:
    if kind == "held":
        waits.set(sid, HELD, ceiling)
    elif kind == "paused":
        waits.set(sid, PAUSED)
    else:
        waits.clear(sid)


class Waits:
    """What each session waits on in one history: ("held", ceiling) or ("paused", None)."""

    def __init__(self) -> None:
        self.by_session: dict[int, tuple[str, str | None]] = {}
        self.held: dict[str, int] = {}  # sessions held now, by binding ceiling
        self.paused = 0

    def set(self, sid: int, kind: str, ceiling: str | None = None) -> None:
        self.clear(sid)
        self.by_session[sid] = (kind, ceiling)
        if kind == PAUSED:
            self.paused += 1
        else:
            key = ceiling or "none"
            self.held[key] = self.held.get(key, 0) + 1

    def clear(self, sid: int) -> None:
        old = self.by_session.pop(sid, None)
        if old is None:
            return
        if old[0] == PAUSED:
            self.paused -= 1
        else:
            key = old[1] or "none"
            self.held[key] -= 1

    def accrue(self, f: Figures, minutes: float) -> None:
        for key, n in self.held.items():
            if n:
                f.held_minutes[key] = f.held_minutes.get(key, 0.0) + n * minutes
        f.paused_minutes += self.paused * minutes


class Hours:
    """The span's hours, and a clock that moves through them accruing minutes."""

    def __init__(self, since: datetime, until: datetime):
        first = hour_of(since)
        count = max(1, -(-int((until - first).total_seconds()) // 3600))
        self.hours = [Hour(start=first + i * HOUR) for i in range(count)]
        self.first = first
        self.until = until
        self.cursor = since

    def at(self, when: datetime) -> Hour:
        i = int((when - self.first).total_seconds() // 3600)
        return self.hours[min(max(i, 0), len(self.hours) - 1)]

    def advance(self, to: datetime, accrue: Callable[[Hour, float], None],
                on_new_hour: Callable[[Hour], None]) -> None:
        """Move the clock to `to` (never past the span's end), accruing each hour's minutes;
        `on_new_hour` sees each hour the clock enters."""
        to = min(to, self.until)
        while self.cursor < to:
            hour = self.at(self.cursor)
            end = min(to, hour.start + HOUR)
            accrue(hour, (end - self.cursor).total_seconds() / 60)
            self.cursor = end
            if end == hour.start + HOUR and end < self.until:
                on_new_hour(self.at(end))

    def totals(self) -> tuple[Figures, Figures]:
        recorded, replayed = Figures(), Figures()
        for h in self.hours:
            recorded.add(h.recorded)
            replayed.add(h.replayed)
        return recorded, replayed


SWEEP_GAP = timedelta(minutes=15)  # three missed sweeps
GAPS_LISTED = 20
NOT_RECORDED = ("The gate's decisions here were recorded without the inputs they were made from (before the spot "
                "gate began keeping them): they are counted as recorded and not asked again.")
NO_SWEEP = ("No ceiling sweep was recorded (the spot gate or its sweep was not running): here the replay could "
            "neither pause nor resume on the ceiling, and read the windows only at admissions.")


def gaps(since: datetime, until: datetime, not_recorded_until: datetime | None,
         sweeps: list[datetime]) -> list[tuple[datetime, datetime, str]]:
    """The periods of [since, until) the record lacks what the replay needs: the gate's inputs (up
    to the newest decision recorded without them), and the ceiling sweeps (more than SWEEP_GAP
    apart); the first GAPS_LISTED, the last of them saying how many more there are."""
    out: list[tuple[datetime, datetime, str]] = []
    start = since
    if not_recorded_until is not None:
        start = min(until, not_recorded_until + timedelta(microseconds=1))
        out.append((since, start, NOT_RECORDED))
    prev = start
    for at in sweeps:
        if at < start:
            continue
        if at - prev > SWEEP_GAP:
            out.append((prev, at, NO_SWEEP))
        prev = at
    if until - prev > SWEEP_GAP:
        out.append((prev, until, NO_SWEEP))
    if len(out) > GAPS_LISTED:
        more = len(out) - GAPS_LISTED + 1
        first, _, _ = out[GAPS_LISTED - 1]
        out = out[:GAPS_LISTED - 1] + [(first, out[-1][1], f"{NO_SWEEP} ({more} such periods from here on)")]
    return out
