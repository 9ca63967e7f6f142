"""Field types of the published language, with their documented maxima.

Every string a request carries has a maximum, the same on REST, MCP and the bus because all
three validate the same contract models. The body limit (`ZIMMER_MAX_BODY_BYTES`, 1 MiB by
default) bounds free-form objects; a prompt at its maximum still fits a bus message (NATS
carries 1 MB) with room for the rest of the request.
"""

from __future__ import annotations

import json
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


def _iso_time_only(value: Any) -> Any:
    # A number is not a time: `{"at": 0}` would otherwise be stored as 1970.
    if isinstance(value, (bool, int, float)):
        raise ValueError("give a time as an ISO 8601 string, e.g. 2026-12-01T14:02:00Z, not a number")
    return value


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)


def _storable_time(value: datetime) -> datetime:
    # PostgreSQL and Python both break at the edges of year 1 and 9999 once an offset moves the
    # instant across them ("0001-01-01T00:00+01:00" is in year 0): refuse what no reading means.
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        instant = aware.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of range (1970 to 9998)") from None
    if not EARLIEST <= instant < LATEST:
        raise ValueError("the time is out of range (1970 to 9998)")
    return value


Time = Annotated[datetime, Field(strict=False), BeforeValidator(_iso_time_only), AfterValidator(_storable_time)]
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
