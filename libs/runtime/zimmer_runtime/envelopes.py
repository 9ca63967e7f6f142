"""The wire format, both ways, as pure functions: report envelopes, RPC replies, commands, and
log lines cut into batches that fit a bus message."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import ValidationError

from zimmer_common.contracts.envelope import EventEnvelope, Payload, TypedRpcReply
from zimmer_common.contracts.logs import LINES_MAX, LogLevel, LogLineItem, LogLinesIn
from zimmer_common.contracts.runtime import SAMPLE_QUOTA, START_TURN, STOP_TURN, SampleQuota, StartTurn, StopTurn
from zimmer_runtime.errors import RuntimeRequestError

Resp = TypeVar("Resp", bound=Payload)

# The commands this client decodes, by subject.
COMMAND_MODELS: dict[str, type[Payload]] = {START_TURN: StartTurn, STOP_TURN: StopTurn, SAMPLE_QUOTA: SampleQuota}
COMMAND_KINDS: dict[str, str] = {START_TURN: "start_turn", STOP_TURN: "stop_turn", SAMPLE_QUOTA: "sample_quota"}

# Room in a bus message for headers and the envelope around a report's data.
ENVELOPE_ROOM = 4096
# A log line's message longer than this is cut here before it is sent (the sweeper stores at most
# 16,384 characters of it anyway, marking the cut): a runaway line must not stop its batch fitting.
LINE_TRANSPORT_MAX = 65_536


def report_envelope(kind: str, payload: Payload, *, key: str, source: str, at: datetime | None = None) -> bytes:
    """An `EventEnvelope` whose id is the report's idempotency key (also its Nats-Msg-Id)."""
    envelope = EventEnvelope(id=key, type=kind, version=payload.VERSION, source=source,
                             occurred_at=at or datetime.now(UTC), data=payload.model_dump(mode="json"))
    return envelope.model_dump_json().encode()


def read_reply(response: type[Resp], data: bytes, *, what: str) -> Resp:
    """The result of an RPC reply (`{ok, data}`), or its error (`{error:{code,message,details}}`)
    raised as a `RuntimeRequestError`."""
    try:
        reply = TypedRpcReply[response].model_validate_json(data)  # type: ignore[valid-type]  # the reply's type is the request's, known at run time
    except ValidationError as exc:
        raise RuntimeRequestError("internal", f"the answer to {what} does not match its contract: {exc}") from None
    if not reply.ok:
        err = reply.error
        raise RuntimeRequestError(err.code if err else "internal", err.message if err else "error without a body",
                                  dict(err.details) if err else {})
    return reply.data if reply.data is not None else response.model_validate({})


@dataclass(frozen=True)
class DecodedCommand:
    id: str  # the envelope id: the command's identity across redeliveries
    kind: str
    occurred_at: datetime
    payload: Payload


@dataclass(frozen=True)
class Undecodable:
    reason: str


def decode_command(subject: str, data: bytes) -> DecodedCommand | Undecodable:
    model = COMMAND_MODELS.get(subject)
    if model is None:
        return Undecodable(f"no command is known on {subject}: upgrade zimmer_runtime")
    try:
        envelope = EventEnvelope.model_validate_json(data)
    except ValidationError as exc:
        return Undecodable(f"not an event envelope: {exc.errors()[0]['msg']}")
    if envelope.version > model.VERSION:
        return Undecodable(f"{envelope.type} version {envelope.version} is newer than this client knows "
                           f"({model.VERSION}): upgrade zimmer_runtime")
    try:
        payload = model.model_validate(envelope.data)
    except ValidationError as exc:
        return Undecodable(f"{envelope.type} does not match its contract: {exc.errors()[0]['msg']}")
    return DecodedCommand(envelope.id, COMMAND_KINDS[subject], envelope.occurred_at, payload)


@dataclass(frozen=True)
class LogLine:
    """One line of a session's timeline as the runtime saw it."""

    session_id: int
    level: LogLevel
    message: str
    at: datetime | None = None  # default: when it is sent


def _cut(message: str) -> str:
    if len(message) <= LINE_TRANSPORT_MAX:
        return message
    return message[:LINE_TRANSPORT_MAX] + f" [cut by zimmer_runtime: {len(message) - LINE_TRANSPORT_MAX:,} more characters]"


def log_batches(lines: Sequence[LogLine], *, key: str, max_bytes: int, now: datetime,
                max_lines: int = LINES_MAX) -> list[tuple[str, LogLinesIn]]:
    """`lines` as `log_lines` batches, in order, each at most `max_lines` lines and about
    `max_bytes` of JSON; batch i has key `<key>.<i>` and its lines `<batch key>.<j>` (their
    message ids). Deterministic: the same lines and key give the same batches and ids."""
    batches: list[tuple[str, LogLinesIn]] = []
    current: list[LogLineItem] = []
    size = 0
    for line in lines:
        batch_key = f"{key}.{len(batches)}"
        item = LogLineItem(session_id=line.session_id, level=line.level, message=_cut(line.message),
                           at=line.at or now, message_id=f"{batch_key}.{len(current)}")
        item_size = len(item.model_dump_json()) + 1
        if current and (len(current) >= max_lines or size + item_size > max_bytes):
            batches.append((batch_key, LogLinesIn(lines=current)))
            current, size = [], 0
            item = item.model_copy(update={"message_id": f"{key}.{len(batches)}.0"})
        current.append(item)
        size += item_size
    if current:
        batches.append((f"{key}.{len(batches)}", LogLinesIn(lines=current)))
    return batches


