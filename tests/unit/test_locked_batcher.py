"""`LockedBatcher`: a batch takes its requests once it holds its lock, and the next one queues on
that lock meanwhile (the backlog's appends; bench/README "Profile of the append path")."""

from __future__ import annotations

import asyncio
import time

import pytest

from zimmer_common import deadline
from zimmer_common.batching import LockedBatcher, Take
from zimmer_common.errors import ErrorCode, ZimmerError


class Lane:
    """A run that holds `lock` (the database's advisory lock, in miniature) from before it takes
    until `release` is set, recording what each batch took and how many runs waited at once."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.release = asyncio.Event()
        self.taken: list[list[int]] = []
        self.waiting = 0
        self.most_waiting = 0
        self.deadlines: list[float | None] = []

    async def run(self, take: Take[int]) -> list[int]:
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        async with self.lock:
            self.waiting -= 1
            batch = take()
            self.taken.append(batch)
            self.deadlines.append(deadline.current())
            await self.release.wait()
            return [n * 10 for n in batch]


async def test_the_next_batch_takes_everything_that_arrived_while_the_lock_was_held() -> None:
    lane = Lane()
    batcher: LockedBatcher[int, int] = LockedBatcher(lane.run, max_batch=10)
    first = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.01)
    later = [asyncio.create_task(batcher.submit(n)) for n in (1, 2, 3)]
    await asyncio.sleep(0.01)
    later.append(asyncio.create_task(batcher.submit(4)))  # joins the batch already waiting: no third run
    await asyncio.sleep(0.01)
    assert lane.taken == [[0]] and lane.waiting == 1
    lane.release.set()
    assert await first == 0 and [await t for t in later] == [10, 20, 30, 40]
    assert lane.taken == [[0], [1, 2, 3, 4]]
    assert lane.most_waiting == 1  # one batch ran, one queued on the lock, never more


async def test_more_than_a_batch_is_served_in_order_by_successive_batches() -> None:
    lane = Lane()
    lane.release.set()
    batcher: LockedBatcher[int, int] = LockedBatcher(lane.run, max_batch=3)
    done = await batcher.submit_many(list(range(8)))
    assert [f.result() for f in done] == [n * 10 for n in range(8)]
    assert lane.taken == [[0, 1, 2], [3, 4, 5], [6, 7]]


async def test_a_batch_runs_under_its_earliest_deadline_and_skips_callers_past_theirs() -> None:
    lane = Lane()
    batcher: LockedBatcher[int, int] = LockedBatcher(lane.run)
    holding = asyncio.create_task(batcher.submit(0))  # no deadline: holds the lock
    await asyncio.sleep(0.01)
    soon, later = time.time() + 30, time.time() + 60
    with deadline.use(time.time() - 1):
        expired = asyncio.create_task(batcher.submit(1))
    with deadline.use(later):
        b = asyncio.create_task(batcher.submit(2))
    with deadline.use(soon):
        c = asyncio.create_task(batcher.submit(3))
    await asyncio.sleep(0.01)
    lane.release.set()
    assert await holding == 0 and await b == 20 and await c == 30
    with pytest.raises(deadline.DeadlinePassed):
        await expired
    assert lane.taken == [[0], [2, 3]]  # the expired caller never ran
    assert lane.deadlines == [None, soon]
    assert deadline.current() is None  # the batch's deadline stayed in its own task


async def test_a_batch_that_fails_before_taking_fails_the_requests_it_would_have_taken() -> None:
    calls: list[str] = []

    async def run(take: Take[int]) -> list[int]:
        if not calls:
            calls.append("down")
            raise ZimmerError(ErrorCode.UNAVAILABLE, "database unavailable")
        calls.append("up")
        return take()

    batcher: LockedBatcher[int, int] = LockedBatcher(run)
    with pytest.raises(ZimmerError) as info:
        await batcher.submit(1)
    assert info.value.code is ErrorCode.UNAVAILABLE
    assert await batcher.submit(2) == 2  # the next request gets a batch of its own
    assert calls == ["down", "up"] and batcher.depth == 0


async def test_a_run_that_never_takes_fails_its_requests_rather_than_leaving_them_waiting() -> None:
    async def run(_take: Take[int]) -> list[int]:
        return []

    batcher: LockedBatcher[int, int] = LockedBatcher(run)
    with pytest.raises(AssertionError, match="without taking"):
        await asyncio.wait_for(batcher.submit(1), 5)


async def test_the_bound_holds_for_requests_waiting_on_the_lock() -> None:
    lane = Lane()
    batcher: LockedBatcher[int, int] = LockedBatcher(lane.run, max_pending=2)
    first = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.01)
    waiting = [asyncio.create_task(batcher.submit(n)) for n in (1, 2)]
    await asyncio.sleep(0.01)
    with pytest.raises(ZimmerError) as info:
        await batcher.submit(3)
    assert info.value.code is ErrorCode.BUSY and info.value.retry_safe
    lane.release.set()
    assert await first == 0 and [await w for w in waiting] == [10, 20]
