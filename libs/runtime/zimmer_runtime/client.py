"""`RuntimeClient`: what an agent runtime embeds to talk to the Zimmer control plane.

Three kinds of traffic (docs/runtime.md has every subject):
- questions, answered at once (core NATS request/reply): may this session take a turn
  (`request_turn`), sleep it until a moment (`pause_until`, the wake-up), park it for an auth
  outage, or any other contract operation (`call`);
- commands to obey (JetStream work queue ZIMMER_RUNTIME): `commands()` / `serve_commands()`;
- reports (JetStream stream ZIMMER_INGEST): status, spend, quota readings, log lines, clones.
  `report_*` returns at once with the report's idempotency key; the report waits in a bounded
  local buffer until JetStream acks it, across disconnects and NATS restarts, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import nats
from nats.aio.client import Client as NatsClient
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from prometheus_client import CollectorRegistry
from tenacity import AsyncRetrying, stop_after_attempt, wait_incrementing

from zimmer_common.contracts import spot
from zimmer_common.contracts.clones import INGEST_CLONE, CloneReport
from zimmer_common.contracts.envelope import Payload, RpcSpec
from zimmer_common.contracts.logs import INGEST_LOGS, LOG_LINES
from zimmer_common.contracts.runtime import (
    INGEST_QUOTA_READING,
    INGEST_SESSION_STATUS,
    INGEST_SPEND,
    AccountStatusName,
    QuotaReadingIn,
    SessionStatusName,
    SessionStatusReport,
    SpendReport,
    TurnKindName,
    WindowReadingIn,
)
from zimmer_common.contracts.wire import CALLER_HEADER, DEADLINE_HEADER, REPLY_GRACE, deadline_header
from zimmer_runtime.buffer import OutgoingReport, ReportBuffer
from zimmer_runtime.commands import CommandHandler, CommandInbox, serve
from zimmer_runtime.config import FleetCredential, RuntimeConfig
from zimmer_runtime.envelopes import ENVELOPE_ROOM, LogLine, log_batches, read_reply, report_envelope
from zimmer_runtime.errors import ReportTooLarge, RuntimeRequestError
from zimmer_runtime.metrics import RuntimeMetrics, metrics_for
from zimmer_runtime.reports import ReportSender

log = logging.getLogger("zimmer_runtime")

Req = TypeVar("Req", bound=Payload)
Resp = TypeVar("Resp", bound=Payload)
KEY = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII without spaces: a header value and an envelope id


@dataclass(frozen=True)
class TurnDecision:
    """The gate's answer to `request_turn`. `starts`: a start_turn command for this turn follows on
    the command stream (admitted, or passed without asking the gate); obey that, not this."""

    outcome: Literal["admitted", "held", "queued", "passed"]
    starts: bool
    sentence: str | None  # the gate's own sentence, when it decided
    result: spot.TurnResult
    idempotency_key: str


class RuntimeClient:
    def __init__(self, nc: NatsClient, config: RuntimeConfig, metrics: RuntimeMetrics, closing: asyncio.Event):
        self._nc = nc
        self.config = config
        self.metrics = metrics
        self._closing = closing
        self._js: JetStreamContext = nc.jetstream(timeout=config.publish_timeout)
        self._sender_buffer = ReportBuffer(config.buffer_size)
        self._sender = ReportSender(lambda: self._nc, lambda: self._js, self._sender_buffer, metrics=metrics,
                                    publish_timeout=config.publish_timeout, closing=closing)
        self._inbox = CommandInbox(lambda: self._js, durable=config.command_consumer, ack_wait=config.command_ack_wait,
                                   max_ack_pending=config.command_max_ack_pending,
                                   remembered=config.handled_commands_remembered, metrics=metrics, closing=closing,
                                   admin_timeout=max(config.rpc_timeout, 15.0))
        self._serving: asyncio.Task[None] | None = None
        self._sender.start()

    # ---- connecting ---------------------------------------------------------------------

    @classmethod
    async def connect(cls, servers: list[str] | str | RuntimeConfig, credential: FleetCredential | None = None, *,
                      registry: CollectorRegistry | None = None, **config: Any) -> RuntimeClient:
        """Connect (bounded retries at first; once connected, reconnects never stop). `servers` is a
        URL, a list of them, or a whole `RuntimeConfig`; other `RuntimeConfig` fields as keywords."""
        if isinstance(servers, RuntimeConfig):
            cfg = servers
        else:
            urls = [u.strip() for u in servers.split(",")] if isinstance(servers, str) else list(servers)
            cfg = RuntimeConfig(servers=urls, credential=credential or FleetCredential(), **config)
        metrics = metrics_for(registry)
        closing = asyncio.Event()
        holder: list[RuntimeClient] = []

        async def disconnected() -> None:
            metrics.connected.set(0)
            if not closing.is_set():
                log.warning("disconnected from NATS; reports wait in the local buffer",
                            extra={"buffered": len(holder[0]._sender_buffer) if holder else 0})

        async def reconnected() -> None:
            metrics.reconnects.inc()
            metrics.connected.set(1)
            log.info("reconnected to NATS")
            if holder:
                holder[0]._sender.wake()

        async def error(exc: Exception) -> None:
            if not closing.is_set():
                log.debug("NATS connection error", extra={"error": repr(exc)})

        # Refused, timed out, auth failed: tried again, `connect_attempts` in all, 0.2 s longer
        # between each (2 s at most); the last one's error is in the answer.
        retrying = AsyncRetrying(stop=stop_after_attempt(cfg.connect_attempts), wait=wait_incrementing(0.2, 0.2, 2.0),
                                 reraise=True)
        try:
            nc = await retrying(nats.connect, servers=cfg.servers, name=cfg.name, connect_timeout=cfg.connect_timeout,
                                # Bounded: nats-py applies it to the first connect too (-1 there
                                # never returned for an address nobody serves); forever once connected.
                                allow_reconnect=True, max_reconnect_attempts=1, reconnect_time_wait=0.5,
                                # Nothing buffered by nats-py while disconnected: reports wait in our
                                # own bounded buffer, and a request fails at once instead of leaving late.
                                pending_size=0, disconnected_cb=disconnected, reconnected_cb=reconnected,
                                error_cb=error, **cfg.credential.connect_options())
        except Exception as last:  # noqa: BLE001 - refused, timed out, auth failed: the answer names it
            raise RuntimeRequestError("unavailable", f"cannot connect to NATS at {cfg.servers}: {last!r}",
                                      {"sent": False}) from None
        nc.options["max_reconnect_attempts"] = -1
        metrics.connected.set(1)
        client = cls(nc, cfg, metrics, closing)
        holder.append(client)
        return client

    @property
    def connected(self) -> bool:
        return self._nc.is_connected

    @property
    def buffered(self) -> int:
        """Reports not yet acked by JetStream."""
        return len(self._sender_buffer)

    async def close(self, grace: float = 5.0) -> int:
        """Stop taking commands, send what is buffered for up to `grace`, close. Returns how many
        reports were left unsent (lost with this process)."""
        unsent = await self._sender.stop(grace)
        self._closing.set()
        if self._serving is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._serving, self.config.command_ack_wait)
        if unsent:
            # ERROR without a page: the runtime is outside the control plane and has no pager; the
            # embedding runtime's logs carry it, and close() returns the count.
            log.error("closed with reports unsent", extra={"unsent": unsent})
        # No drain: the command stream is no longer served, and a drain cut short by its bound
        # leaves nats-py's gathered subscription drains to die unobserved ("exception never
        # retrieved"). Flush what was written, then close.
        with contextlib.suppress(Exception):
            await self._nc.flush(timeout=2)
        if not self._nc.is_closed:
            await self._nc.close()
        return unsent

    async def __aenter__(self) -> RuntimeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- questions (request/reply) ------------------------------------------------------

    async def call(self, spec: RpcSpec[Req, Resp], payload: Req, *, timeout: float | None = None) -> Resp:
        """Ask any contract operation (`zimmer.<ctx>.rpc.<op>`), bounded by `timeout` (default
        `rpc_timeout`). Raises `RuntimeRequestError` with the control plane's error code."""
        budget = timeout if timeout is not None else self.config.rpc_timeout
        if not self._nc.is_connected:
            raise self._failed(spec, "unavailable", f"not connected to NATS: {spec.op} was not sent", sent=False)
        due = time.time() + budget
        headers = {DEADLINE_HEADER: deadline_header(due), CALLER_HEADER: self.config.name}
        try:
            msg = await self._nc.request(spec.subject, payload.model_dump_json().encode(), timeout=budget + REPLY_GRACE,
                                         headers=headers)
        except NoRespondersError:
            raise self._failed(spec, "unavailable", f"no {spec.ctx} instance is serving {spec.op}", sent=False) from None
        except (TimeoutError, NatsTimeoutError):
            raise self._failed(spec, "unavailable", f"{spec.ctx} did not answer {spec.op} within {budget:g}s; it may "
                               "have acted before the answer was lost", sent=True) from None
        except Exception as exc:  # noqa: BLE001 - disconnected mid-request, closed, draining
            raise self._failed(spec, "unavailable", f"{spec.op} got no answer: {exc!r}", sent=True) from None
        try:
            return read_reply(spec.response, msg.data, what=spec.op)
        except RuntimeRequestError as exc:
            self.metrics.rpc_errors.labels(spec.op, exc.code).inc()
            raise

    def _failed(self, spec: RpcSpec[Any, Any], code: str, message: str, *, sent: bool) -> RuntimeRequestError:
        self.metrics.rpc_errors.labels(spec.op, code).inc()
        return RuntimeRequestError(code, message, {"dependency": spec.ctx, "sent": sent, "retry_safe": True})

    async def request_turn(self, session_id: int, kind: TurnKindName, *, prompt: str | None = None,
                           attachments: Sequence[dict[str, Any]] = (), idempotency_key: str | None = None,
                           timeout: float | None = None) -> TurnDecision:
        """Ask the gate for a turn. Safe to repeat with the same `idempotency_key` (one is made when
        none is given, and named in a `RuntimeRequestError`'s details)."""
        key = self._key("turn", idempotency_key)
        request = spot.RequestTurn(session_id=session_id, kind=kind, prompt=prompt, attachments=list(attachments),
                                   idempotency_key=key)
        try:
            result = await self.call(spot.REQUEST_TURN, request, timeout=timeout)
        except RuntimeRequestError as exc:
            exc.details.setdefault("idempotency_key", key)
            raise
        return TurnDecision(outcome=result.outcome, starts=result.outcome in ("admitted", "passed"),
                            sentence=result.decision.sentence if result.decision else None, result=result,
                            idempotency_key=key)

    async def pause_until(self, session_id: int, until: datetime, *, prompt: str | None = None, halt: bool = False,
                          timeout: float | None = None) -> spot.SessionView:
        """A wake-up (an agent's wake_me_up_later): the session sleeps until `until`, then its wake
        arrives as a start_turn command with turn_kind `wake`, gated like any turn. `halt` also
        stops a turn running now (a stop_turn command follows)."""
        return await self.call(spot.PAUSE_UNTIL, spot.PauseUntil(session_id=session_id, until=until, prompt=prompt,
                                                                 halt=halt, by=self.config.name), timeout=timeout)

    async def park_for_auth_outage(self, session_id: int, account: str | None = None, *,
                                   timeout: float | None = None) -> spot.SessionView:
        """The session's turn cannot run because its account's credentials are out: it sleeps until
        the account reads active again (report that with `report_quota(status="active")`)."""
        return await self.call(spot.PARK_FOR_AUTH_OUTAGE, spot.ParkForAuthOutage(session_id=session_id,
                                                                                 account=account), timeout=timeout)

    # ---- commands -----------------------------------------------------------------------

    def commands(self) -> CommandInbox:
        """`async for command in client.commands(): ...; await command.ack()`: every command, at
        least once, each id once (a redelivery of a handled one is acked here, unseen)."""
        return self._inbox

    def serve_commands(self, handler: CommandHandler, *, concurrency: int = 8) -> asyncio.Task[None]:
        """Run `handler(command)` for each command in the background, up to `concurrency` at once:
        it returns, the command is acked; it raises, the command comes again after a backoff."""
        if self._serving is not None:
            raise RuntimeError("commands are already being served")
        self._serving = asyncio.create_task(serve(self._inbox, handler, limit=concurrency),
                                            name="zimmer-runtime-commands")
        return self._serving

    # ---- reports ------------------------------------------------------------------------

    async def report_status(self, session_id: int, status: SessionStatusName, *, at: datetime | None = None,
                            key: str | None = None) -> str:
        """running, needs_input (the turn ended and waits on a person), waiting (stopped or asleep:
        the answer to a stop_turn), archived, failed."""
        report = SessionStatusReport(session_id=session_id, status=status, at=at or _now())
        return self._enqueue("session_status", INGEST_SESSION_STATUS, report, key)

    async def report_spend(self, *, request_id: str, harness: str, model: str, session_id: int | None = None,
                           input_tokens: int = 0, output_tokens: int = 0, cache_write_tokens: int = 0,
                           cache_read_tokens: int = 0, at: datetime | None = None, key: str | None = None) -> str:
        """One model request's tokens. The key defaults to one made from `request_id`, so a runtime
        that reports the same request twice (after its own restart) is counted once."""
        report = SpendReport(request_id=request_id, session_id=session_id, harness=harness, model=model,
                             input_tokens=input_tokens, output_tokens=output_tokens,
                             cache_write_tokens=cache_write_tokens, cache_read_tokens=cache_read_tokens, at=at or _now())
        if key is None and KEY.fullmatch(f"{self.config.name}.spend.{request_id}"):
            key = f"{self.config.name}.spend.{request_id}"
        return self._enqueue("spend", INGEST_SPEND, report, key)

    async def report_quota(self, *, account: str, status: AccountStatusName, five_hour: WindowReadingIn | None = None,
                           seven_day: WindowReadingIn | None = None, read_at: datetime | None = None,
                           serving: bool | None = None, key: str | None = None) -> str:
        """A reading of one Claude account's windows (the answer to sample_quota, or unasked)."""
        report = QuotaReadingIn(account=account, status=status, five_hour=five_hour, seven_day=seven_day,
                                read_at=read_at or _now(), serving=serving)
        return self._enqueue("quota_reading", INGEST_QUOTA_READING, report, key)

    async def send_log_lines(self, lines: Sequence[LogLine], *, key: str | None = None) -> list[str]:
        """Lines of sessions' timelines, any sessions, in order, as `log_lines` batches (at most
        1,000 lines and one bus message each); returns each batch's key. Send what a session
        printed every few hundred milliseconds rather than line by line."""
        if not lines:
            return []
        base = self._key("logs", key)
        room = int(self._nc.max_payload or 1024 * 1024) - ENVELOPE_ROOM
        keys = []
        for batch_key, batch in log_batches(lines, key=base, max_bytes=room - 1024, now=_now()):
            keys.append(self._enqueue(LOG_LINES, INGEST_LOGS, batch, batch_key))
        return keys

    async def report_clone(self, session_id: int, clone_path: str, *, agent_subdirectory: str | None = None,
                           scaffolded: bool = False, host: str | None = None, at: datetime | None = None,
                           key: str | None = None) -> str:
        """A working directory made (or re-made) for a session, on `host` (the sweeper there owns
        its disk). Its transcript directory is found from this path; nothing else reports it."""
        report = CloneReport(session_id=session_id, clone_path=clone_path, agent_subdirectory=agent_subdirectory,
                             scaffolded=scaffolded, host=host, at=at or _now())
        return self._enqueue("clone", INGEST_CLONE, report, key)

    async def flush(self, timeout: float = 10.0) -> bool:
        """Wait, at most `timeout`, until every report so far is acked. False: some are still buffered."""
        return await self._sender.flush(timeout)

    def _key(self, kind: str, given: str | None) -> str:
        if given is not None:
            if not KEY.fullmatch(given):
                raise ValueError("an idempotency key is 1 to 200 printable ASCII characters, no spaces")
            return given
        return f"{self.config.name}.{kind}.{uuid.uuid4().hex}"

    def _enqueue(self, kind: str, subject: str, payload: Payload, key: str | None) -> str:
        key = self._key(kind, key)
        body = report_envelope(kind, payload, key=key, source=self.config.name)
        limit = int(self._nc.max_payload or 1024 * 1024) - ENVELOPE_ROOM
        if len(body) > limit:
            raise ReportTooLarge(f"the {kind} report is {len(body):,} bytes; a bus message carries {limit:,}")
        self._sender.add(OutgoingReport(kind=kind, subject=subject, key=key, body=body))
        return key


def _now() -> datetime:
    return datetime.now(UTC)
