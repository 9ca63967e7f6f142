"""The alerts list's cursor (issue 27 #13), a pure rule: `next_before` names the last issue a page
carried by (last_seen, id), exactly to the microsecond, and anything this API did not write is
refused as `invalid` naming the field, never read as some other place in the list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zimmer_alerts.domain.issue_cursor import IssueKey, decode_before, encode_before
from zimmer_common.errors import ErrorCode, ZimmerError

INSTANTS = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9998, 12, 31),
                        timezones=st.just(UTC))


@given(INSTANTS, st.integers(min_value=1, max_value=2**63 - 1))
def test_a_key_survives_its_encoding_to_the_microsecond(last_seen: datetime, issue_id: int) -> None:
    before = encode_before(IssueKey(last_seen, issue_id))
    assert decode_before(before) == IssueKey(last_seen, issue_id)
    assert before.isascii() and len(before) <= 200  # the field's bound (AlertQuery.before)
    assert "=" not in before and "/" not in before and "+" not in before  # travels in a URL as it is


def test_the_same_instant_in_another_offset_is_the_same_key() -> None:
    at = datetime(2026, 12, 1, 12, 0, 0, 123_456, tzinfo=UTC)
    elsewhere = at.astimezone(timezone(timedelta(hours=-5)))
    assert encode_before(IssueKey(elsewhere, 7)) == encode_before(IssueKey(at, 7))
    assert decode_before(encode_before(IssueKey(at, 7))).last_seen == at  # a float of seconds would round


def test_the_encoding_is_versioned_base64_of_micros_and_id() -> None:
    assert decode_before("djE6MTox") == IssueKey(datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC), 1)  # v1:1:1


@pytest.mark.parametrize("before", ["", "not a cursor", "djI6MTox",  # v2:1:1
                                    "djE6eDox",  # v1:x:1
                                    "djE6OTk5OTk5OTk5OTk5OTk5OTk5OTk6MQ",  # v1:<past year 9999>:1
                                    "\u00e9t\u00e9"])
def test_a_cursor_this_api_did_not_write_is_refused_naming_the_field(before: str) -> None:
    with pytest.raises(ZimmerError) as refused:
        decode_before(before)
    assert refused.value.code is ErrorCode.INVALID and refused.value.details == {"field": "before"}
