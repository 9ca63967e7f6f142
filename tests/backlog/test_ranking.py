"""Seed 000 "The work backlog", section "Ranking", and DESIGN §9 "Re-space".

Unit tests pin every rule and number of the seed; property tests run random sequences of
appends, pins, unpins, removals and pulls through the same steps the store takes (plan, apply,
re-rank) and check the invariants the seed promises after every write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zimmer_backlog.domain.ranking import (
    BANDS,
    STEP,
    Band,
    BandFull,
    Placement,
    RankedItem,
    apply,
    band_of,
    plan_append,
    plan_rerank,
    pull_order,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
COSTS = ("small", "medium", "large")


def item(id: int, cost: str, precedence: int, *, pinned: bool = False, age: int | None = None):
    """A queued row; `age` (minutes after T0) defaults to the id, so lower ids are older."""
    added_at = T0 + timedelta(minutes=id if age is None else age)
    return RankedItem(id, cost, precedence, pinned, added_at)


def append(items: list[RankedItem], cost: str) -> list[RankedItem]:
    """What the store does for an append: plan, write the re-space moves and the new row."""
    placement = plan_append(items, cost)
    new_id = max((i.id for i in items), default=0) + 1
    return apply(items, placement.moves) + [item(new_id, cost, placement.precedence)]


def appended(cost: str, count: int) -> list[RankedItem]:
    items: list[RankedItem] = []
    for _ in range(count):
        items = append(items, cost)
    return items


def precedences(items: list[RankedItem]) -> list[int]:
    return [i.precedence for i in items]


def design_respace(band: Band, n: int) -> tuple[list[int], int]:
    """DESIGN §9 computed independently with exact fractions, rounding halves up."""

    def rnd(x: Fraction) -> int:
        return int(x + Fraction(1, 2)) if x >= 0 else -int(-x + Fraction(1, 2))

    span = band.base - band.floor
    positions = [band.base - rnd(Fraction(i * span, n + 1)) for i in range(n)]
    return positions, band.base - rnd(Fraction(n * span, n + 1))


@cache
def full_band(cost: str) -> tuple[RankedItem, ...]:
    """A band filled by appends until the next one raises BandFull."""
    items: list[RankedItem] = []
    while True:
        try:
            items = append(items, cost)
        except BandFull:
            return tuple(items)


# ---------------------------------------------------------------------------------------------
# Bands


def test_bands_match_the_seed_table():
    assert band_of("small") == Band("small", floor=5000, top=6999, base=6000)
    assert band_of("medium") == Band("medium", floor=2000, top=3999, base=3000)
    assert band_of("large") == Band("large", floor=500, top=1999, base=1000)
    # Higher precedence is pulled sooner, so every small slot outranks every medium and large one.
    assert BANDS["small"].floor > BANDS["medium"].top and BANDS["medium"].floor > BANDS["large"].top


@pytest.mark.parametrize("cost", COSTS)
def test_band_contains_its_floor_and_top_inclusive(cost):
    band = band_of(cost)
    assert band.contains(band.floor) and band.contains(band.top) and band.contains(band.base)
    assert not band.contains(band.floor - 1) and not band.contains(band.top + 1)


def test_unknown_cost_is_refused():
    with pytest.raises(ValueError, match="huge"):
        band_of("huge")
    with pytest.raises(ValueError):
        plan_append([], "huge")


# ---------------------------------------------------------------------------------------------
# Appends


@pytest.mark.parametrize(("cost", "base"), [("small", 6000), ("medium", 3000), ("large", 1000)])
def test_first_append_lands_at_the_base(cost, base):
    assert plan_append([], cost) == Placement(base, {})


@pytest.mark.parametrize(("cost", "second"), [("small", 5990), ("medium", 2990), ("large", 990)])
def test_second_append_lands_ten_below(cost, second):
    assert STEP == 10
    assert precedences(appended(cost, 2)) == [band_of(cost).base, second]


def test_appends_are_first_in_first_out_within_a_band():
    items = appended("small", 5)
    assert precedences(items) == [6000, 5990, 5980, 5970, 5960]
    assert [i.id for i in pull_order(items)] == [1, 2, 3, 4, 5]


def test_an_ordinary_append_renumbers_nothing():
    assert plan_append(appended("medium", 30), "medium").moves == {}


def test_append_goes_below_the_lowest_peer_not_the_last_one_added():
    items = [item(1, "small", 6000), item(2, "small", 5500), item(3, "small", 5800)]
    assert plan_append(items, "small") == Placement(5490, {})


def test_peers_above_the_base_are_still_peers():
    # A hand-placed item unpinned at 6900 is in band and stays; the next append goes below it.
    assert plan_append([item(1, "small", 6900)], "small") == Placement(6890, {})


def test_other_costs_are_not_peers():
    items = appended("small", 3) + [item(10, "medium", 5100)]  # a drifted medium in the small band
    assert plan_append(items, "medium") == Placement(3000, {})
    assert plan_append(items, "small") == Placement(5970, {})


def test_cross_band_order_follows_cost_not_arrival():
    items = append(append(append([], "large"), "medium"), "small")
    assert [i.cost for i in pull_order(items)] == ["small", "medium", "large"]


# ---------------------------------------------------------------------------------------------
# Re-space (DESIGN §9)


def test_slot_just_above_the_floor_needs_no_respace():
    assert plan_append([item(1, "small", 5011)], "small") == Placement(5001, {})


def test_slot_at_the_floor_respaces_first():
    placement = plan_append([item(1, "small", 5010)], "small")
    # n = 1: the peer goes to the base, the append to 6000 − round(1000/2) = 5500.
    assert placement == Placement(5500, {1: 6000})


def test_respace_large_band_worked_example():
    items = appended("large", 50)
    assert precedences(items)[-1] == 510  # next slot would be 500, the floor
    placement = plan_append(items, "large")
    # spacing 500/51 ≈ 9.80: i=1 → 990 (unchanged), i=25 → 1000 − round(245.10) = 755,
    # i=49 → 1000 − round(480.39) = 520; the append → 1000 − round(490.20) = 510.
    assert placement.precedence == 510
    assert placement.moves[26] == 755 and placement.moves[50] == 520
    assert 1 not in placement.moves and 2 not in placement.moves  # unchanged rows are no moves
    after = apply(items, placement.moves)
    positions, slot = design_respace(band_of("large"), 50)
    assert precedences(after) == positions and slot == placement.precedence


def test_respace_small_band_worked_example():
    items = appended("small", 100)
    assert precedences(items)[-1] == 5010
    placement = plan_append(items, "small")
    after = apply(items, placement.moves)
    # spacing 1000/101 ≈ 9.90: i=50 → 6000 − round(495.05) = 5505, i=99 → 6000 − 980 = 5020.
    assert after[50].precedence == 5505 and after[99].precedence == 5020
    assert placement.precedence == 5010  # 6000 − round(990.10)
    assert precedences(after) == design_respace(band_of("small"), 100)[0]
    # Order is kept: the pull order after the re-space is the pull order before it.
    assert [i.id for i in pull_order(after)] == [i.id for i in pull_order(items)]


def test_respace_rounds_halves_up():
    # n = 15 over a span of 1000: i·62.5, so i=1 → 63 (not 62, as round-half-even would give).
    items = [item(i + 1, "small", 6000 - 10 * i) for i in range(14)] + [item(15, "small", 5005)]
    placement = plan_append(items, "small")
    after = apply(items, placement.moves)
    assert precedences(after)[:4] == [6000, 5937, 5875, 5812]
    assert placement.precedence == 6000 - 938
    assert (precedences(after), placement.precedence) == design_respace(band_of("small"), 15)


def test_respace_pulls_items_above_the_base_down_in_order():
    items = [item(1, "small", 6900), item(2, "small", 6500), item(3, "small", 5005)]
    placement = plan_append(items, "small")
    assert placement == Placement(5250, {1: 6000, 2: 5750, 3: 5500})


# ---------------------------------------------------------------------------------------------
# Capacity and BandFull


@pytest.mark.parametrize("cost", COSTS)
def test_how_many_appends_a_band_holds(cost):
    band = band_of(cost)
    held = len(full_band(cost))
    # DESIGN §9: spacing (base − floor)/(n + 1) ≥ 1 ⇔ n + 1 ≤ base − floor, so the band takes
    # base − floor items in all (the last append lands at floor + 1). The seed's "roughly 495"
    # is the right order of magnitude (hundreds, not tens or thousands): it matches the large
    # band (500); the small and medium bands, twice as wide below their base, hold 1000.
    assert held == band.capacity == band.base - band.floor
    assert held == {"small": 1000, "medium": 1000, "large": 500}[cost]
    assert 100 < held < 2000
    values = precedences(list(full_band(cost)))
    assert values == sorted(set(values), reverse=True)  # strictly decreasing: FIFO, distinct
    assert min(values) == band.floor + 1 and max(values) == band.base


def test_band_full_raises_before_any_row_moves():
    items = list(full_band("small"))
    snapshot = list(items)
    with pytest.raises(BandFull) as raised:
        plan_append(items, "small")
    assert raised.value.cost == "small" and raised.value.band == band_of("small")
    assert raised.value.count == 1000 and "small" in str(raised.value)
    assert items == snapshot


def test_a_full_band_never_crosses_into_the_band_below():
    items = list(full_band("small"))
    with pytest.raises(BandFull):
        plan_append(items, "small")
    # The other bands are unaffected and still take appends at their own base.
    assert plan_append(items, "medium") == Placement(3000, {})


def test_one_below_capacity_still_fits():
    items = list(full_band("large"))[:-1]
    placement = plan_append(items, "large")
    assert band_of("large").floor < placement.precedence


# ---------------------------------------------------------------------------------------------
# Pinned items


def test_a_pinned_item_low_in_the_band_does_not_drag_appends_down():
    items = [item(1, "small", 6000), item(2, "small", 5990), item(3, "small", 5100, pinned=True)]
    assert plan_append(items, "small") == Placement(5980, {})
    assert plan_append([item(1, "small", 5010, pinned=True)], "small") == Placement(6000, {})


def test_a_pinned_item_below_the_floor_is_left_there():
    items = appended("small", 2) + [item(9, "small", 12, pinned=True)]
    assert plan_append(items, "small") == Placement(5980, {})
    assert plan_rerank(items).moves == {}


def test_respace_never_moves_pinned_items():
    pinned = [item(900, "small", 5500, pinned=True), item(901, "small", 5001, pinned=True)]
    items = appended("small", 100) + pinned
    placement = plan_append(items, "small")
    assert placement.moves and not set(placement.moves) & {900, 901}
    # n counts only the 100 unpinned peers, so the numbers are those of the example above.
    assert placement.precedence == 5010


def test_apply_refuses_to_move_a_pinned_or_unknown_item():
    items = [item(1, "small", 6000, pinned=True)]
    with pytest.raises(ValueError, match="pinned"):
        apply(items, {1: 5990})
    with pytest.raises(ValueError, match="unknown"):
        apply(items, {2: 5990})


# ---------------------------------------------------------------------------------------------
# Pull order


def test_pull_order_precedence_then_oldest_then_id():
    items = [
        item(1, "large", 1000),
        item(2, "small", 5990, age=5),
        item(3, "small", 5990, age=1),
        item(4, "small", 5990, age=1),
        item(5, "medium", 6500, pinned=True),  # pulled in its hand-placed place
        item(6, "small", 6000),
    ]
    assert [i.id for i in pull_order(items)] == [5, 6, 3, 4, 2, 1]


# ---------------------------------------------------------------------------------------------
# Re-rank after every write


def test_rerank_of_a_tidy_queue_moves_nothing():
    items: list[RankedItem] = []
    for cost in ("small", "large", "small", "large", "small"):
        items = append(items, cost)
    items.append(item(50, "medium", 9, pinned=True))
    assert plan_rerank(items).moves == {}


def test_rerank_moves_drifted_items_back_oldest_first():
    items = appended("small", 2) + [
        item(10, "small", 9000, age=20),  # newer, drifted above the band
        item(11, "small", 100, age=-30),  # oldest, drifted below every band
    ]
    # The oldest goes first to 10 below the lowest peer; the next one sees it as a peer.
    assert plan_rerank(items).moves == {11: 5980, 10: 5970}


def test_rerank_each_correction_sees_the_previous_ones():
    items = [item(1, "medium", 9000, age=1), item(2, "medium", 10, age=2)]
    assert plan_rerank(items).moves == {1: 3000, 2: 2990}


def test_rerank_moves_an_item_sitting_in_another_cost_band():
    items = appended("medium", 2) + [item(9, "medium", 5500)]
    assert plan_rerank(items).moves == {9: 2980}


def test_rerank_respaces_when_the_slot_is_at_the_floor():
    items = [item(1, "large", 1000), item(2, "large", 505), item(3, "large", 3000)]
    # n = 2 peers over a span of 500: 1000, 1000 − round(166.7) = 833; the drifted one 667.
    assert plan_rerank(items).moves == {2: 833, 3: 667}


def test_rerank_into_a_full_band_reports_it_and_leaves_it():
    items = list(full_band("large")) + [item(9999, "large", 5)]
    snapshot = list(items)
    plan = plan_rerank(items)
    assert plan.full["large"].cost == "large" and plan.moves == {} and items == snapshot


def test_a_full_band_does_not_stop_the_other_bands_re_ranking():
    """Issue 9 #2: with the large band full, a medium item unpinned at 50 still goes back into
    the medium band; only the large band's drift is left (and reported)."""
    items = list(full_band("large")) + [item(9999, "large", 100), item(8888, "medium", 50, age=5)]
    plan = plan_rerank(items)
    assert set(plan.full) == {"large"}
    assert plan.moves == {8888: 3000}


def test_rerank_leaves_pinned_items_anywhere():
    items = [item(1, "small", 9999, pinned=True), item(2, "large", 5500, pinned=True)]
    assert plan_rerank(items).moves == {}


def test_rerank_separates_an_item_unpinned_onto_a_peer():
    # Where the seed is silent: a tie inside a band is re-spaced, order kept, older item first.
    items = appended("small", 3) + [item(9, "small", 5990, age=-1)]
    moves = plan_rerank(items).moves
    after = apply(items, moves)
    assert [i.id for i in pull_order(after)] == [1, 9, 2, 3]
    assert precedences(pull_order(after)) == [6000, 5800, 5600, 5400]


# ---------------------------------------------------------------------------------------------
# Properties over random sequences of operations


class Queue:
    """The store's side, in memory: every write plans, applies, then re-ranks; BandFull rolls
    the whole write back."""

    def __init__(self, items: list[RankedItem]) -> None:
        self.items = items
        self.next_id = max((i.id for i in items), default=0) + 1
        self.ever_pinned: set[int] = set()
        self.full_raised = 0

    def write(self, change, target: int | None = None, needs: str | None = None) -> None:
        before = list(self.items)
        try:
            changed = change(list(self.items))
            plan = plan_rerank(changed)
            if needs in plan.full:  # the write needed that band: refused, band_full
                raise plan.full[needs]
            after = apply(changed, plan.moves)
        except BandFull:
            self.full_raised += 1
            assert self.items == before  # nothing moved
            return
        self._check_pinned_stayed(before, after, target)
        self.items = after

    def append(self, cost: str) -> None:
        new = item(self.next_id, cost, 0)

        def change(items):
            placement = plan_append(items, cost)
            assert not any(i.pinned for i in items if i.id in placement.moves)
            placed = RankedItem(new.id, cost, placement.precedence, False, new.added_at)
            return apply(items, placement.moves) + [placed]

        band = band_of(cost)
        peers = [i.precedence for i in self.items
                 if not i.pinned and i.cost == cost and band.contains(i.precedence)]
        # BandFull exactly when a re-space is due and has no room: n + 1 > base − floor.
        full = bool(peers) and min(peers) - STEP <= band.floor and len(peers) >= band.capacity
        raised = self.full_raised
        self.write(change)
        self.next_id += 1
        assert (self.full_raised > raised) == full

    def pin(self, target: RankedItem, precedence: int) -> None:
        self.ever_pinned.add(target.id)
        self.write(lambda items: [
            RankedItem(i.id, i.cost, precedence, True, i.added_at) if i.id == target.id else i
            for i in items
        ], target=target.id)

    def unpin(self, target: RankedItem) -> None:
        self.write(lambda items: [
            RankedItem(i.id, i.cost, i.precedence, False, i.added_at) if i.id == target.id else i
            for i in items
        ], target=target.id, needs=target.cost)

    def remove(self, target: RankedItem) -> None:
        self.write(lambda items: [i for i in items if i.id != target.id])

    def pull(self) -> None:
        self.write(lambda items: pull_order(items)[1:])

    @staticmethod
    def _check_pinned_stayed(before, after, target) -> None:
        now = {i.id: i for i in after}
        for old in before:
            if old.pinned and old.id != target and old.id in now:
                assert now[old.id].pinned and now[old.id].precedence == old.precedence

    def check_invariants(self) -> None:
        unpinned = [i for i in self.items if not i.pinned]
        for i in unpinned:
            assert band_of(i.cost).contains(i.precedence), i
        for band in BANDS.values():
            inside = [i.precedence for i in unpinned if band.contains(i.precedence)]
            assert len(inside) == len(set(inside)), f"duplicate precedence in {band.cost}"
        for cost in COSTS:
            # FIFO among the items the agents alone have placed: a hand-placed item keeps the
            # place a human gave it, and one that drifted joins the end (seed: "oldest first").
            fifo = sorted(
                (i for i in unpinned if i.cost == cost and i.id not in self.ever_pinned),
                key=lambda i: (i.added_at, i.id),
            )
            values = precedences(fifo)
            assert values == sorted(values, reverse=True) and len(set(values)) == len(values)


costs = st.sampled_from(COSTS)
operations = st.one_of(
    st.tuples(st.just("append"), costs),
    st.tuples(st.just("append"), costs),
    st.tuples(st.just("pin"), st.integers(0, 10**6), st.integers(-1000, 9999)),
    # Pin onto (or right next to) another item's precedence, so unpins land on peers.
    st.tuples(st.just("pin_on"), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(-1, 1)),
    st.tuples(st.just("unpin"), st.integers(0, 10**6)),
    st.tuples(st.just("remove"), st.integers(0, 10**6)),
    st.tuples(st.just("pull")),
)


def run(queue: Queue, ops) -> None:
    queue.check_invariants()
    for op in ops:
        items, kind = queue.items, op[0]
        pinned = [i for i in items if i.pinned]
        if kind == "append":
            queue.append(op[1])
        elif kind == "pin" and items:
            queue.pin(items[op[1] % len(items)], op[2])
        elif kind == "pin_on" and items:
            queue.pin(items[op[1] % len(items)], items[op[2] % len(items)].precedence + op[3])
        elif kind == "unpin" and pinned:
            queue.unpin(pinned[op[1] % len(pinned)])
        elif kind == "remove" and items:
            queue.remove(items[op[1] % len(items)])
        elif kind == "pull" and items:
            queue.pull()
        queue.check_invariants()


@settings(max_examples=300, deadline=None)
@given(st.lists(operations, max_size=60))
def test_invariants_hold_over_random_operations(ops):
    run(Queue([]), ops)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(costs, st.integers(0, 3), st.lists(operations, max_size=25))
def test_invariants_hold_next_to_a_full_band(cost, headroom, ops):
    # Start a few appends short of BandFull, so random sequences reach it and roll it back.
    start = list(full_band(cost))
    queue = Queue(start[: len(start) - headroom])
    run(queue, ops)


def test_a_full_band_rolls_the_write_back():
    queue = Queue(list(full_band("medium")))
    before = list(queue.items)
    queue.append("medium")
    assert queue.full_raised == 1 and queue.items == before
    # Pin one item out of the band, fill its place with an append, then unpin it: it has
    # drifted into a full band, so the unpin is refused and it stays pinned where it was put.
    queue.pin(before[0], 7)
    queue.append("medium")
    assert queue.full_raised == 1 and len(queue.items) == len(before) + 1
    queue.unpin(next(i for i in queue.items if i.pinned))
    assert queue.full_raised == 2
    assert [i for i in queue.items if i.pinned] == [item(1, "medium", 7, pinned=True)]
    queue.check_invariants()
