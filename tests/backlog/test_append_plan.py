"""The append batch as a pure plan (`ranking.plan_batch`; issue 9 "Append batching as pure
planning"): a batch is exactly the appends done one by one, whatever the batch holds.

Hypothesis builds random queues (bands near their re-space point and near full, pinned items,
open keys) and random batches (repeated keys, mixed costs), plans the batch, and compares it
with `plan_append` applied ask by ask: the same precedences, the same re-space moves of stored
rows, the same conflicts and `band_full`s; and then checks FIFO within each band, one open row
per key, and that an ask refused for `band_full` moved nothing.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_ranking import COSTS, T0, appended, full_band, item  # tests/backlog on sys.path

from zimmer_backlog.domain.ranking import BANDS, BandFull, NeedsBand, RankedItem, apply, band_of, plan_append, plan_batch


def one_by_one(asks, taken, items):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """The reference: each ask planned against the queue as the previous ones left it."""
    items = list(items)
    taken = dict(taken)
    out: dict[int, object] = {}
    new_ids: dict[int, int] = {}
    next_id = -1
    for i, (key, cost) in enumerate(asks):
        if key in taken:
            out[i] = ("conflict", taken[key])
            continue
        try:
            placement = plan_append(items, cost)
        except BandFull:
            out[i] = ("full",)
            continue
        items = apply(items, placement.moves) + [RankedItem(next_id, cost, placement.precedence, False, T0)]
        new_ids[i] = next_id
        next_id -= 1
        taken[key] = None
    final = {i.id: i.precedence for i in items}
    for i, nid in new_ids.items():
        out[i] = ("placed", final[nid])
    return out, {i.id: final[i.id] for i in items if i.id >= 0}


@st.composite
def queues(draw):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    items: list[RankedItem] = []
    next_id = 1
    for cost in COSTS:
        shape = draw(st.sampled_from(["empty", "few", "near_respace", "full"]))
        band = list(full_band(cost)) if shape == "full" else appended(cost, {"empty": 0, "few": 3,
                                                                           "near_respace": 99}[shape])
        for it in band:
            items.append(item(next_id, cost, it.precedence))
            next_id += 1
    for _ in range(draw(st.integers(0, 3))):  # hand-placed items: nobody's peer, never moved
        items.append(item(next_id, draw(st.sampled_from(COSTS)), draw(st.integers(-100, 9000)), pinned=True))
        next_id += 1
    keys = [f"zimmer#{n}" for n in range(8)]
    taken = {k: 10_000 + n for n, k in enumerate(draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)))}
    asks = draw(st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(COSTS)), min_size=1, max_size=12))
    return items, taken, asks


def plan_with_loads(asks, taken, items):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """What the edge does: start from each band's lowest unpinned in-band peer, load a whole band
    when the plan says it needs it."""
    bands = {}
    for cost in COSTS:
        band = band_of(cost)
        peers = sorted((i for i in items if i.cost == cost and not i.pinned and band.contains(i.precedence)),
                       key=lambda i: (i.precedence, -i.added_at.timestamp()))
        bands[cost] = ([peers[0]], False) if peers else ([], False)
    loads = 0
    while isinstance(plan := plan_batch(asks, taken, bands, T0), NeedsBand):
        bands[plan.cost] = ([i for i in items if i.cost == plan.cost], True)
        loads += 1
        assert loads <= len(BANDS)
    return plan


@given(queues())
@settings(max_examples=300, deadline=None)
def test_a_batch_is_the_appends_one_by_one(case) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    items, taken, asks = case
    plan = plan_with_loads(asks, taken, items)
    expected, stored_after = one_by_one(asks, taken, items)
    for i in range(len(asks)):
        kind = expected[i][0]
        if kind == "placed":
            assert plan.precedence[i] == expected[i][1], i
        elif kind == "conflict":
            assert i in plan.conflict and plan.conflict[i] == expected[i][1]
        else:
            assert i in plan.full
    before = {i.id: i.precedence for i in items}
    assert {k: v for k, v in plan.moves.items() if before[k] != v} == {
        k: v for k, v in stored_after.items() if before[k] != v}
    pinned = {i.id for i in items if i.pinned}
    assert not pinned & set(plan.moves)
    placed_keys = [asks[i][0] for i in plan.precedence]
    assert len(placed_keys) == len(set(placed_keys)) and not set(placed_keys) & set(taken)
    for cost in COSTS:  # FIFO: this batch's items of a band land in ask order, below the band's older ones
        mine = [plan.precedence[i] for i in sorted(plan.precedence) if asks[i][1] == cost]
        assert mine == sorted(mine, reverse=True) and len(set(mine)) == len(mine)


def test_band_full_before_any_move() -> None:
    items = list(full_band("large"))
    plan = plan_with_loads([("zimmer#1", "large"), ("zimmer#2", "small")], {}, items)
    assert set(plan.full) == {0} and plan.moves == {} and plan.precedence == {1: 6000}
