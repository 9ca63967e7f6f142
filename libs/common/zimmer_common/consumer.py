"""Typed, idempotent JetStream consumers: the receiving half of the outbox.

A `DurableConsumer` pulls from one durable consumer (shared by a service's replicas), decodes
each message as an `EventEnvelope`, and runs the handler inside a database transaction that
also records the envelope id in `processed_messages` (`claim_message`): a redelivery, or a
duplicate that outlived JetStream's dedupe window, changes nothing. The ack is sent only after
the transaction commits. A handler that fails is retried with a growing delay; a message that
cannot be decoded, or carries a newer contract version than this code knows, is terminated and
logged at ERROR rather than retried forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.subjects import Stream
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.logs import kv
from zimmer_common.outage import MESSAGE_BUS, Outages
from zimmer_common.outbox import claim_message, transaction
from zimmer_common.paging import PageFn, page_or_log

log = logging.getLogger("zimmer.consumer")

Handler = Callable[[AsyncConnection, EventEnvelope], Awaitable[None]]
RETRY_DELAYS = (1, 2, 5, 10, 30, 60)
PERMANENT = frozenset({ErrorCode.INVALID, ErrorCode.NOT_FOUND, ErrorCode.REFUSED})


@dataclass(frozen=True)
class ConsumerSpec:
    durable: str
    stream: Stream
    subjects: tuple[str, ...]
    # Highest contract version per event type this code understands; absent types: 1.
    max_versions: dict[str, int] | None = None
    batch: int = 20
    ack_wait_seconds: float = 30.0
    # Runs after a message's transaction commits (never before: a cache invalidated before the
    # commit can be refilled from the old rows by a concurrent reader).
    after_commit: Callable[[], None] | None = None


class InterruptibleFetch:
    """A pull fetch that a stop can cut short. Waiting for messages is the one wait a stopping
    loop should not sit out (the fetch's whole timeout, for every consumer in turn); a batch
    already in hand is finished. Messages the server sent into a cut-short fetch were never
    acked, so they are redelivered after the ack wait: nothing is lost."""

    def __init__(self) -> None:
        self._waiting: asyncio.Future[list[Msg]] | None = None

    async def fetch(self, sub: Any, batch: int, timeout: float) -> list[Msg] | None:
        """The fetched messages; None when `interrupt` cut the wait short. Raises what the fetch
        raises (its timeout included)."""
        waiting = self._waiting = asyncio.ensure_future(sub.fetch(batch, timeout=timeout))
        try:
            await asyncio.wait([waiting])
        except asyncio.CancelledError:
            waiting.cancel()
            raise
        finally:
            self._waiting = None
        return None if waiting.cancelled() else waiting.result()

    def interrupt(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()


# A burst of unreadable messages (a misbehaving publisher) is one page a minute per consumer and
# kind, each saying how many more were terminated since the last, not one page and ERROR each.
TERMINATION_PAGE_EVERY_SECONDS = 60.0


class TerminationPages:
    """When a terminated message of a kind pages: the first at once, then at most one a window."""

    def __init__(self, every: float = TERMINATION_PAGE_EVERY_SECONDS, monotonic: Callable[[], float] = time.monotonic):
        self.every = every
        self.monotonic = monotonic
        self._paged_at: dict[str, float] = {}
        self._unpaged: dict[str, int] = {}

    def due(self, kind: str) -> int | None:
        """None when this one is only counted; else how many of `kind` went unpaged before it."""
        now = self.monotonic()
        last = self._paged_at.get(kind)
        if last is not None and now - last < self.every:
            self._unpaged[kind] = self._unpaged.get(kind, 0) + 1
            return None
        self._paged_at[kind] = now
        return self._unpaged.pop(kind, 0)


def _since(more: int) -> str:
    return f" ({more} more terminated since the last page)" if more else ""


class DurableConsumer:
    def __init__(self, bus: Bus, engine: AsyncEngine, *, schema: str, spec: ConsumerSpec, handler: Handler,
                 outages: Outages | None = None, page: PageFn | None = None, kick: Callable[[], None] | None = None):
        self.bus = bus
        self.kick = kick  # wakes the service's outbox relay after a message's transaction wrote events
        self.page = page  # a message terminated unprocessed is lost work: it pages
        self.outages = outages or Outages()
        self.engine = engine
        self.schema = schema
        self.spec = spec
        self.handler = handler
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._fetch = InterruptibleFetch()
        self._terminations = TerminationPages()

    async def start(self) -> None:
        cfg = ConsumerConfig(durable_name=self.spec.durable, ack_policy=AckPolicy.EXPLICIT,
                             deliver_policy=DeliverPolicy.ALL, ack_wait=self.spec.ack_wait_seconds,
                             max_ack_pending=self.spec.batch * 4, filter_subjects=list(self.spec.subjects))
        await self.bus.js.add_consumer(self.spec.stream.value, cfg, timeout=self.bus.admin_timeout)
        self._task = asyncio.create_task(self._loop(), name=f"consumer:{self.spec.durable}")

    async def stop(self, grace: float = 5.0) -> None:
        """Stop fetching; the batch in hand is finished (or left unacked for redelivery)."""
        self._stopping.set()
        self._fetch.interrupt()
        if self._task:
            _done, pending = await asyncio.wait([self._task], timeout=grace)
            for task in pending:
                task.cancel()

    async def _loop(self) -> None:
        sub = await self.bus.js.pull_subscribe_bind(self.spec.durable, stream=self.spec.stream.value)
        try:
            while not self._stopping.is_set():
                try:
                    msgs = await self._fetch.fetch(sub, self.spec.batch, timeout=1.0)
                except (TimeoutError, NatsTimeoutError):
                    continue
                except Exception as exc:  # noqa: BLE001 - reconnecting, etc.
                    if self.outages.report(exc, where=f"consumer {self.spec.durable}") is None:
                        log.warning("fetch failed", extra=kv(consumer=self.spec.durable, error=repr(exc)))
                    await asyncio.sleep(1)
                    continue
                if msgs is None:
                    break  # stopping
                self.outages.answered(MESSAGE_BUS)
                for msg in msgs:
                    await self.process(msg)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def process(self, msg: Msg) -> None:
        try:
            envelope = EventEnvelope.model_validate_json(msg.data)
        except ValidationError as exc:
            if (more := self._terminations.due("undecodable")) is not None:
                await page_or_log(self.page, "Undecodable message terminated", f"consumer {self.spec.durable} could "
                                  f"not decode a message on {msg.subject} and terminated it: it is not processed"
                                  + _since(more), ["consumer", self.spec.durable, "undecodable"], snippet_source=exc,
                                  consumer=self.spec.durable, subject=msg.subject, more_since_last_page=more)
            await msg.term()
            return
        known = (self.spec.max_versions or {}).get(envelope.type, 1)
        if envelope.version > known:
            if (more := self._terminations.due(f"newer_version {envelope.type}")) is not None:
                await page_or_log(self.page, "Event from a newer contract version terminated",
                                  f"consumer {self.spec.durable} knows {envelope.type} up to version {known} and got "
                                  f"version {envelope.version}: upgrade this service" + _since(more),
                                  ["consumer", self.spec.durable, "newer_version", envelope.type],
                                  consumer=self.spec.durable, type=envelope.type, version=envelope.version,
                                  known=known, more_since_last_page=more)
            await msg.term()
            return
        try:
            async with transaction(self.engine, self.kick) as conn:  # its events go at its commit, not at a poll
                fresh = await claim_message(conn, self.schema, self.spec.durable, envelope.id)
                if fresh:
                    await self.handler(conn, envelope)
            if fresh and self.spec.after_commit is not None:
                self.spec.after_commit()
        except (ValidationError, ZimmerError) as exc:
            if isinstance(exc, ZimmerError) and exc.code not in PERMANENT:
                await self._retry(msg, envelope)
                return
            # Waiting will not make a malformed payload or a missing session valid: terminate.
            await page_or_log(self.page, "Event refused by its handler", f"consumer {self.spec.durable} refused an "
                              f"event ({envelope.type}) and terminated it: waiting would not make it valid",
                              ["consumer", self.spec.durable, "refused", envelope.type], snippet_source=str(exc),
                              consumer=self.spec.durable, id=envelope.id)
            await msg.term()
            return
        except Exception as exc:  # noqa: BLE001 - retried with backoff; the transaction rolled back whole
            if self.outages.report(exc, where=f"consumer {self.spec.durable}") is None:
                # A warning: it is retried with backoff; one that never succeeds backs up its lane,
                # which the queue health pages on.
                log.warning("event handler failed; will retry", exc_info=True,
                            extra=kv(consumer=self.spec.durable, id=envelope.id))
            await self._retry(msg, envelope)
            return
        with contextlib.suppress(Exception):  # an ack lost to a bus outage is a redelivery, and claim_message dedupes it
            await msg.ack()

    async def _retry(self, msg: Msg, envelope: EventEnvelope) -> None:
        attempt = msg.metadata.num_delivered if msg.metadata else 1
        delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS)) - 1]
        log.warning("event will be retried", extra=kv(consumer=self.spec.durable, id=envelope.id, attempt=attempt,
                                                      retry_in_seconds=delay))
        with contextlib.suppress(Exception):  # a lost nak is an ack_wait timeout: redelivered all the same
            await msg.nak(delay=delay)
