"""What one minute of the Quotas charts' history says about each window (issue 32 #4; seed 004 "Why a
curve rather than a target"): pooled utilization, where the pacing curve stands, the reserve and the
capacity, beside the fleet's counts and the events since the point before. Pure: the recorder
(`handlers.history`) reads the figures the policy view reads and hands them in.

The pacing curve is drawn where utilization would stand now had the window's spot budget been spent
at an even pace since the window started: `(1 - reserve) x elapsed / length`, elapsed being the
window's length less the pool's mean time to its reset. Below it the sustainable rate (spot budget
left / time left) is above the window's average; above it, below: the gate's pace check holds work
back until the curve catches up. Without a recorded reset the window's start is unknown, so there
is no curve (None), never a made-up one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from zimmer_spot_gate.domain.model import WINDOW_LENGTH, Window


def pacing(reserve: float, minutes_to_reset: float, length: timedelta, reset_known: bool = True) -> float | None:
    """The pacing curve's utilization now (0..1), or None when the window's reset is unknown."""
    if not reset_known:
        return None
    total = length.total_seconds() / 60
    elapsed = min(total, max(0.0, total - minutes_to_reset))
    return max(0.0, min(1.0, 1.0 - reserve)) * elapsed / total


@dataclass(frozen=True)
class WindowFigures:
    """One window as the pool reads now: None utilization when no account has a reading of it."""

    window: Window
    utilization: float | None
    minutes_to_reset: float | None
    reset_known: bool
    capacity_dollars: float | None


@dataclass(frozen=True)
class FleetFigures:
    running: int
    held: int
    paused: int
    holds: int  # events since the point before
    pauses: int
    resumes: int


def pool_points(windows: dict[Window, WindowFigures], reserve: dict[Window, float], fleet: FleetFigures,
                ) -> list[dict[str, Any]]:
    """One row per window (every window, read or not: the counts and events belong to the minute)."""
    rows = []
    for window in Window:
        figures = windows.get(window)
        r = reserve.get(window, 0.0)
        read = figures is not None and figures.utilization is not None
        rows.append({
            "window_name": window.value,
            "utilization": figures.utilization if read and figures else None,
            "pacing": pacing(r, figures.minutes_to_reset, WINDOW_LENGTH[window], figures.reset_known)
            if read and figures and figures.minutes_to_reset is not None else None,
            "reserve": r,
            "capacity_dollars": figures.capacity_dollars if figures else None,
            "running": fleet.running, "held": fleet.held, "paused": fleet.paused,
            "holds": fleet.holds, "pauses": fleet.pauses, "resumes": fleet.resumes,
        })
    return rows
