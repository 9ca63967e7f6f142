"""Reading one ingest message into the lines it carries (`zimmer_common.contracts.logs`).

A message is a `log_line` (one line; its envelope id is the line's message id) or a `log_lines`
batch (each line with its own message id). The pydantic path validates the whole message in one
pass. When that fails the message is read again slowly, so that one bad line in a
batch is refused alone and the rest are kept, and so that a lone surrogate escape (`\\ud800`,
which pydantic's JSON parser refuses as invalid JSON and a CLI's stdout can carry) reaches
`storable` instead of costing the line. A message that yields no line is refused whole.

Before either, `_fast` reads the message as plain JSON (pydantic's own parser, `from_json`) and
checks each line's few fields by hand, without building a model per line: it accepts only
messages every line of which is plainly valid (types exact, `at` in the one ISO 8601 shape below)
and hands anything else, unchanged, to the pydantic paths. So what is refused, and why, is
decided by pydantic alone; `_fast` only takes the common case sooner (tests/sweeper/
test_decode_fast.py checks the two agree). Each line comes out as its COPY row (`copytext`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import from_json

from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.fields import EARLIEST, ID_MAX, LATEST
from zimmer_common.contracts.logs import LINES_MAX, LOG_LINE, LOG_LINES, MESSAGE_MAX, LogLineIn, LogLineItem, LogLinesIn
from zimmer_sweeper.logs.copytext import escape, row_tail, storable_id, utc_text
from zimmer_sweeper.logs.domain import level_class, storable

KNOWN_VERSION = LogLineIn.VERSION


class LineEnvelope(EventEnvelope):
    type: Literal["log_line"]
    data: LogLineIn  # type: ignore[assignment]  # the envelope's data, narrowed to this event's payload


class LinesEnvelope(EventEnvelope):
    type: Literal["log_lines"]
    data: LogLinesIn  # type: ignore[assignment]  # the envelope's data, narrowed to this event's payload


_ENVELOPE: TypeAdapter[LineEnvelope | LinesEnvelope] = TypeAdapter(
    Annotated[LineEnvelope | LinesEnvelope, Field(discriminator="type")])


class Refused(ValueError):
    """The message carries no line that can be written."""


@dataclass
class Decoded:
    lines: list[tuple[int, str]]  # (session id, the line's COPY row after created_at: copytext.row_tail)
    refused_lines: list[str] = field(default_factory=list)  # why each refused line of a batch was refused


@dataclass
class _Models:
    lines: list[tuple[str, LogLineIn]]  # (message id, line)
    refused_lines: list[str] = field(default_factory=list)

    def rows(self) -> Decoded:
        return Decoded([_row(mid, line.session_id, line.level, line.message, line.at) for mid, line in self.lines],
                       self.refused_lines)


def _row(message_id: str, session_id: int, level: str, message: str, at: datetime) -> tuple[int, str]:
    return session_id, row_tail(level_class(level), session_id, level,  # type: ignore[arg-type]  # the contract validated the level
                                storable(message), at, storable_id(message_id))


def decode(data: bytes) -> Decoded:
    fast = _fast(data)
    if fast is not None:
        return fast
    return decode_models(data).rows()


# `at` as the runtime writes it (`datetime.isoformat()`, or with a Z): date, T, time, optional
# fraction, an offset. In this shape `datetime.fromisoformat` and pydantic read the same instant;
# outside it they differ (pydantic refuses an offset of +05:60, a basic-format date, a space for the
# T...), so anything else goes to pydantic. Hours, minutes, seconds and days are checked by
# fromisoformat, which refuses what pydantic refuses there (24:00, :60, Feb 30).
_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
                 r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])\Z")
_CLASS = {"verbose": "verbose", "info": "other", "warning": "other", "error": "other"}
_fromiso = datetime.fromisoformat
_at_shape = _AT.match


def _fast(data: bytes) -> Decoded | None:
    """The message's rows if it and every line in it are plainly valid; None for anything else
    (pydantic then decides). Never refuses: a message it does not take is decoded as before.

    Per line (~2 µs): the dict lookups and type checks, `at`'s shape and `fromisoformat`, one
    f-string. `at` goes to PostgreSQL as the runtime wrote it when that is UTC (`Z`, `+00:00`: the
    same instant in the same syntax timestamptz reads), else converted to UTC (`copytext.utc_text`).
    A message whose JSON holds no backslash has no escape in any string, hence (JSON forbids raw
    control characters) no tab, newline, carriage return, backslash, NUL or lone surrogate: its
    text needs no COPY escaping and only the length cut of `storable`."""
    try:
        parsed = from_json(data)
        kind = parsed["type"]
        version = parsed["version"]
        occurred_at = parsed["occurred_at"]
        if (type(parsed["id"]) is not str or type(parsed["source"]) is not str or type(version) is not int
                or version > KNOWN_VERSION or type(occurred_at) is not str or not _at_shape(occurred_at)):
            return None
        _fromiso(occurred_at)
        data_ = parsed["data"]
        if type(data_) is not dict:
            return None
        if kind == LOG_LINES:
            items = data_["lines"]
            if type(items) is not list or not 1 <= len(items) <= LINES_MAX:
                return None
            with_ids = True
        elif kind == LOG_LINE:
            items = [data_]
            with_ids = False
        else:
            return None
        clean = b"\\" not in data
        at_shape, fromiso, classes, earliest, latest = _at_shape, _fromiso, _CLASS, EARLIEST, LATEST
        rows = []
        append = rows.append
        message_id = parsed["id"]
        for item in items:
            if type(item) is not dict:
                return None
            session_id = item["session_id"]
            level = item["level"]
            message = item["message"]
            at_text = item["at"]
            if with_ids:
                message_id = item["message_id"]
                if type(message_id) is not str or not 1 <= len(message_id) <= 200:
                    return None
            if (type(session_id) is not int or not 1 <= session_id <= ID_MAX or type(level) is not str
                    or level not in classes or type(message) is not str or type(at_text) is not str
                    or not at_shape(at_text)):
                return None
            at = fromiso(at_text)
            if not earliest <= at < latest:
                return None  # refused, and said why, by the slow path
            if not (at_text[-1] == "Z" or at_text[-6:] == "+00:00"):
                at_text = utc_text(at)
            if clean:
                if len(message) > MESSAGE_MAX:
                    message = storable(message)
                append((session_id, f"{classes[level]}\t{session_id}\t{level}\t{message}\t{at_text}\t{message_id}\n"))
            else:
                append((session_id, f"{classes[level]}\t{session_id}\t{level}\t{escape(storable(message))}\t"
                                    f"{at_text}\t{escape(storable_id(message_id))}\n"))
        return Decoded(rows)
    except (ValueError, KeyError, TypeError, OverflowError):
        return None


def decode_models(data: bytes) -> _Models:
    """The message read by pydantic: the whole envelope in one pass, or line by line (`_salvage`)."""
    try:
        envelope = _ENVELOPE.validate_json(data)
    except ValidationError:
        return _in_range(_salvage(data))
    _check_version(envelope.version)
    if isinstance(envelope, LineEnvelope):
        return _in_range(_Models([(envelope.id, envelope.data)]))
    return _in_range(_Models([(line.message_id, line) for line in envelope.data.lines]))


def _in_range(decoded: _Models) -> _Models:
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


def _salvage(data: bytes) -> _Models:
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
        return _Models([(one.id, one.data)])
    try:
        header = EventEnvelope.model_validate({**parsed, "data": {}})
    except ValidationError as exc:
        raise Refused(_why(exc)) from None
    _check_version(header.version)
    items = (parsed.get("data") or {}).get("lines") if isinstance(parsed.get("data"), dict) else None
    if not isinstance(items, list) or not 1 <= len(items) <= LINES_MAX:
        raise Refused(f"data.lines must be a list of 1 to {LINES_MAX} lines")
    decoded = _Models([])
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
