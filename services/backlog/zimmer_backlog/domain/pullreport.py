"""What a pull says it did, and which zero a pull of zero is (seed 000 "spot_held: why a pull
of zero is not always healthy"). Pure: the edge passes what happened and, when some of the
in-flight sessions are held at the spot gate, which ceiling spot-gate says is holding.

A pull of zero is a documented healthy outcome only when the ceiling is full of work being done.
So every zero names itself: the WIP ceiling is full; the queue is empty; every candidate was
removed; every start failed; none of the named keys is queued; and, when sessions are held at the
spot gate before their first turn, whether that is a busy fleet (fleet_cap) or an idle one behind
quota (spot_budget, pacing_curve), since the same count means opposite things.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from zimmer_common.contracts.backlog import Counts

UNKNOWN_CEILING = "unknown"  # spot-gate did not answer which ceiling holds


@dataclass(frozen=True)
class PullFacts:
    counts: Counts
    asked_count: int | None  # None: a pull by keys
    new: int  # sessions this pull started
    earlier: int  # rows named by key that an earlier pull started
    failed: int
    failed_codes: tuple[str, ...]
    removed_reasons: tuple[str, ...]
    not_removed: int
    candidates: int  # rows the pull took up (new + earlier + failed)
    wip_ceiling: int | None = None


def sentence(f: PullFacts, held_ceiling: str | None = None) -> str:
    c = f.counts
    flight = f"{c.in_flight} in flight" + (f" against a ceiling of {f.wip_ceiling}" if f.wip_ceiling is not None else "")
    tail = _removals(f)
    if f.new:
        earlier = f", {f.earlier} started earlier" if f.earlier else ""
        failed = f", {f.failed} failed to start ({_codes(f.failed_codes)})" if f.failed else ""
        return f"pulled {f.new}{earlier}{failed}{tail} — {flight}, {c.queued} still queued"
    if f.failed:
        why = (f"{f.failed} failed to start ({_codes(f.failed_codes)}); those marked retry_safe can be pulled "
               "again by key")
    elif f.earlier:
        why = f"{f.earlier} named {'was' if f.earlier == 1 else 'were'} started by an earlier pull"
    elif f.asked_count == 0:
        full = f.wip_ceiling is not None and c.in_flight >= f.wip_ceiling
        why = "the WIP ceiling is full" if full else "asked for none"
    elif f.asked_count is None:
        why = "none of the named keys is queued"
    elif f.removed_reasons and not c.queued:
        why = "everything it took up was removed and nothing is left queued"
    else:
        why = "the queue is empty"
    head = f"pulled 0{tail} — {why}; {flight}"
    if f.asked_count == 0 and why == "the WIP ceiling is full":
        head = f"pulled 0{tail} — {flight}"  # the seed's own sentence: the ceiling is the why
    if not c.spot_held:
        return head
    held = f"{c.spot_held} of those {'is' if c.spot_held == 1 else 'are'} held at the spot gate"
    if held_ceiling == UNKNOWN_CEILING or held_ceiling is None:
        return f"{head}, {held} (spot-gate did not say which ceiling holds)"
    if held_ceiling == "fleet_cap":
        return f"{head}, {held} on fleet_cap, so the fleet is busy"
    return f"{head}, but {held} on {held_ceiling}, so the fleet is idle behind quota rather than busy"


def _removals(f: PullFacts) -> str:
    parts = []
    if f.removed_reasons:
        by = Counter(f.removed_reasons)
        parts.append(f"removed {len(f.removed_reasons)} ({', '.join(f'{n} {r}' for r, n in sorted(by.items()))})")
    if f.not_removed:
        parts.append(f"refused to remove {f.not_removed}")
    return f", {', '.join(parts)}" if parts else ""


def _codes(codes: tuple[str, ...]) -> str:
    return ", ".join(f"{n} {code}" for code, n in sorted(Counter(codes).items()))
