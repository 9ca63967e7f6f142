"""Ranking the spot queue by hand (seed 004 "Precedence: ranking the spot queue", "The Ranked
view"). Values are sparse on purpose, so there is room between entries: a row dropped between two
others takes their midpoint; where no midpoint exists (21 and 20) the neighbours are nudged one
apart each (22 and 19) and the row takes the middle of the gap. No cascade: a nudge may land a
neighbour on the value of the row beyond it, which is legal (ties break on created_at) and the next
drag separates them. Demoting to spot, or a "Run as spot" spawn, lands SLOT_GAP above the top of
the spot queue. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

SLOT_GAP = 5
INT32 = (-(2**31), 2**31 - 1)


def clamp(value: int) -> int:
    return max(INT32[0], min(INT32[1], value))


@dataclass(frozen=True)
class Placement:
    value: int
    nudged: dict[str, int] = field(default_factory=dict)  # "above" / "below" → its new precedence


def between(above: int | None, below: int | None) -> Placement:
    """Where a row dropped under `above` and over `below` lands (either may be None: the top or
    the bottom of the list)."""
    if above is None and below is None:
        raise ValueError("a row is dropped next to at least one neighbour")
    if above is None:
        assert below is not None
        return Placement(clamp(below + SLOT_GAP))
    if below is None:
        return Placement(clamp(above - SLOT_GAP))
    high, low = max(above, below), min(above, below)  # a stale page may hand them over swapped
    if high - low >= 2:
        return Placement(low + (high - low) // 2)
    high, low = clamp(high + 1), clamp(low - 1)
    return Placement(low + (high - low) // 2, {"above": high, "below": low} if above >= below else
                     {"above": low, "below": high})


def above_top_of_spot(top: int | None) -> int:
    """SLOT_GAP above the current top of the spot queue (0 when the queue is empty)."""
    return 0 if top is None else clamp(top + SLOT_GAP)
