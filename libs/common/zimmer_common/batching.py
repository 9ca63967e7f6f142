"""Natural batching of concurrent requests (plumbing).

Requests that arrive while a batch is being processed wait and form the next batch: no added
delay when idle, and under load one transaction (one lock acquisition, a handful of statements)
serves many callers. Each caller gets its own outcome; an exception for the whole batch reaches
every caller in it.

Bounded: at most `max_pending` requests wait; beyond that `submit` answers `busy` at once,
having done nothing. Deadlines: each request keeps the deadline it was submitted under; one
whose deadline passed while it waited is answered `unavailable` without running, and a batch
runs under the earliest deadline of its members, so its commit (refused past that deadline by
the commit guard) never outlives a caller that gave up.

`LockedBatcher` is the same for a batch that serializes on a database lock: it takes its
requests once it holds the lock, so the next batch can already be waiting on that lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from zimmer_common import deadline
from zimmer_common.errors import ErrorCode, ZimmerError

Req = TypeVar("Req")
Out = TypeVar("Out")

DEFAULT_MAX_PENDING = 1000


class Batcher(Generic[Req, Out]):
    def __init__(self, run: Callable[[list[Req]], Awaitable[list[Out]]], max_batch: int = 100,
                 max_pending: int = DEFAULT_MAX_PENDING, name: str = "batch",
                 on_depth: Callable[[int], None] = lambda depth: None):
        self._run = run
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.name = name
        self.on_depth = on_depth
        self.on_batch: Callable[[int], None] = lambda size: None
        self._pending: list[tuple[Req, asyncio.Future[Out], float | None]] = []
        self._draining: asyncio.Task[None] | None = None

    def bound(self, max_pending: int, name: str, on_depth: Callable[[int], None],
              on_batch: Callable[[int], None] = lambda size: None) -> None:
        """Wiring: the configured bound, the name `busy` answers use, a depth gauge and a
        batch-size observer (how many requests each transaction served)."""
        self.max_pending, self.name, self.on_depth, self.on_batch = max_pending, name, on_depth, on_batch

    @property
    def depth(self) -> int:
        return len(self._pending)

    async def submit(self, request: Req) -> Out:
        future = self._enqueue([request])[0]
        return await future

    async def submit_many(self, requests: list[Req]) -> list[asyncio.Future[Out]]:
        """`submit` for several requests at once, in order; returns each one's future, done: its
        outcome, or the exception that refused it (its deadline passed while it waited, its batch
        failed). Beyond the bound none of them is taken (`busy`, nothing done)."""
        futures = self._enqueue(requests)
        await asyncio.gather(*futures, return_exceptions=True)  # cancelled with this call, as `submit`'s wait is
        return futures

    def _enqueue(self, requests: list[Req]) -> list[asyncio.Future[Out]]:
        if len(self._pending) + len(requests) > self.max_pending:
            raise ZimmerError(ErrorCode.BUSY, f"{self.name}: {len(self._pending)} requests are already waiting "
                              f"(at most {self.max_pending}); nothing was done, retry shortly", {"retry_safe": True})
        loop = asyncio.get_running_loop()
        due = deadline.current()
        futures: list[asyncio.Future[Out]] = [loop.create_future() for _ in requests]
        self._pending.extend((request, future, due) for request, future in zip(requests, futures, strict=True))
        self.on_depth(len(self._pending))
        self._wake()
        return futures

    def _wake(self) -> None:
        if self._draining is None or self._draining.done():
            # The drain task serves many callers: none of their deadlines or identities is its
            # own (it sets each batch's deadline; requests carry what they need of the caller).
            with deadline.use(None), deadline.as_caller(None):
                self._draining = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        # Let requests that arrived in the same read from the network (already scheduled as
        # tasks) join this batch instead of the next: a few event-loop turns, no clock time.
        for _ in range(3):
            await asyncio.sleep(0)
        while self._pending:
            taken, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
            self.on_depth(len(self._pending))
            batch = self._live(taken)
            if not batch:
                continue
            self.on_batch(len(batch))
            due = min((d for _, _, d in batch if d is not None), default=None)
            try:
                with deadline.use(due):
                    outcomes = await self._run([request for request, _, _ in batch])
            except Exception as exc:  # noqa: BLE001 - the whole batch rolled back: every caller hears why
                _fail(batch, exc)
                continue
            _settle(batch, outcomes)

    @staticmethod
    def _live(taken: list[tuple[Req, asyncio.Future[Out], float | None]]) -> list[tuple[Req, asyncio.Future[Out], float | None]]:
        """Drop callers that gave up (cancelled) or whose deadline is too close to be met."""
        now = time.time()
        live = []
        for entry in taken:
            _, future, due = entry
            if future.done():
                continue
            if due is not None and due - now < deadline.MIN_BUDGET:
                future.set_exception(deadline.DeadlinePassed(
                    "the request's deadline passed while it waited for its batch; nothing was done"))
                continue
            live.append(entry)
        return live


Take = Callable[[], list[Req]]


class LockedBatcher(Batcher[Req, Out]):
    """A `Batcher` whose batch takes its requests once it holds what serializes batches (its
    transaction's lock), so the next batch waits for that lock while the current one still runs.

    `run(take)` opens its transaction, takes its lock, then calls `take()` for the requests to
    serve (possibly none: callers that gave up) and returns one outcome for each. As soon as a
    batch has taken, the next one may start: it queues on the lock in the database, and the moment
    the current batch commits it holds the lock and takes everything that arrived meanwhile. With
    `Batcher` the next batch could only begin (BEGIN, the lock: two round trips) after the current
    one's commit had come back. At most one batch is ever waiting to take, so batches are as large
    as before. `take` sets the batch's deadline (the earliest of its requests') for the rest of
    the run: its commit never outlives a caller that gave up. A run that fails before it takes
    fails the requests it would have taken, as a failed batch does.
    """

    def __init__(self, run: Callable[[Take[Req]], Awaitable[list[Out]]], **kwargs: Any):
        super().__init__(self._unused, **kwargs)
        self._run_taking = run
        self._opening = False  # a batch has started and not taken yet
        self._runs: set[asyncio.Task[None]] = set()

    @staticmethod
    async def _unused(_batch: list[Req]) -> list[Out]:
        raise AssertionError("a LockedBatcher runs its batches through run(take)")

    def _wake(self) -> None:
        if self._opening:
            return  # the batch waiting for the lock will take these too
        self._opening = True
        with deadline.use(None), deadline.as_caller(None):  # as the drain task: the run is nobody's
            task = asyncio.create_task(self._one())
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    async def _one(self) -> None:
        taken: list[tuple[Req, asyncio.Future[Out], float | None]] | None = None

        def take() -> list[Req]:
            nonlocal taken
            taken = []
            self._opening = False
            while self._pending and not taken:
                batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
                taken = self._live(batch)
            self.on_depth(len(self._pending))
            if self._pending:
                self._wake()  # more than one batch holds: the next queues on the lock now
            if taken:
                self.on_batch(len(taken))
            deadline.adopt(min((d for _, _, d in taken if d is not None), default=None))
            return [request for request, _, _ in taken]

        try:
            outcomes = await self._run_taking(take)
            if taken is None:
                raise AssertionError("the batch returned without taking its requests")
        except Exception as exc:  # noqa: BLE001 - the whole batch rolled back: every caller hears why
            if taken is None:
                take()  # what it would have taken hears why
            _fail(taken or [], exc)
            return
        _settle(taken, outcomes)


def _fail(batch: list[tuple[Any, asyncio.Future[Any], float | None]], exc: Exception) -> None:
    for _, future, _ in batch:
        if not future.done():
            future.set_exception(exc)


def _settle(batch: list[tuple[Any, asyncio.Future[Any], float | None]], outcomes: list[Any]) -> None:
    for (_, future, _), outcome in zip(batch, outcomes, strict=True):
        if not future.done():
            future.set_result(outcome)
