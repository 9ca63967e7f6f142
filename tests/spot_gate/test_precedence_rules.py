"""Ranking the spot queue by hand (seed 004 "The Ranked view"): midpoint, the nudge, no cascade."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zimmer_spot_gate.domain.precedence import INT32, SLOT_GAP, Placement, above_top_of_spot, between


def test_the_seeds_examples() -> None:
    assert between(30, 20) == Placement(25)
    assert between(21, 20) == Placement(20, {"above": 22, "below": 19})  # 21 and 20 become 22 and 19
    assert between(20, 20) == Placement(20, {"above": 21, "below": 19})  # equal precedence is legal
    assert between(None, 7) == Placement(7 + SLOT_GAP) and between(7, None) == Placement(7 - SLOT_GAP)
    assert above_top_of_spot(100) == 105 and above_top_of_spot(None) == 0


@given(st.integers(*INT32), st.integers(*INT32))
def test_the_dropped_row_sits_between_its_neighbours_as_they_end_up(a: int, b: int) -> None:
    above, below = max(a, b), min(a, b)
    placed = between(above, below)
    new_above, new_below = placed.nudged.get("above", above), placed.nudged.get("below", below)
    assert new_below <= placed.value <= new_above
    assert INT32[0] <= placed.value <= INT32[1]
    if above - below >= 2:
        assert not placed.nudged and new_below < placed.value < new_above  # strictly between, nothing moved
    else:
        assert abs(new_above - above) <= 1 and abs(new_below - below) <= 1  # one apart each, no cascade
