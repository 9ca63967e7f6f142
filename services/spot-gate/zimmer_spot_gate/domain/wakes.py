"""Wall-clock wakes: "not before this time" (seed 004 "A pause is a floor, not a promotion").

One function says whether a wake has come: the firing job and every start guard read it, so a
guard can never disagree with the path that fires the wake. Past its moment a wake no longer
holds anything back, whether or not the job has fired it yet: the pause is a deferral, not a
cancellation."""

from __future__ import annotations

from datetime import datetime


def wake_due(wake_at: datetime, now: datetime) -> bool:
    return wake_at <= now


def paused_until(wake_at: datetime | None, now: datetime) -> datetime | None:
    """The moment a session is paused until, if a wall-clock pause is still ahead of it."""
    return wake_at if wake_at is not None and not wake_due(wake_at, now) else None


def refusal(session_id: int, wake_at: datetime) -> str:
    """The sentence both restart doors refuse with."""
    return (f"session {session_id} is paused until {wake_at.isoformat()} (a wall-clock pause): it does not start "
            "before then, whatever its precedence or class. Take the next candidate.")
