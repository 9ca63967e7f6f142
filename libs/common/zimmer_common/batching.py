"""Natural batching of concurrent requests (plumbing).

Requests that arrive while a batch is being processed wait and form the next batch: no added
delay when idle, and under load one transaction (one lock acquisition, a handful of statements)
serves many callers. Each caller gets its own outcome; an exception for the whole batch reaches
every caller in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Req = TypeVar("Req")
Out = TypeVar("Out")


class Batcher(Generic[Req, Out]):
    def __init__(self, run: Callable[[list[Req]], Awaitable[list[Out]]], max_batch: int = 100):
        self._run = run
        self.max_batch = max_batch
        self._pending: list[tuple[Req, asyncio.Future[Out]]] = []
        self._draining: asyncio.Task[None] | None = None

    async def submit(self, request: Req) -> Out:
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._pending.append((request, future))
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        # Let requests that arrived in the same read from the network (already scheduled as
        # tasks) join this batch instead of the next: a few event-loop turns, no clock time.
        for _ in range(3):
            await asyncio.sleep(0)
        while self._pending:
            batch, self._pending = self._pending[:self.max_batch], self._pending[self.max_batch:]
            try:
                outcomes = await self._run([request for request, _ in batch])
            except Exception as exc:  # noqa: BLE001 - the whole batch rolled back: every caller hears why
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if not future.done():
                    future.set_result(outcome)
