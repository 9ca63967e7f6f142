"""Ranking of the work backlog: where an item sits on the precedence scale.

Seed 000 "The work backlog", section "Ranking": shortest work near the top; `precedence` is an
absolute, sparse scale (higher is pulled sooner) and an ordinary append renumbers nothing.
DESIGN §9 "Re-space" fixes the arithmetic the seed leaves open.

Pure: every function takes the queued items and returns what should change; the store reads the
queue and writes the returned moves under its transaction-scoped advisory lock (seed: "two gates
appending at once serialise instead of both computing '10 below the lowest peer' from the same
snapshot"). A function that raises has produced nothing, so no row moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

Cost = Literal["small", "medium", "large"]

# Seed: "An append lands 10 below the lowest unpinned peer". Sparse on purpose, so an ordinary
# append never renumbers anything.
STEP = 10


@dataclass(frozen=True)
class Band:
    """The precedence range an unpinned item of one estimated_cost lives in (seed table)."""

    cost: Cost
    floor: int
    top: int
    base: int

    def contains(self, precedence: int) -> bool:
        return self.floor <= precedence <= self.top

    @property
    def capacity(self) -> int:
        """How many unpinned items the band holds before `BandFull`.

        A re-space of n items plus the append needs spacing (base − floor)/(n + 1) ≥ 1
        (DESIGN §9), i.e. n + 1 ≤ base − floor.
        """
        return self.base - self.floor


# Seed table "estimated_cost / Band / Base". The bands do not overlap, so a band's members can
# never be confused with a neighbour's, and small always ranks above medium above large.
BANDS: dict[str, Band] = {
    "small": Band("small", floor=5000, top=6999, base=6000),
    "medium": Band("medium", floor=2000, top=3999, base=3000),
    "large": Band("large", floor=500, top=1999, base=1000),
}


class BandFull(Exception):
    """A band a re-space cannot make room in (seed: it "raises, before any row moves, rather
    than crossing into the band below, because crossing would silently rank cheap work below
    expensive work")."""

    def __init__(self, band: Band, count: int) -> None:
        self.band = band
        self.cost: Cost = band.cost
        self.count = count
        super().__init__(
            f"band_full: the {band.cost} band ({band.floor}–{band.top}) already holds {count} "
            f"unpinned items; a re-space cannot make room (capacity {band.capacity})"
        )


@dataclass(frozen=True)
class RankedItem:
    """One queued row as ranking sees it (only queued rows are ever passed in)."""

    id: int
    cost: Cost
    precedence: int
    pinned: bool
    added_at: datetime


@dataclass(frozen=True)
class Placement:
    """Where an appended item lands, and the re-space moves of existing items (id → precedence)
    that must be written with it."""

    precedence: int
    moves: dict[int, int] = field(default_factory=dict)


def band_of(cost: str) -> Band:
    try:
        return BANDS[cost]
    except KeyError:
        known = ", ".join(BANDS)
        raise ValueError(f"unknown estimated_cost {cost!r}; expected one of {known}") from None


def _pull_key(item: RankedItem) -> tuple[int, datetime, int]:
    # Ties on precedence go to the oldest, then the lowest id, so the order is total and the
    # same on every call (a re-space "keeps their order" needs one order to keep).
    return (-item.precedence, item.added_at, item.id)


def pull_order(items: Iterable[RankedItem]) -> list[RankedItem]:
    """The order the groomer pulls in: precedence desc, then added_at asc, then id asc.

    Pinned items are included in their place: pinning is how a human puts an item somewhere on
    the scale, so it is pulled from wherever it was put.
    """
    return sorted(items, key=_pull_key)


def _peers(items: Iterable[RankedItem], band: Band) -> list[RankedItem]:
    # Seed: pinned items are "excluded from every peer set so one hand-placement cannot drag
    # future appends down with it"; an item outside the band has drifted and is no peer either.
    return pull_order(
        i for i in items if not i.pinned and i.cost == band.cost and band.contains(i.precedence)
    )


def _round_half_up(numerator: int, denominator: int) -> int:
    # Exact integer arithmetic, so 999·1000/1000 cannot come out as 998.999…; halves round up
    # (as Ruby's round, the seed's WorkBacklog::Ranking, does) rather than to even like Python's.
    return (2 * numerator + denominator) // (2 * denominator)


def _respace(peers: Sequence[RankedItem], band: Band) -> Placement:
    """DESIGN §9: peers move to base − round(i·(base − floor)/(n + 1)), i = 0…n−1, and the next
    slot is base − round(n·(base − floor)/(n + 1)). Raises BandFull when that spacing is below
    1, because the positions would then collide."""
    n = len(peers)
    span = band.base - band.floor
    if n + 1 > span:
        raise BandFull(band, n)
    moves: dict[int, int] = {}
    for i, peer in enumerate(peers):
        target = band.base - _round_half_up(i * span, n + 1)
        if target != peer.precedence:
            moves[peer.id] = target
    return Placement(band.base - _round_half_up(n * span, n + 1), moves)


def _next_slot(items: Sequence[RankedItem], band: Band) -> Placement:
    peers = _peers(items, band)
    if not peers:
        return Placement(band.base)
    slot = peers[-1].precedence - STEP  # FIFO: below every earlier in-band peer
    if slot > band.floor:
        return Placement(slot)
    # Seed: "When the next slot would be at or below the floor, the band is re-spaced first".
    return _respace(peers, band)


def plan_append(items: Sequence[RankedItem], cost: str) -> Placement:
    """Where a new item of `cost` lands, with any re-space moves; BandFull if there is no room."""
    return _next_slot(items, band_of(cost))


def apply(items: Iterable[RankedItem], moves: Mapping[int, int]) -> list[RankedItem]:
    """The items with `moves` applied. Refuses to move a pinned item or an unknown id, since
    no ranking plan ever produces either (seed: "A pinned item is never touched by an agent")."""
    items = list(items)
    by_id = {i.id: i for i in items}
    if len(by_id) != len(items):
        raise ValueError("item ids must be unique")
    for item_id in moves:
        if item_id not in by_id:
            raise ValueError(f"move for unknown item {item_id}")
        if by_id[item_id].pinned:
            raise ValueError(f"item {item_id} is pinned; ranking never moves it")
    return [replace(i, precedence=moves[i.id]) if i.id in moves else i for i in items]


@dataclass(frozen=True)
class Rerank:
    moves: dict[int, int]  # id → new precedence, for every band that could make room
    full: dict[str, BandFull]  # cost → why that band's drifted items stay where they are


def plan_rerank(items: Sequence[RankedItem]) -> Rerank:
    """The corrections every writer applies after it writes (id → new precedence), band by band.

    Seed: "moving any unpinned item that has drifted out of its band back to 10 below its band's
    lowest peer, oldest first". Drift comes from unpinning a hand-placed item (or from an import);
    each correction sees the previous ones, and re-spaces or raises BandFull as an append would.
    Bands are independent (an item only ever moves within its own cost's band), so a band that
    cannot make room is reported in `full` and leaves its own items alone, while every other band
    is corrected (issue 9: one full band used to turn off re-ranking for all of them).

    Where the seed is silent: an item unpinned exactly on an unpinned peer's precedence has not
    drifted, but it breaks "values are distinct within a band" that FIFO and the re-space order
    rely on. Such a band is re-spaced (order kept, the tie going to the older item) rather than
    moving either item to the bottom, which would reorder items that were never hand-placed.
    """
    current = list(items)
    full: dict[str, BandFull] = {}
    for band in BANDS.values():
        try:
            current = _rerank_band(current, band)
        except BandFull as exc:
            full[band.cost] = exc
    before = {i.id: i.precedence for i in items}
    return Rerank({i.id: i.precedence for i in current if before[i.id] != i.precedence}, full)


def _rerank_band(items: list[RankedItem], band: Band) -> list[RankedItem]:
    current = items
    peers = _peers(current, band)
    if len({p.precedence for p in peers}) < len(peers):
        current = apply(current, _respace(peers, band).moves)
    drifted = sorted(
        (i for i in current if not i.pinned and i.cost == band.cost and not band.contains(i.precedence)),
        key=lambda i: (i.added_at, i.id),
    )
    for item in drifted:
        placement = _next_slot(current, band)
        current = apply(current, {**placement.moves, item.id: placement.precedence})
    return current


# ---- a batch of appends ------------------------------------------------------------------


@dataclass(frozen=True)
class NeedsBand:
    """The plan needs every queued item of `cost`, not only its lowest peer: a re-space moves the
    whole band. The caller reads them and plans again."""

    cost: str


@dataclass
class AppendPlan:
    """Per ask, in order: `precedence[i]` where it lands, or `conflict[i]` (the open row's id, or
    None for a key appended earlier in this batch), or `full[i]` (its band has no room). `moves`
    re-space stored rows (id → precedence); new rows never appear in it."""

    precedence: dict[int, int] = field(default_factory=dict)
    conflict: dict[int, int | None] = field(default_factory=dict)
    full: dict[int, BandFull] = field(default_factory=dict)
    moves: dict[int, int] = field(default_factory=dict)


def plan_batch(asks: Sequence[tuple[str, str]], taken: Mapping[str, int],
               bands: Mapping[str, tuple[Sequence[RankedItem], bool]], now: datetime) -> AppendPlan | NeedsBand:
    """Rank a batch of appends `asks` ((key, cost), in arrival order) as if appended one by one,
    each seeing the ones before it: one open row per key (`taken`: key → open row id), FIFO within
    a band, a re-space when the next slot reaches the floor, `band_full` before any move of that
    ask. `bands[cost]` is (queued items, complete?): the lowest peer alone serves an ordinary
    append; a re-space needs the whole band, so an incomplete one answers `NeedsBand`."""
    plan = AppendPlan()
    peers: dict[str, list[RankedItem]] = {cost: list(items) for cost, (items, _) in bands.items()}
    complete = {cost for cost, (_, whole) in bands.items() if whole}
    open_keys: dict[str, int | None] = dict(taken)
    for i, (key, cost) in enumerate(asks):
        if key in open_keys:
            plan.conflict[i] = open_keys[key]
            continue
        try:
            placement = plan_append(peers.get(cost, []), cost)
        except BandFull as exc:
            if cost not in complete:
                return NeedsBand(cost)
            plan.full[i] = exc
            continue
        if placement.moves and cost not in complete:
            return NeedsBand(cost)
        current = apply(peers.get(cost, []), placement.moves)
        for item_id, precedence in placement.moves.items():
            if item_id >= 0:
                plan.moves[item_id] = precedence
            else:
                plan.precedence[-item_id - 1] = precedence  # an earlier ask of this batch, re-spaced
        plan.precedence[i] = placement.precedence
        peers[cost] = current + [RankedItem(-i - 1, cost, placement.precedence, False, now)]
        open_keys[key] = None
    return plan
