"""Where a page of the alerts ledger's issues ends (issue 27 #13): the last issue's (last_seen, id),
the list's own order, encoded as an opaque string.

A keyset, not an offset: pages keep arriving while the list is read, and an offset would shift
under them (a new issue at the front pushes the rows one place back, so the next page repeats a
row). `last_seen` only ever grows, so an issue the reader has passed can only move further ahead
of the cursor: no issue shows on two pages.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from zimmer_common.errors import ErrorCode, ZimmerError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
VERSION = "v1"


@dataclass(frozen=True)
class IssueKey:
    """An issue's place in the list (newest `last_seen` first, the higher id first among equals)."""

    last_seen: datetime
    id: int


def encode_before(key: IssueKey) -> str:
    # Whole microseconds (PostgreSQL's precision): a float of seconds would round, and the cursor
    # would then skip or repeat the issue it names.
    micros = (key.last_seen - EPOCH) // timedelta(microseconds=1)
    return base64.urlsafe_b64encode(f"{VERSION}:{micros}:{key.id}".encode()).decode().rstrip("=")


def decode_before(before: str) -> IssueKey:
    """The key `encode_before` wrote; anything else is refused as `invalid`, naming the field."""
    try:
        raw = base64.urlsafe_b64decode(before + "=" * (-len(before) % 4)).decode("ascii")
        version, micros, issue_id = raw.split(":")
        if version != VERSION:
            raise ValueError(version)
        return IssueKey(EPOCH + timedelta(microseconds=int(micros)), int(issue_id))
    except (ValueError, UnicodeDecodeError, binascii.Error, OverflowError):
        raise ZimmerError(ErrorCode.INVALID, "before is not a cursor this API returned; pass next_before as it came",
                          {"field": "before"}) from None
