"""Commands from the control plane (`zimmer.runtime.cmd.>` on the work-queue stream ZIMMER_RUNTIME):
delivered at least once, handled at most once per command id.

One durable pull consumer, shared by every instance of the runtime, fetches them. A command is
removed from the stream when acked. Not acked within `ack_wait` (the runtime died, the ack was
lost to a NATS restart), it is delivered again; a redelivery of a command this client already
handled is acked without reaching the handler again, so a handler runs once per command id for
as long as the client remembers it (`handled_commands_remembered`, in memory: a runtime that
restarts and must not repeat a command keeps its own record, keyed by `Command.id`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from zimmer_common.contracts.envelope import Payload
from zimmer_common.contracts.subjects import Stream, runtime_command_subject
from zimmer_runtime.envelopes import DecodedCommand, Undecodable, decode_command
from zimmer_runtime.metrics import RuntimeMetrics

log = logging.getLogger("zimmer_runtime.commands")

P = TypeVar("P", bound=Payload)
ALL_COMMANDS = runtime_command_subject(">")
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)
FETCH_WAIT = 1.0  # one fetch's wait for a command; the loop checks for a stop between fetches


class HandledCommands:
    """Ids of commands handled (acked), the newest `capacity` of them, and those being handled."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._done: OrderedDict[str, None] = OrderedDict()
        self.in_hand: set[str] = set()

    def __contains__(self, command_id: str) -> bool:
        return command_id in self._done

    def remember(self, command_id: str) -> None:
        self.in_hand.discard(command_id)
        self._done[command_id] = None
        self._done.move_to_end(command_id)
        while len(self._done) > self.capacity:
            self._done.popitem(last=False)


@dataclass
class Command(Generic[P]):
    """One command to obey. `payload` is a `StartTurn`, `StopTurn` or `SampleQuota`; `id` is the
    same on every delivery of it. Ack once it is obeyed (or durably taken over)."""

    id: str
    kind: str  # start_turn, stop_turn, sample_quota
    payload: P
    occurred_at: datetime
    delivered: int  # 1 on the first delivery
    _msg: Msg = field(repr=False)
    _inbox: CommandInbox = field(repr=False)
    _settled: bool = field(default=False, repr=False)

    async def ack(self) -> None:
        """Obeyed: the stream forgets it, and a redelivery (the ack lost) is acked unhandled."""
        if self._settled:
            return
        self._settled = True
        self._inbox.handled.remember(self.id)
        self._inbox.metrics.commands.labels(self.kind, "handled").inc()
        with contextlib.suppress(Exception):  # lost to a disconnect: redelivered, and acked as a duplicate then
            await self._msg.ack()

    async def nak(self, delay: float | None = None) -> None:
        """Not obeyed: deliver it again after `delay` (default: a growing backoff by delivery)."""
        if self._settled:
            return
        self._settled = True
        self._inbox.handled.in_hand.discard(self.id)
        self._inbox.metrics.commands.labels(self.kind, "failed").inc()
        wait = delay if delay is not None else RETRY_DELAYS[min(self.delivered, len(RETRY_DELAYS)) - 1]
        with contextlib.suppress(Exception):  # lost: redelivered after ack_wait all the same
            await self._msg.nak(delay=wait)

    async def in_progress(self) -> None:
        """Still working on it: restart the ack_wait clock (a long stop, a slow clone)."""
        with contextlib.suppress(Exception):
            await self._msg.in_progress()


class CommandInbox:
    def __init__(self, js: Callable[[], JetStreamContext], *, durable: str, ack_wait: float, max_ack_pending: int,
                 remembered: int, metrics: RuntimeMetrics, closing: asyncio.Event, admin_timeout: float):
        self._js = js
        self.durable = durable
        self.ack_wait = ack_wait
        self.max_ack_pending = max_ack_pending
        self.handled = HandledCommands(remembered)
        self.metrics = metrics
        self._closing = closing
        self._admin_timeout = admin_timeout
        self._sub: Any = None

    async def _subscription(self) -> Any:
        """The pull subscription, made once the stream exists (the control plane may start after
        the runtime): retried every second until it can be made or the client closes."""
        while self._sub is None and not self._closing.is_set():
            cfg = ConsumerConfig(durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT,
                                 deliver_policy=DeliverPolicy.ALL, ack_wait=self.ack_wait,
                                 max_ack_pending=self.max_ack_pending, filter_subject=ALL_COMMANDS)
            try:
                await self._js().add_consumer(Stream.RUNTIME.value, cfg, timeout=self._admin_timeout)
                self._sub = await self._js().pull_subscribe_bind(self.durable, stream=Stream.RUNTIME.value)
            except Exception as exc:  # noqa: BLE001 - no stream yet, disconnected, timed out
                log.warning("command consumer not ready; retrying", extra={"error": repr(exc)})
                await self._pause(1.0)
        return self._sub

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def __aiter__(self) -> AsyncIterator[Command[Any]]:
        while not self._closing.is_set():
            sub = await self._subscription()
            if sub is None:
                return
            try:
                msgs = await sub.fetch(8, timeout=FETCH_WAIT)
            except (TimeoutError, NatsTimeoutError):
                continue
            except Exception as exc:  # noqa: BLE001 - disconnected or reconnecting: try again shortly
                log.debug("command fetch failed", extra={"error": repr(exc)})
                await self._pause(0.5)
                continue
            for msg in msgs:
                command = await self._admit(msg)
                if command is not None:
                    yield command

    async def _admit(self, msg: Msg) -> Command[Any] | None:
        decoded = decode_command(msg.subject, msg.data)
        if isinstance(decoded, Undecodable):
            # Waiting will not make it readable; on a work queue nobody else would take it either.
            # ERROR without a page: the runtime is outside the control plane and has no pager; its
            # own logging (and zimmer_runtime_commands_total{outcome="refused"}) carries it.
            log.error("command refused and terminated", extra={"subject": msg.subject, "reason": decoded.reason})
            self.metrics.commands.labels(msg.subject.rsplit(".", 1)[-1], "refused").inc()
            with contextlib.suppress(Exception):
                await msg.term()
            return None
        if decoded.id in self.handled:
            self.metrics.commands.labels(decoded.kind, "duplicate").inc()
            with contextlib.suppress(Exception):
                await msg.ack()
            return None
        if decoded.id in self.handled.in_hand:
            # Redelivered while its handler still runs (past ack_wait): that handler's ack settles
            # it; keep this delivery from timing out meanwhile.
            self.metrics.commands.labels(decoded.kind, "duplicate").inc()
            with contextlib.suppress(Exception):
                await msg.in_progress()
            return None
        self.handled.in_hand.add(decoded.id)
        return _command(decoded, msg, self)


def _command(decoded: DecodedCommand, msg: Msg, inbox: CommandInbox) -> Command[Any]:
    delivered = msg.metadata.num_delivered if msg.metadata else 1
    return Command(id=decoded.id, kind=decoded.kind, payload=decoded.payload, occurred_at=decoded.occurred_at,
                   delivered=delivered, _msg=msg, _inbox=inbox)


CommandHandler = Callable[[Command[Any]], Awaitable[None]]


async def serve(inbox: CommandInbox, handler: CommandHandler, *, limit: int) -> None:
    """Run `handler` on each command, up to `limit` at once: returned, the command is acked;
    raised, it is nak'd with backoff and delivered again. A handler may ack or nak itself."""
    slots = asyncio.Semaphore(limit)
    running: set[asyncio.Task[None]] = set()

    async def one(command: Command[Any]) -> None:
        try:
            await handler(command)
        except Exception:  # noqa: BLE001 - the runtime's bug or a transient failure: delivered again
            log.warning("command handler failed; it will be delivered again", exc_info=True,
                        extra={"command": command.id, "kind": command.kind})
            await command.nak()
        else:
            await command.ack()
        finally:
            slots.release()

    try:
        async for command in inbox:
            await slots.acquire()
            task = asyncio.create_task(one(command), name=f"zimmer-runtime-command:{command.id}")
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        if running:
            await asyncio.wait(list(running), timeout=inbox.ack_wait)
