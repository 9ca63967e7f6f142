"""Field types of the published language, with their documented maxima.

Every string a request carries has a maximum, the same on REST, MCP and the bus because all
three validate the same contract models. The body limit (`ZIMMER_MAX_BODY_BYTES`, 1 MiB by
default) bounds free-form objects; a prompt at its maximum still fits a bus message (NATS
carries 1 MB) with room for the rest of the request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError

PROMPT_MAX: Final = 100_000  # characters; at 4 bytes each still inside one bus message
LONG_TEXT_MAX: Final = 2_000  # reasons, goals, URLs
TITLE_MAX: Final = 500
NAME_MAX: Final = 200  # keys, names, accounts, models, idempotency keys
# An item's free-form payload, as compact JSON (issue 27 #13): 64 KB keeps any row of a list far
# below one bus message, so a page of rows always holds at least one (see `zimmer_common.byte_pages`).
PAYLOAD_MAX_BYTES: Final = 65_536
ID_MAX: Final = 2**63 - 1  # bigint identity columns
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1


# A time, on every surface and in the query string as in a body: an RFC 3339 date-time (what
# JSON Schema's `date-time` format means: `T`, seconds, and the offset, `Z` or ±hh:mm), with at
# most 6 fractional digits (microseconds: what PostgreSQL and Python keep), in a year from 1970 to
# 9998 as written. The OpenAPI document states this pattern beside the format, so what it calls
# valid is exactly what is taken. Not a number (`{"at": 0}` would otherwise be 1970), not a bare
# date, not a time without its offset (which instant would it be?).
TIME_PATTERN: Final = (r"^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
                       r"-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                       r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
                       r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")
_TIME = re.compile(TIME_PATTERN)
TIME_RULE: Final = ("an RFC 3339 date-time with its offset, in a year from 1970 to 9998, "
                    "e.g. 2026-12-01T14:02:00Z or 2026-12-01T15:02:00.5+01:00")


def _iso_time_only(value: Any) -> Any:
    # A number is not a time: `{"at": 0}` would otherwise be stored as 1970.
    if isinstance(value, (bool, int, float)):
        raise ValueError("give a time as an ISO 8601 string, e.g. 2026-12-01T14:02:00Z, not a number")
    return value


def _rfc3339_only(value: Any) -> Any:
    # A string is a time only in the one spelling the schema states; a `datetime` (built in
    # Python, never from the wire) is taken as it is and checked for its year below.
    if isinstance(value, str) and _TIME.fullmatch(value) is None:
        raise ValueError(f"give a time as {TIME_RULE}")
    return _iso_time_only(value)


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)


def _storable_time(value: datetime) -> datetime:
    # The year as written, 1970 to 9998: inside the edges where PostgreSQL and Python break (year
    # 1 and 9999, once an offset moves the instant across them), and what the pattern states.
    if not EARLIEST.year <= value.year < LATEST.year:
        raise ValueError("the time is out of range (1970 to 9998)")
    return value


Time = Annotated[datetime, Field(strict=False, json_schema_extra={"pattern": TIME_PATTERN}),
                 BeforeValidator(_rfc3339_only), AfterValidator(_storable_time)]
# The ingest hot path's time (log lines, thousands a second): it must carry its offset, and a
# number is refused as for `Time`, but the range is the consumer's to check in bulk
# (`EARLIEST <= at < LATEST`), which costs a comparison per value instead of a Python call.
AwareTime = Annotated[AwareDatetime, BeforeValidator(_iso_time_only)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=NAME_MAX)]
ShortText = Annotated[str, StringConstraints(max_length=NAME_MAX)]
Title = Annotated[str, StringConstraints(max_length=TITLE_MAX)]
LongText = Annotated[str, StringConstraints(max_length=LONG_TEXT_MAX)]
Prompt = Annotated[str, StringConstraints(max_length=PROMPT_MAX)]
IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=NAME_MAX, pattern=r"^[\x21-\x7e]+$"),
                           Field(description="Repeat the request with the same key and get the first answer back, "
                                             "with nothing done twice (printable ASCII, at most 200 characters)")]
# What the OpenAPI document states about strings, where pydantic's own constraints cannot: a
# string a request carries never holds NUL (U+0000: PostgreSQL cannot store it; `Request` refuses
# it anywhere, free-form objects and their keys included), and some texts must have words in them
# (a character that is not whitespace as Python's `str.isspace` has it, which `strip()` keeps).
NO_NUL: Final = r"^[^\x00]*$"
WORDS: Final = (r"^[^\x00]*[^\x00\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
                 r"[^\x00]*$")  # and no NUL, as every string


def given(name: str) -> dict[str, Any]:
    """JSON Schema: `name` is present and not null."""
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def at_least_one_of(*names: str, also: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """A model's `json_schema_extra`: at least one of `names` is given (not null), or one of `also` holds."""
    return {"anyOf": [*(given(n) for n in names), *also]}


def exactly_one_of(*names: str) -> dict[str, Any]:
    """A model's `json_schema_extra`: exactly one of `names` is given (not null)."""
    return {"oneOf": [given(n) for n in names]}


RowId = Annotated[int, Field(ge=1, le=ID_MAX)]
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
JsonObject = dict[str, Any]  # free-form; bounded by the body limit, storable strings only

# What a page "ends early" means, on every list that carries it (issue 27 #13, `zimmer_common.byte_pages`).
NEXT_OFFSET = Field(default=None, description=(
    "Where the next page starts: ask again with this as `offset`. Null when this page reaches the end. A page "
    "ends before `limit` rows when its rows reach the byte bound of one answer, so a list never fails for its "
    "size: follow `next_offset`, never `offset + limit`"))


@dataclass(frozen=True)
class MaxBytes:
    """A bound on a value's compact JSON encoding, in bytes. Pydantic ignores it; the validator
    beside it enforces it and the generated limits table (`contracts.limits`) reads it."""

    max_bytes: int


def json_bytes(value: Any) -> int:
    """The size of `value` as compact JSON in UTF-8, as the bus and the database carry it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def payload_too_large(value: dict[str, Any]) -> str | None:
    """Why a payload is refused for its size, naming the limit; None when it fits."""
    size = json_bytes(value)
    if size <= PAYLOAD_MAX_BYTES:
        return None
    return (f"the payload is {size:,} bytes as compact JSON; an item's payload is at most "
            f"{PAYLOAD_MAX_BYTES:,} bytes (64 KB)")


def _bounded_payload(value: dict[str, Any]) -> dict[str, Any]:
    why = payload_too_large(value)
    if why is not None:
        raise PydanticCustomError("too_large", "{why}", {"why": why})
    return value


# An item's payload: free-form, storable strings only, at most PAYLOAD_MAX_BYTES as compact JSON.
ItemPayload = Annotated[JsonObject, MaxBytes(PAYLOAD_MAX_BYTES), AfterValidator(_bounded_payload)]
