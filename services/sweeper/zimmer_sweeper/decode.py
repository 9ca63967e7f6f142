"""Reading one ingest message into the lines it carries (`zimmer_common.contracts.logs`).

A message is a `log_line` (one line; its envelope id is the line's message id) or a `log_lines`
batch (each line with its own message id). The fast path validates the whole message in one
pydantic pass. When that fails the message is read again slowly, so that one bad line in a
batch is refused alone and the rest are kept, and so that a lone surrogate escape (`\\ud800`,
which pydantic's JSON parser refuses as invalid JSON and a CLI's stdout can carry) reaches
`storable` instead of costing the line. A message that yields no line is refused whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.fields import EARLIEST, LATEST
from zimmer_common.contracts.logs import LINES_MAX, LOG_LINE, LOG_LINES, LogLineIn, LogLineItem, LogLinesIn

KNOWN_VERSION = LogLineIn.VERSION


class LineEnvelope(EventEnvelope):
    type: Literal["log_line"]  # type: ignore[assignment]
    data: LogLineIn  # type: ignore[assignment]


class LinesEnvelope(EventEnvelope):
    type: Literal["log_lines"]  # type: ignore[assignment]
    data: LogLinesIn  # type: ignore[assignment]


_ENVELOPE: TypeAdapter[LineEnvelope | LinesEnvelope] = TypeAdapter(
    Annotated[LineEnvelope | LinesEnvelope, Field(discriminator="type")])


class Refused(ValueError):
    """The message carries no line that can be written."""


@dataclass
class Decoded:
    lines: list[tuple[str, LogLineIn]]  # (message id, line)
    refused_lines: list[str] = field(default_factory=list)  # why each refused line of a batch was refused


def decode(data: bytes) -> Decoded:
    try:
        envelope = _ENVELOPE.validate_json(data)
    except ValidationError:
        return _in_range(_salvage(data))
    _check_version(envelope.version)
    if isinstance(envelope, LineEnvelope):
        return _in_range(Decoded([(envelope.id, envelope.data)]))
    return _in_range(Decoded([(line.message_id, line) for line in envelope.data.lines]))


def _in_range(decoded: Decoded) -> Decoded:
    """`at` is checked here, in bulk, rather than by a validator per line (contracts.fields.AwareTime)."""
    if all(EARLIEST <= line.at < LATEST for _mid, line in decoded.lines):
        return decoded
    kept = []
    for message_id, line in decoded.lines:
        if EARLIEST <= line.at < LATEST:
            kept.append((message_id, line))
        else:
            decoded.refused_lines.append(f"{message_id[:50]}: at is out of range (1970 to 9998)")
    if not kept:
        raise Refused("no line has a time in range (1970 to 9998)")
    decoded.lines = kept
    return decoded


def _check_version(version: int) -> None:
    if version > KNOWN_VERSION:
        raise Refused(f"contract version {version} is newer than this sweeper knows ({KNOWN_VERSION}); upgrade it")


def _salvage(data: bytes) -> Decoded:
    try:
        parsed: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise Refused("not JSON") from None
    if not isinstance(parsed, dict):
        raise Refused("not a JSON object")
    kind = parsed.get("type")
    if kind not in (LOG_LINE, LOG_LINES):
        raise Refused(f"type {str(kind)[:50]!r} is not {LOG_LINE} or {LOG_LINES}")
    if kind == LOG_LINE:
        try:
            one = LineEnvelope.model_validate(parsed)
        except ValidationError as exc:
            raise Refused(_why(exc)) from None
        _check_version(one.version)
        return Decoded([(one.id, one.data)])
    try:
        header = EventEnvelope.model_validate({**parsed, "data": {}})
    except ValidationError as exc:
        raise Refused(_why(exc)) from None
    _check_version(header.version)
    items = (parsed.get("data") or {}).get("lines") if isinstance(parsed.get("data"), dict) else None
    if not isinstance(items, list) or not 1 <= len(items) <= LINES_MAX:
        raise Refused(f"data.lines must be a list of 1 to {LINES_MAX} lines")
    decoded = Decoded([])
    for i, item in enumerate(items):
        try:
            line = LogLineItem.model_validate(item)
        except ValidationError as exc:
            decoded.refused_lines.append(f"lines[{i}]: {_why(exc)}")
            continue
        decoded.lines.append((line.message_id, line))
    if not decoded.lines:
        raise Refused("no line in the batch is valid: " + "; ".join(decoded.refused_lines[:3]))
    return decoded


def _why(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"[:300]
