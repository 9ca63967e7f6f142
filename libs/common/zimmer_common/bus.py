"""The bus: NATS connection, typed request/reply, and JetStream publishing.

Request/reply carries a deadline (`zimmer_common.deadline`): the requester sends its absolute
deadline in a header and waits until it (plus a short grace) for the answer; the server drops a
request that arrives past it, serves the handler under it (so inner calls are budgeted from
what is left and no transaction commits after it), and answers `unavailable` naming the
dependency when PostgreSQL or the bus is down. A request that times out, finds nobody
listening, or cannot be sent because the connection is down is `unavailable`: never a guess,
and never sent later (the client keeps no buffer across a reconnect).

Each service bounds the requests it answers at once, by count (`ZIMMER_MAX_INFLIGHT_RPCS`) and by
the bytes they carry (`ZIMMER_MAX_INFLIGHT_BYTES`); beyond either it answers `busy` at once,
having done nothing, rather than growing without limit.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from pydantic_core import to_json

from zimmer_common import deadline
from zimmer_common.contracts.envelope import EventEnvelope, Payload, RpcReply, RpcSpec, TypedRpcReply
from zimmer_common.contracts.subjects import stream_of
from zimmer_common.errors import ErrorCode, ZimmerError, unavailable
from zimmer_common.logs import kv
from zimmer_common.metrics import ServiceMetrics
from zimmer_common.outage import MESSAGE_BUS, Outages
from zimmer_common.paging import PageFn, page_or_log
from zimmer_common.pubacks import NoStreamAnswered, PublishAcks

log = logging.getLogger("zimmer.bus")
ADMIN_TIMEOUT_SECONDS = 15.0

Req = TypeVar("Req", bound=Payload)
Resp = TypeVar("Resp", bound=Payload)
Handler = Callable[[Any], Awaitable[BaseModel]]

CONNECT_TIMEOUT_SECONDS = 5.0
DEFAULT_MAX_INFLIGHT = 1024
DEFAULT_MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
# Room left in a bus message for headers and the reply envelope around a payload.
HEADER_ROOM = 4096
# A request that left and got no answer: its deadline keeps it from taking effect later, but the
# other side may have acted just before the answer was lost (it died after its commit).
SENT_UNANSWERED = ("; it cannot take effect from now on, but may have taken effect before its answer was lost: "
                   "repeat it with the same idempotency key to learn which")


async def connect_nats(servers: list[str], name: str, *, attempts: int = 10,
                       closing: asyncio.Event | None = None, outages: Outages | None = None) -> NatsClient:
    """Connect with bounded retries at start, then reconnect forever once connected.

    `pending_size=0`: while disconnected nothing is buffered, so a request is refused at once
    (`unavailable`) instead of being sent, perhaps long after its caller gave up, when the
    connection comes back. `closing` silences the disconnect report when it is our own close.
    """
    closing = closing or asyncio.Event()
    outages = outages or Outages()

    async def _on_disconnect() -> None:
        if not closing.is_set():
            outages.of(MESSAGE_BUS).failed("disconnected from NATS", where=name)

    async def _on_reconnect() -> None:
        outages.of(MESSAGE_BUS).recovered()

    async def _on_error(exc: Exception) -> None:
        if not closing.is_set():
            outages.of(MESSAGE_BUS).failed(exc, where=name)

    from tenacity import AsyncRetrying, stop_after_attempt, wait_incrementing

    # Whatever the failure (refused, timed out, auth refused), tried again: `attempts` in all,
    # 0.2 s longer between each (2 s at most); the last one's error is the answer.
    retrying = AsyncRetrying(stop=stop_after_attempt(attempts), wait=wait_incrementing(0.2, 0.2, 2.0), reraise=True)
    try:
        nc = await retrying(
            nats.connect,
            servers=servers,
            name=name,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            # Bounded here: nats-py applies this to the first connect too, and -1 made a
            # connect to an address nobody serves loop forever. Once connected: forever.
            max_reconnect_attempts=1,
            reconnect_time_wait=1,
            allow_reconnect=True,
            pending_size=0,
            disconnected_cb=_on_disconnect,
            reconnected_cb=_on_reconnect,
            error_cb=_on_error,
        )
    except Exception as last:  # noqa: BLE001 - connection errors come in many shapes
        raise unavailable(MESSAGE_BUS, f"cannot connect to NATS at {servers}: {last}") from None
    nc.options["max_reconnect_attempts"] = -1
    outages.of(MESSAGE_BUS).recovered()
    return nc


OK_HEAD = b'{"ok":true,"data":'
OK_TAIL = b',"error":null}'


def ok_reply(result: BaseModel) -> bytes:
    """`RpcReply(ok=True, data=result)` as JSON, written around the result's own JSON. Hot (every
    answer): going through `model_dump` and an `RpcReply` encoded each result three times over."""
    return OK_HEAD + result.model_dump_json().encode() + OK_TAIL


def no_time_left(spec: RpcSpec[Any, Any]) -> ZimmerError:
    """The refusal of a request whose deadline leaves too little to ask `spec`: nothing was sent,
    retry-safe, naming whom it was about to ask."""
    return ZimmerError(ErrorCode.UNAVAILABLE, f"no time left to ask {spec.ctx} to {spec.op}; nothing was done",
                       {"dependency": spec.ctx, "retry_safe": True, "sent": False})


class Bus:
    """One service's view of NATS. Built at start-up, never at import."""

    def __init__(self, nc: NatsClient, *, service: str, rpc_timeout: float, metrics: ServiceMetrics | None = None,
                 closing: asyncio.Event | None = None, outages: Outages | None = None,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT, max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES):
        self.nc = nc
        self._closing = closing or asyncio.Event()
        self.js: JetStreamContext = nc.jetstream(timeout=rpc_timeout)
        self.service = service
        self.rpc_timeout = rpc_timeout
        self.metrics = metrics
        self.outages = outages or Outages(metrics)
        self.page: PageFn | None = None  # wired by the service: a handler that crashes pages
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes
        self._subs: list[Any] = []
        self._inflight: set[asyncio.Task[None]] = set()
        self._inflight_bytes = 0
        self._inflight_gauge = metrics.rpc_inflight.labels(service) if metrics else None  # set every request
        self._acks: PublishAcks | None = None
        self._acks_lock = asyncio.Lock()

    @classmethod
    async def connect(cls, servers: list[str], *, service: str, instance_id: str, rpc_timeout: float,
                      metrics: ServiceMetrics | None = None, outages: Outages | None = None,
                      max_inflight: int = DEFAULT_MAX_INFLIGHT,
                      max_inflight_bytes: int = DEFAULT_MAX_INFLIGHT_BYTES) -> Bus:
        closing = asyncio.Event()
        outages = outages or Outages(metrics)
        nc = await connect_nats(servers, f"{service}:{instance_id}", closing=closing, outages=outages)
        return cls(nc, service=service, rpc_timeout=rpc_timeout, metrics=metrics, closing=closing,
                   outages=outages, max_inflight=max_inflight, max_inflight_bytes=max_inflight_bytes)

    @property
    def max_payload(self) -> int:
        return int(self.nc.max_payload or 1024 * 1024)

    @property
    def admin_timeout(self) -> float:
        """The bound on start-up's JetStream administration (streams, consumers, schedules): on no
        request's path, so it may wait out a server busy writing or a cluster electing a leader
        rather than fail the start."""
        return max(self.rpc_timeout, ADMIN_TIMEOUT_SECONDS)

    def payload_room(self) -> int:
        """The largest payload a request or reply may carry on this connection."""
        return self.max_payload - HEADER_ROOM

    # ---- request/reply -------------------------------------------------------------------

    async def serve(self, spec: RpcSpec[Req, Resp], handler: Callable[[Req], Awaitable[Resp]]) -> None:
        """Answer `spec` in queue group `<ctx>`, so replicas share the load."""

        async def on_msg(msg: Msg) -> None:
            size = len(msg.data or b"")
            if len(self._inflight) >= self.max_inflight or self._inflight_bytes + size > self.max_inflight_bytes:
                await self._refuse_busy(spec, msg)
                return
            task = asyncio.create_task(self._answer(spec, handler, msg))
            self._inflight.add(task)
            self._inflight_bytes += size
            if self._inflight_gauge is not None:
                self._inflight_gauge.set(len(self._inflight))

            def done(t: asyncio.Task[None], size: int = size) -> None:
                self._inflight.discard(t)
                self._inflight_bytes -= size

            task.add_done_callback(done)

        self._subs.append(await self.nc.subscribe(spec.subject, queue=spec.ctx, cb=on_msg))
        await self.settled()  # when this returns, the server routes requests to us

    async def settled(self) -> None:
        """Return once the server has seen every command sent so far. nats-py writes a flush's PING
        straight to the socket, ahead of commands still queued for its flusher task (a SUB just
        made, say), so a bare flush can return before the server knows of the subscription, and a
        request made at once meets "no responders". Let the flusher empty its queue first."""
        for _ in range(10_000):
            if not getattr(self.nc, "_pending", None):
                break
            await asyncio.sleep(0)
        await self.nc.flush(timeout=self.rpc_timeout)

    async def _refuse_busy(self, spec: RpcSpec[Any, Any], msg: Msg) -> None:
        if self.metrics:
            self.metrics.rpc_busy.labels(self.service, spec.op).inc()
        reply = RpcReply(ok=False, error={"code": ErrorCode.BUSY.value,  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
                                          "message": f"{self.service} is at its bound of {self.max_inflight} requests "
                                                     "in flight; nothing was done, retry shortly",
                                          "details": self.outages.naming({"retry_safe": True})})
        await self._reply(spec, msg, reply)

    async def _answer(self, spec: RpcSpec[Any, Any], handler: Handler, msg: Msg) -> None:
        headers = msg.headers or {}
        due = deadline.parse_header(headers.get(deadline.DEADLINE_HEADER)) or time.time() + self.rpc_timeout
        if time.time() >= due:
            # The requester has given up and answered its caller `unavailable`: doing the work
            # now would make that answer a lie. Drop it, unanswered, and count it.
            if self.metrics:
                self.metrics.rpc_expired.labels(self.service, spec.op).inc()
            return
        started = time.perf_counter()
        outcome = "ok"
        # Bounded: past the deadline (and the requester's grace) nobody waits for the answer, and
        # the commit guard has already refused whatever the handler would still commit.
        timer = asyncio.timeout(due - time.time() + deadline.REPLY_GRACE)
        try:
            with deadline.use(due), deadline.as_caller(headers.get(deadline.CALLER_HEADER)):
                try:
                    request = spec.request.model_validate_json(msg.data or b"{}")
                except ValidationError as exc:
                    raise ZimmerError(ErrorCode.INVALID, "request does not match the contract",
                                      {"errors": json.loads(exc.json(include_url=False, include_input=False))}
                                      ) from None
                async with timer:
                    result = await handler(request)
            reply: RpcReply | bytes = ok_reply(result)
        except ZimmerError as exc:
            outcome = exc.code.value
            error = exc.to_dict()
            if exc.retry_safe:
                error["details"] = self.outages.naming(error.get("details") or {})
            reply = RpcReply(ok=False, error=error)  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
        except Exception as exc:  # noqa: BLE001 - an outage is an answer; anything else is a bug, logged
            if isinstance(exc, TimeoutError) and timer.expired():
                if self.metrics:
                    self.metrics.rpc_expired.labels(self.service, spec.op).inc()
                return  # the requester is gone and nothing committed: no answer to give
            dependency = self.outages.report(exc, where=spec.subject)
            if dependency is not None:
                err = unavailable(dependency)
                outcome = err.code.value
                reply = RpcReply(ok=False, error=err.to_dict())  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
            else:
                outcome = ErrorCode.INTERNAL.value
                await page_or_log(self.page, "RPC handler failed", f"{spec.subject} raised {type(exc).__name__}; the "
                                  "caller was answered `internal`", ["rpc", spec.op, type(exc).__name__],
                                  snippet_source=exc, subject=spec.subject)
                reply = RpcReply(ok=False, error={"code": "internal", "message": "internal error"})  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
        if self.metrics:
            self.metrics.rpc_served(spec.op, outcome, time.perf_counter() - started)
        await self._reply(spec, msg, reply)

    async def _reply(self, spec: RpcSpec[Any, Any], msg: Msg, reply: RpcReply | bytes) -> None:
        if not msg.reply:
            return
        body = reply if isinstance(reply, bytes) else reply.model_dump_json().encode()
        if len(body) > self.max_payload:
            body = RpcReply(ok=False, error={  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
                "code": ErrorCode.TOO_LARGE.value,
                "message": f"the answer is {len(body):,} bytes, more than the bus carries ({self.max_payload:,}); "
                           "ask for less (a smaller limit)",
                "details": {"bytes": len(body), "max_bytes": self.max_payload}}).model_dump_json().encode()
        try:
            await msg.respond(body)
        except Exception:  # noqa: BLE001 - the requester may be gone; nothing to tell it
            log.warning("could not deliver rpc reply", extra=kv(subject=spec.subject))

    async def request(self, spec: RpcSpec[Req, Resp], payload: Req, *, timeout: float | None = None) -> Resp:
        """Ask `spec`, bounded by `timeout` (default `rpc_timeout`) and by whatever is left of
        the deadline of the request being served. `unavailable` means the other side did not
        and will not act on it."""
        data = await self._ask(spec, payload.model_dump_json().encode(), timeout)
        reply = TypedRpcReply[spec.response].model_validate_json(data)
        if not reply.ok:
            err = reply.error
            raise ZimmerError(err.code if err else "internal", err.message if err else "error without body",
                              err.details if err else {})
        return reply.data if reply.data is not None else spec.response.model_validate({})

    async def request_raw(self, spec: RpcSpec[Any, Any], body: bytes, *, timeout: float | None = None) -> bytes:
        """`request` for a caller that passes the answer on as it came (the gateway's proxied
        routes): `body` is the request's JSON, already what `spec.request` takes (the caller
        validated it once, at its edge), and the result is the answer's `data` as the service
        wrote it, JSON bytes, not validated again here. A refusal raises as `request` does."""
        data = await self._ask(spec, body, timeout)
        if data.startswith(OK_HEAD) and data.endswith(OK_TAIL):  # what `ok_reply` writes: every answer served here
            return data[len(OK_HEAD):-len(OK_TAIL)]
        reply = RpcReply.model_validate_json(data)
        if not reply.ok:
            err = reply.error
            raise ZimmerError(err.code if err else "internal", err.message if err else "error without body",
                              err.details if err else {})
        if reply.data is None:
            return spec.response.model_validate({}).model_dump_json().encode()  # type: ignore[no-any-return]  # spec.response is typed Any
        return to_json(reply.data)

    async def _ask(self, spec: RpcSpec[Any, Any], body: bytes, timeout: float | None) -> bytes:
        """Send `body` (the request's JSON) to `spec` under the deadline; the reply's bytes."""
        due = deadline.inner_deadline(timeout if timeout is not None else self.rpc_timeout)
        budget = due - time.time()
        if budget < deadline.MIN_BUDGET:
            raise no_time_left(spec)
        if not self.nc.is_connected:
            raise unavailable(MESSAGE_BUS, f"message bus unavailable: cannot ask {spec.ctx} to {spec.op}; "
                              "nothing was sent", sent=False)
        if len(body) > self.payload_room():
            raise ZimmerError(ErrorCode.TOO_LARGE, f"the request is {len(body):,} bytes; a message on the bus carries "
                              f"at most {self.payload_room():,}", {"bytes": len(body), "max_bytes": self.payload_room()})
        headers = {deadline.DEADLINE_HEADER: f"{due:.6f}"}
        caller = deadline.current_caller()
        if caller:
            headers[deadline.CALLER_HEADER] = caller
        try:
            msg = await self.nc.request(spec.subject, body, timeout=budget + deadline.REPLY_GRACE, headers=headers)
        except (TimeoutError, NatsTimeoutError):
            # Sent, unanswered: past its deadline it can no longer take effect; it may have just
            # before its answer was lost, which a retry with the same idempotency key tells.
            if not self.nc.is_connected or self.outages.of(MESSAGE_BUS).lately():
                # The connection dropped while it waited: the bus lost the answer, not the service.
                raise unavailable(MESSAGE_BUS, f"message bus unavailable: {spec.op} to {spec.ctx} got no answer"
                                  + SENT_UNANSWERED, sent=True) from None
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"{spec.ctx} did not answer {spec.op} within {budget:.2g}s"
                              + SENT_UNANSWERED, {"dependency": spec.ctx, "retry_safe": True, "sent": True}) from None
        except NoRespondersError:
            if self.outages.of(MESSAGE_BUS).lately():
                # Back on the bus before the service is: its replicas are still reconnecting.
                raise unavailable(MESSAGE_BUS, f"message bus unavailable: no {spec.ctx} instance is back on the "
                                  f"bus yet to {spec.op}; nothing was sent", sent=False) from None
            raise ZimmerError(ErrorCode.UNAVAILABLE, f"no {spec.ctx} instance is serving {spec.op}",
                              {"dependency": spec.ctx, "retry_safe": True, "sent": False}) from None
        except Exception as exc:  # connection closed, draining, reconnecting, ...
            self.outages.of(MESSAGE_BUS).failed(exc, where=spec.subject)
            raise unavailable(MESSAGE_BUS, f"message bus unavailable: {spec.op} to {spec.ctx} got no answer"
                              + SENT_UNANSWERED, sent=True) from None
        return msg.data

    # ---- JetStream ---------------------------------------------------------------------

    async def publish(self, subject: str, body: bytes, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None, timeout: float | None = None) -> int:
        """Publish to JetStream and wait for the stream's ack; returns the stream sequence.

        `msg_id` becomes `Nats-Msg-Id`, so a re-publish inside the stream's duplicate window
        is dropped by the server rather than delivered twice.
        """
        if not self.nc.is_connected:
            raise unavailable(MESSAGE_BUS, f"message bus unavailable: {subject} not published")
        hdrs = dict(headers or {})
        if msg_id:
            hdrs["Nats-Msg-Id"] = msg_id
        try:
            ack = await self.js.publish(subject, body, headers=hdrs or None,
                                        timeout=timeout if timeout is not None else self.rpc_timeout)
        except Exception as exc:  # noqa: BLE001 - timed out, no responders, disconnected: not stored
            raise unavailable(MESSAGE_BUS, f"JetStream did not ack {subject}: {exc!r}") from None
        self.outages.answered(MESSAGE_BUS)
        return ack.seq

    async def publish_many(self, messages: list[tuple[str, bytes, str]], *, timeout: float | None = None) -> list[int]:
        """Publish (subject, body, msg_id) in order without waiting for each ack in turn, then
        wait (bounded) for all of them. Any failure raises `unavailable` for the whole batch:
        the caller re-publishes it, and the ids make the copies harmless."""
        bound = timeout if timeout is not None else self.rpc_timeout
        if not self.nc.is_connected:
            raise unavailable(MESSAGE_BUS, f"message bus unavailable: a batch of {len(messages)} not published")
        async with self._acks_lock:  # one ack inbox per connection, subscribed at the first batch
            if self._acks is None:
                self._acks = await PublishAcks.subscribe(self.nc)
        acks = self._acks
        tokens: list[str] = []
        try:
            # Nothing here yields to the loop until the last message is queued, so nats-py's
            # flusher writes the whole batch in one system call (a yield per message, as
            # publish_async's stall timeout made, cost a write per message).
            async with asyncio.timeout(bound):
                futures = []
                for subject, body, msg_id in messages:
                    token, future = acks.expect()
                    tokens.append(token)
                    futures.append(future)
                    await self.nc.publish(subject, body, reply=acks.prefix + token, headers={"Nats-Msg-Id": msg_id})
                # Every ack is read, refusals too: one left unread after the first failure was an
                # ERROR "Future exception was never retrieved" at its collection, 641 of them after
                # one stream-leader election.
                answers = await asyncio.gather(*futures, return_exceptions=True)
        except Exception as exc:  # noqa: BLE001 - timed out, disconnected: all mean "not all stored"
            raise unavailable(MESSAGE_BUS, f"JetStream did not ack a batch of {len(messages)}: {exc!r}") from None
        finally:
            for token in tokens:
                acks.forget(token)
        refused = [(messages[i][0], a) for i, a in enumerate(answers) if isinstance(a, BaseException)]
        if refused:
            subject, why = refused[0]
            cause = (f"stream {stream_of(subject)} has no leader (or takes no {subject})"
                     if isinstance(why, NoStreamAnswered) else f"{subject}: {why}")
            raise unavailable(MESSAGE_BUS, f"JetStream stored {len(messages) - len(refused)} of a batch of "
                                           f"{len(messages)}: {cause}")
        self.outages.answered(MESSAGE_BUS)
        return [int(a) for a in answers]  # type: ignore[arg-type]  # refusals raised above: the rest are ints

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
        except Exception:  # noqa: BLE001 - timed out, no responders, disconnected
            raise unavailable(MESSAGE_BUS, f"JetStream API {api} did not answer") from None
        return json.loads(msg.data)

    # ---- shutdown ----------------------------------------------------------------------

    async def stop_serving(self, grace: float) -> None:
        """Stop taking requests, then wait (bounded) for the ones being answered."""
        for sub in self._subs:
            with contextlib.suppress(Exception):  # already closed
                await sub.unsubscribe()
        self._subs.clear()
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=grace)

    async def close(self) -> None:
        self._closing.set()
        if not self.nc.is_closed:
            with contextlib.suppress(Exception):  # drain failing leaves close below
                await asyncio.wait_for(self.nc.drain(), timeout=2)
            if not self.nc.is_closed:
                await self.nc.close()
