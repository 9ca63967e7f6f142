"""How long a lane's work has waited, when its ticks coalesce (issue 26; seed 003 "Queues", "When
nothing is executing"; DESIGN §4).

ZIMMER_JOBS keeps one message per job subject, and a new tick replaces the one waiting: a lane
that has stopped draining keeps a flat depth (its number of jobs) and a head whose age is the
newest tick's, never older than its cadence. Neither ever crosses a threshold. So a lane's age is
the time since it last finished anything while it had work waiting: from the lane's last finish
(the consumer's ack floor; its creation when it never finished), the first tick each waiting job
owed after it, by that job's own cadence. Pure: the cadence's next fire time comes in as values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from zimmer_common.schedule import next_fire_times

# The service whose own jobs must never feed a monitor of them: the alerts service's health
# monitor, and its queue recovery expiry ticking on the auth lane every minute.
MONITOR_SERVICE = "alerts"


@dataclass(frozen=True)
class WaitingTick:
    """A message waiting on a lane: its time on the stream, and its schedule's cadence when it is a
    scheduled tick (None: enqueued by hand, so its own time is when it began waiting)."""

    at: datetime
    cadence: str | None = None


def _first_fire_after(cadence: str, since: datetime) -> datetime:
    return next_fire_times(cadence, since, 1)[0]


def waiting_since(last_finished: datetime | None, floor: datetime | None, ticks: Iterable[WaitingTick], *,
                  next_fire: Callable[[str, datetime], datetime] = _first_fire_after) -> datetime | None:
    """Since when the lane's ready work has waited with nothing finished: None when nothing waits.

    Each waiting tick has waited since the first fire its schedule owed after the lane last
    finished (or was created), or since its own time if that is earlier (a tick that arrived
    before the last finish has waited no longer than the lane has been idle: the max below)."""
    since = last_finished or floor
    starts = []
    for tick in ticks:
        start = tick.at
        if tick.cadence is not None and since is not None:
            start = min(start, next_fire(tick.cadence, since))
        starts.append(start)
    if not starts:
        return None
    first = min(starts)
    return max(first, last_finished) if last_finished is not None else first
