"""The bus: NATS connection, typed request/reply, and JetStream publishing.

Every request has a bound (`Settings.rpc_timeout_seconds` unless the caller passes a tighter
one) and a request that times out, or finds nobody listening, raises
`ZimmerError(unavailable)`: the caller never guesses what the other side would have said.
RPC handlers run as tasks (nats-py would otherwise serialise a subscription's callbacks), and
`close()` waits a bounded time for the ones in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from pydantic import BaseModel, ValidationError

from zimmer_common.contracts.envelope import EventEnvelope, Payload, RpcReply, RpcSpec
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.logs import kv
from zimmer_common.metrics import ServiceMetrics

log = logging.getLogger("zimmer.bus")

Req = TypeVar("Req", bound=Payload)
Resp = TypeVar("Resp", bound=Payload)
Handler = Callable[[Any], Awaitable[BaseModel]]

CONNECT_TIMEOUT_SECONDS = 5.0


async def connect_nats(servers: list[str], name: str, *, attempts: int = 10,
                       closing: asyncio.Event | None = None) -> NatsClient:
    """Connect with bounded retries at start, then reconnect forever once connected.

    `closing` silences the disconnect warning when the disconnect is our own close.
    """
    closing = closing or asyncio.Event()

    async def _on_disconnect() -> None:
        if not closing.is_set():
            log.warning("nats disconnected", extra=kv(client=name))

    async def _on_reconnect() -> None:
        log.warning("nats reconnected", extra=kv(client=name))

    async def _on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc, extra=kv(client=name))

    last: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            return await nats.connect(
                servers=servers,
                name=name,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                max_reconnect_attempts=-1,
                reconnect_time_wait=1,
                allow_reconnect=True,
                disconnected_cb=_on_disconnect,
                reconnected_cb=_on_reconnect,
                error_cb=_on_error,
            )
        except Exception as exc:  # noqa: BLE001 - connection errors come in many shapes
            last = exc
            await asyncio.sleep(min(0.2 * attempt, 2.0))
    raise ZimmerError(ErrorCode.UNAVAILABLE, f"cannot connect to NATS at {servers}: {last}")


class Bus:
    """One service's view of NATS. Built at start-up, never at import."""

    def __init__(self, nc: NatsClient, *, service: str, rpc_timeout: float, metrics: ServiceMetrics | None = None,
                 closing: asyncio.Event | None = None):
        self.nc = nc
        self._closing = closing or asyncio.Event()
        self.js: JetStreamContext = nc.jetstream(timeout=rpc_timeout)
        self.service = service
        self.rpc_timeout = rpc_timeout
        self.metrics = metrics
        self._subs: list[Any] = []
        self._inflight: set[asyncio.Task[None]] = set()

    @classmethod
    async def connect(cls, servers: list[str], *, service: str, instance_id: str, rpc_timeout: float,
                      metrics: ServiceMetrics | None = None) -> Bus:
        closing = asyncio.Event()
        nc = await connect_nats(servers, f"{service}:{instance_id}", closing=closing)
        return cls(nc, service=service, rpc_timeout=rpc_timeout, metrics=metrics, closing=closing)

    # ---- request/reply -------------------------------------------------------------------

    async def serve(self, spec: RpcSpec[Req, Resp], handler: Callable[[Req], Awaitable[Resp]]) -> None:
        """Answer `spec` in queue group `<ctx>`, so replicas share the load."""

        async def on_msg(msg: Msg) -> None:
            task = asyncio.create_task(self._answer(spec, handler, msg))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)

        self._subs.append(await self.nc.subscribe(spec.subject, queue=spec.ctx, cb=on_msg))

    async def _answer(self, spec: RpcSpec[Any, Any], handler: Handler, msg: Msg) -> None:
        started = time.perf_counter()
        outcome = "ok"
        try:
            try:
                request = spec.request.model_validate_json(msg.data or b"{}")
            except ValidationError as exc:
                raise ZimmerError(ErrorCode.INVALID, "request does not match the contract",
                                  {"errors": json.loads(exc.json(include_url=False))}) from None
            result = await handler(request)
            reply = RpcReply(ok=True, data=result.model_dump(mode="json"))
        except ZimmerError as exc:
            outcome = exc.code.value
            reply = RpcReply(ok=False, error=exc.to_dict())  # type: ignore[arg-type]
        except Exception:
            outcome = ErrorCode.INTERNAL.value
            log.exception("rpc handler failed", extra=kv(subject=spec.subject))
            reply = RpcReply(ok=False, error={"code": "internal", "message": "internal error"})  # type: ignore[arg-type]
        if self.metrics:
            self.metrics.rpc_served(spec.op, outcome, time.perf_counter() - started)
        if msg.reply:
            try:
                await msg.respond(reply.model_dump_json().encode())
            except Exception:  # noqa: BLE001 - the requester may be gone; nothing to tell it
                log.warning("could not deliver rpc reply", extra=kv(subject=spec.subject))

    async def request(self, spec: RpcSpec[Req, Resp], payload: Req, *, timeout: float | None = None) -> Resp:
        bound = timeout if timeout is not None else self.rpc_timeout
        try:
            msg = await self.nc.request(spec.subject, payload.model_dump_json().encode(), timeout=bound)
        except (NatsTimeoutError, asyncio.TimeoutError):
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"{spec.ctx} did not answer {spec.op} within {bound:g}s") from None
        except NoRespondersError:
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"no {spec.ctx} instance is serving {spec.op}") from None
        except Exception as exc:  # connection closed, draining, ...
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"{spec.op} to {spec.ctx} failed: {exc}") from None
        reply = RpcReply.model_validate_json(msg.data)
        if not reply.ok:
            err = reply.error
            raise ZimmerError(err.code if err else "internal", err.message if err else "error without body",
                              err.details if err else {})
        return spec.response.model_validate(reply.data or {})

    # ---- JetStream ---------------------------------------------------------------------

    async def publish(self, subject: str, body: bytes, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None, timeout: float | None = None) -> int:
        """Publish to JetStream and wait for the stream's ack; returns the stream sequence.

        `msg_id` becomes `Nats-Msg-Id`, so a re-publish inside the stream's duplicate window
        is dropped by the server rather than delivered twice.
        """
        hdrs = dict(headers or {})
        if msg_id:
            hdrs["Nats-Msg-Id"] = msg_id
        try:
            ack = await self.js.publish(subject, body, headers=hdrs or None,
                                        timeout=timeout if timeout is not None else self.rpc_timeout)
        except (NatsTimeoutError, asyncio.TimeoutError, NoRespondersError) as exc:
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"JetStream did not ack {subject}: {exc!r}") from None
        return ack.seq

    async def publish_many(self, messages: list[tuple[str, bytes, str]], *, timeout: float | None = None) -> list[int]:
        """Publish (subject, body, msg_id) in order without waiting for each ack in turn, then
        wait (bounded) for all of them. Any failure raises `unavailable` for the whole batch:
        the caller re-publishes it, and the ids make the copies harmless."""
        bound = timeout if timeout is not None else self.rpc_timeout
        futures: list[asyncio.Future[Any]] = []
        try:
            for subject, body, msg_id in messages:
                futures.append(await self.js.publish_async(subject, body, headers={"Nats-Msg-Id": msg_id},
                                                           wait_stall=bound))
            acks = await asyncio.wait_for(asyncio.gather(*futures), timeout=bound)
        except Exception as exc:  # noqa: BLE001 - stalled, timed out, refused: all mean "not all stored"
            for future in futures:
                future.cancel()  # releases nats-py's pending-publish slots
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"JetStream did not ack a batch of {len(messages)}: {exc!r}") from None
        return [ack.seq for ack in acks]

    async def publish_event(self, subject: str, event_type: str, payload: Payload, *, event_id: str,
                            occurred_at: datetime | None = None) -> int:
        """Publish a typed event outside the outbox (operational events, ingest from a runtime):
        wrapped in an `EventEnvelope` whose id doubles as the Nats-Msg-Id."""
        envelope = EventEnvelope(id=event_id, type=event_type, version=payload.VERSION, source=self.service,
                                 occurred_at=occurred_at or datetime.now(UTC), data=payload.model_dump(mode="json"))
        return await self.publish(subject, envelope.model_dump_json().encode(), msg_id=event_id)

    async def js_api(self, api: str, body: dict[str, Any] | None = None, *, timeout: float | None = None) -> dict[str, Any]:
        """Raw `$JS.API.*` request, for what nats-py's typed API lacks (schedules, first_ts)."""
        try:
            msg = await self.nc.request(f"$JS.API.{api}", json.dumps(body or {}).encode(),
                                        timeout=timeout if timeout is not None else self.rpc_timeout)
        except (NatsTimeoutError, asyncio.TimeoutError, NoRespondersError):
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"JetStream API {api} did not answer") from None
        return json.loads(msg.data)

    # ---- shutdown ----------------------------------------------------------------------

    async def stop_serving(self, grace: float) -> None:
        """Stop taking requests, then wait (bounded) for the ones being answered."""
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - already closed
                pass
        self._subs.clear()
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=grace)

    async def close(self) -> None:
        self._closing.set()
        if not self.nc.is_closed:
            try:
                await asyncio.wait_for(self.nc.drain(), timeout=2)
            except Exception:  # noqa: BLE001 - drain failing leaves close below
                pass
            if not self.nc.is_closed:
                await self.nc.close()
