"""REST appends go to the backlog together: one `append_items` RPC for the appends that arrive at
once, instead of one `append_item` each (issue 9: the bus round trip, its envelopes and the
backlog's handling of each request were a large share of the CPU an append costs).

Each append keeps what it would have had alone:

- its own answer, result or refusal, and its own idempotency key, scoped to its own caller;
- its deadline: a batch is sent under the earliest deadline among its appends (so the backlog
  commits it before every one of them or not at all), and an append whose deadline leaves too
  little to ask the backlog when its batch leaves is refused there, retry-safe with `sent: false`,
  exactly as a request that could not be sent;
- a 503 still means nothing happened for it: its batch was refused or not answered (`sent` says
  which), or it never left.

No delay is added: a batch leaves after a few event-loop turns (what arrived from the network in
the same turns), and batches do not wait for one another. A batch holds at most
`APPEND_MANY_MAX` appends and fits one bus message; an append too large for one goes alone and
gets the answer a single request gets.

Each append is serialised once, on arrival: its JSON measures it for packing and is the bytes the
batch's request is written from. The backlog's answer is read as JSON, not validated again (the
backlog's own contract wrote it), and each append's result goes back as the bytes of its HTTP body.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import from_json, to_json

from zimmer_common import deadline
from zimmer_common.bus import Bus, no_time_left
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.envelope import RpcErrorBody
from zimmer_common.errors import ErrorCode, ZimmerError

# Event-loop turns a batch waits for the appends read from the network with its first one.
GATHER_TURNS = 3
# An append with less time than this to ask the backlog is refused before its batch leaves: the
# batch's own budget, taken a moment later, must not fall under the bus's minimum.
LEAVE_MARGIN = deadline.MIN_BUDGET + 0.01
# Bytes of a batch around each append's own JSON ({"item":…,"caller":"…"}, a comma) beside its caller.
ENTRY_ROOM = 32
_UNANSWERED = RpcErrorBody(code=ErrorCode.INTERNAL.value, message="internal error: the append's batch ended "
                           "without its answer")


# An append as the contract's `AppendItem` (a route's body subclass serialises as the contract).
_ITEM = TypeAdapter(c.AppendItem)


@dataclass(frozen=True)
class _Waiting:
    item: c.AppendItem
    caller: str | None
    due: float | None
    json: bytes  # `{"item":…,"caller":…}`, as `CallerAppend` serialises it
    answer: asyncio.Future[bytes]

    @property
    def size(self) -> int:
        return len(self.json) + ENTRY_ROOM


class Appends:
    def __init__(self, bus: Callable[[], Bus | None]):
        self._bus = bus
        self._waiting: list[_Waiting] = []
        self._gathering = False
        self._batches: set[asyncio.Task[None]] = set()

    async def append(self, item: c.AppendItem) -> c.AppendResult:
        """Append `item` for the caller and under the deadline of the request being served."""
        return c.AppendResult.model_validate_json(await self.append_json(item))

    async def append_json(self, item: c.AppendItem) -> bytes:
        """`append`, answered with the result's JSON (the REST route's body, as it is)."""
        bus = self._bus()
        if bus is None:
            raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        caller = deadline.current_caller()
        entry = b'{"item":' + _ITEM.dump_json(item) + b',"caller":' + to_json(caller) + b"}"
        self._waiting.append(_Waiting(item, caller, deadline.current(), entry, answer))
        if not self._gathering:
            self._gathering = True
            # The batch serves many callers: none of their deadlines or identities is its own.
            with deadline.use(None), deadline.as_caller(None):
                self._track(asyncio.create_task(self._gather(bus)))
        return await answer

    def _track(self, task: asyncio.Task[None]) -> None:
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _gather(self, bus: Bus) -> None:
        for _ in range(GATHER_TURNS):
            await asyncio.sleep(0)
        waiting, self._waiting, self._gathering = self._waiting, [], False
        with _answering(waiting):
            *others, last = _packed(waiting, bus.payload_room())
        for batch in others:
            self._track(asyncio.create_task(self._send(bus, batch)))
        await self._send(bus, last)

    async def _send(self, bus: Bus, batch: list[_Waiting]) -> None:
        with _answering(batch):
            leaving = _leaving(batch, bus)
            if not leaving:
                return
            request = b'{"appends":[' + b",".join(e.json for e in leaving) + b"]}"  # `AppendMany`'s JSON
            try:
                with deadline.use(min((e.due for e in leaving if e.due is not None), default=None)):
                    data = await bus.request_raw(c.APPEND_MANY, request)
            except ZimmerError as exc:  # the whole batch: refused before it left, or sent and not answered
                for entry in leaving:
                    _refuse(entry, ZimmerError(exc.code, exc.message, dict(exc.details)))
                return
            outcomes: list[dict[str, Any]] = from_json(data)["outcomes"]  # `AppendManyResult`, as the backlog wrote it
            for entry, outcome in zip(leaving, outcomes, strict=True):
                if outcome.get("result") is not None:
                    _settle(entry, outcome["result"])
                else:
                    error = outcome.get("error") or _UNANSWERED.model_dump()
                    _refuse(entry, ZimmerError(error["code"], error["message"], error.get("details") or {}))


def _packed(waiting: list[_Waiting], room: int) -> list[list[_Waiting]]:
    """`waiting` in order, in batches of at most `APPEND_MANY_MAX` that fit in `room` bytes (an
    append larger than that alone makes a batch of its own)."""
    batches: list[list[_Waiting]] = [[]]
    size = 0
    for entry in waiting:
        if batches[-1] and (len(batches[-1]) == c.APPEND_MANY_MAX or size + entry.size > room):
            batches.append([])
            size = 0
        batches[-1].append(entry)
        size += entry.size
    return batches


def _leaving(batch: list[_Waiting], bus: Bus) -> list[_Waiting]:
    """The appends of `batch` still waiting for their answer that have time left to ask the
    backlog; the others are refused as a request that could not be sent is (`Bus.request`),
    nothing done. When the earliest deadline leaves time, every one does."""
    waiting = [entry for entry in batch if not entry.answer.done()]
    earliest = min((entry.due for entry in waiting if entry.due is not None), default=None)
    if earliest is None or _budget(earliest, bus) >= LEAVE_MARGIN:
        return waiting
    leaving = []
    for entry in waiting:
        if entry.due is None or _budget(entry.due, bus) >= LEAVE_MARGIN:
            leaving.append(entry)
        else:
            _refuse(entry, no_time_left(c.APPEND))
    return leaving


def _budget(due: float, bus: Bus) -> float:
    """What `Bus.request` would give an RPC made now for a request due at `due`."""
    with deadline.use(due):
        return deadline.inner_deadline(bus.rpc_timeout) - time.time()


@contextlib.contextmanager
def _answering(entries: list[_Waiting]) -> Iterator[None]:
    """No append waits forever: when the work on `entries` fails (a bug, the gateway stopping),
    each of them not answered yet is answered `internal`."""
    try:
        yield
    except BaseException:
        for entry in entries:
            _refuse(entry, ZimmerError(_UNANSWERED.code, _UNANSWERED.message))
        raise


def _settle(entry: _Waiting, result: dict[str, Any]) -> None:
    """The append's own answer (an `AppendResult`'s JSON), with the payload it sent: `append_items`
    answers leave payloads out so that a batch's answer always fits the bus; the row holds exactly
    what was sent."""
    item = result["item"]
    if item.get("payload_omitted"):
        item["payload"] = entry.item.payload
        item["payload_omitted"] = False
    if not entry.answer.done():
        entry.answer.set_result(to_json(result))


def _refuse(entry: _Waiting, exc: BaseException) -> None:
    if not entry.answer.done():
        entry.answer.set_exception(exc)
