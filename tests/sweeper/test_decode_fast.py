"""The decoder's fast path (`decode._fast`: plain JSON, fields checked by hand) against pydantic's
(`decode.decode_models`), which alone decides what is refused and why: for any message, the two
give the same rows, or the same refusal. And the fast path really is taken for what a runtime
sends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zimmer_common.contracts.fields import ID_MAX
from zimmer_common.contracts.logs import LEVELS, LINES_MAX
from zimmer_sweeper.logs.decode import Decoded, Refused, _fast, decode, decode_models

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _envelope(data: Any, type_: str = "log_lines", **change: Any) -> dict[str, Any]:
    return {"id": "env-1", "type": type_, "version": 1, "source": "runtime", "occurred_at": T0.isoformat(),
            "data": data, **change}


def _line(**change: Any) -> dict[str, Any]:
    return {"message_id": "m-1", "session_id": 7, "level": "info", "message": "hello", "at": T0.isoformat(), **change}


def _read(decoded: Decoded | None) -> tuple[list[tuple[object, ...]], list[str]] | None:
    """The rows as values: the fast path passes a UTC time on as the runtime wrote it (`...Z`),
    pydantic's is formatted again (`+00:00`): the same instant, which is what must agree."""
    if decoded is None:
        return None
    rows = []
    for session_id, tail in decoded.lines:
        klass, sid, level, message, at, message_id = tail.removesuffix("\n").split("\t")
        rows.append((session_id, klass, sid, level, message, datetime.fromisoformat(at), message_id))
    return rows, decoded.refused_lines


def _slow(data: bytes) -> object:
    try:
        return _read(decode_models(data).rows())
    except Refused as exc:
        return f"refused: {exc}"


def _either(data: bytes) -> object:
    try:
        return _read(decode(data))
    except Refused as exc:
        return f"refused: {exc}"


offsets = st.one_of(st.just("Z"), st.integers(-24 * 60 + 1, 24 * 60 - 1).map(
    lambda m: f"{'-' if m < 0 else '+'}{abs(m) // 60:02d}:{abs(m) % 60:02d}"))
canonical_times = st.builds(
    lambda d, off, frac: d.strftime("%Y-%m-%dT%H:%M:%S") + frac + off,
    st.datetimes(datetime(1971, 1, 1), datetime(9997, 12, 31)), offsets,
    st.sampled_from(["", ".5", ".123", ".123456", ".000001"]))
odd_times = st.one_of(
    st.sampled_from(["2026-12-01T12:00:00", "2026-12-01 12:00:00Z", "2026-12-01t12:00:00z", "20261201T120000Z",
                     "2026-12-01T12:00:00+05:60", "2026-12-01T24:00:00Z", "2026-12-01T12:60:00Z",
                     "2026-02-30T12:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00",
                     "1969-12-31T23:59:59Z", "1969-12-31T23:30:00-01:00", "9998-12-31T23:59:59Z",
                     "2026-12-01T12:00:00.1234567Z", "2026-12-01T12:00:00+0100", "2026-12-01T12:00Z",
                     "2026-12-01T12:00:00+01:00:30", "2026-W48-2T12:00:00Z", "2026-12-01T12:00:00-00:00",
                     "\u0662026-12-01T12:00:00Z", ""]),
    st.text(max_size=30))
times = st.one_of(canonical_times, canonical_times, odd_times, st.integers(-5, 2**40),
                  st.floats(allow_nan=False, allow_infinity=False), st.none())
messages = st.one_of(st.text(max_size=60), st.text(alphabet="\\\t\n\r\x00ab\u00e9\U0001f600", max_size=20),
                     st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))
session_ids = st.one_of(st.integers(1, ID_MAX), st.integers(1, 5),
                        st.sampled_from([0, -1, ID_MAX + 1, 3.0, 3.5, True, "3"]), st.none())
levels = st.one_of(st.sampled_from(LEVELS), st.sampled_from(["debug", "INFO", "", None, 1]))
message_ids = st.one_of(st.text(min_size=1, max_size=40), st.sampled_from(["", "x" * 200, "x" * 201, 5, None]))

valid_lines = st.fixed_dictionaries({"message_id": st.text(min_size=1, max_size=40),
                                     "session_id": st.integers(1, ID_MAX), "level": st.sampled_from(LEVELS),
                                     "message": st.text(max_size=60),
                                     "at": canonical_times})
any_lines = st.one_of(
    valid_lines,
    st.fixed_dictionaries({"message_id": message_ids, "session_id": session_ids, "level": levels,
                           "message": messages, "at": times},
                          optional={"extra": st.integers()}),
    st.dictionaries(st.sampled_from(["message_id", "session_id", "level", "message", "at"]), st.integers(1, 9)),
    st.integers(), st.none())
headers = st.fixed_dictionaries({}, optional={
    "id": st.one_of(st.text(max_size=10), st.integers()),
    "version": st.sampled_from([0, 1, 2, 9, "1", 1.0, True, None]),
    "source": st.sampled_from(["runtime", 3, None]),
    "occurred_at": st.one_of(canonical_times, odd_times, st.integers(0, 2**31))})


def _dumps(value: Any) -> bytes:
    # ensure_ascii: a lone surrogate goes out as \ud800, as a CLI's stdout relayed by a runtime can carry it
    return json.dumps(value, allow_nan=False).encode()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_lines, min_size=0, max_size=6), headers, st.sampled_from(["log_lines", "log_line", "spend"]))
def test_the_fast_path_and_pydantic_agree_on_any_message(lines: list[Any], header: dict[str, Any], kind: str) -> None:
    if kind == "log_line":
        data: Any = lines[0] if lines else {}
    else:
        data = {"lines": lines}
    body = _dumps({**_envelope(data, kind), **header})
    assert _either(body) == _slow(body)


@settings(max_examples=300, deadline=None)
@given(st.lists(valid_lines, min_size=1, max_size=20))
def test_what_a_runtime_sends_takes_the_fast_path(lines: list[dict[str, Any]]) -> None:
    body = _dumps(_envelope({"lines": lines}))
    assert _fast(body) is not None and _read(_fast(body)) == _slow(body)
    single = _dumps(_envelope(lines[0], "log_line"))
    assert _fast(single) is not None and _read(_fast(single)) == _slow(single)


@settings(max_examples=300, deadline=None)
@given(st.datetimes(datetime(1970, 1, 2), datetime(9998, 12, 30), timezones=st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=23, minutes=59))])))
def test_the_runtimes_isoformat_times_take_the_fast_path(at: datetime) -> None:
    for text in (at.isoformat(), at.isoformat().replace("+00:00", "Z")):
        body = _dumps(_envelope({"lines": [_line(at=text)]}))
        assert _fast(body) is not None and _read(_fast(body)) == _slow(body)


@pytest.mark.parametrize("change", [
    {"at": "2026-12-01T12:00:00+05:60"}, {"at": "2026-12-01T12:00:00"}, {"at": 0}, {"at": "0001-01-01T00:00:00+01:00"},
    {"session_id": 3.0}, {"session_id": "3"}, {"session_id": 0}, {"level": "debug"}, {"message_id": "x" * 201},
    {"message": "x\ud800y"},
])
def test_an_unusual_line_goes_to_pydantic_whose_answer_stands(change: dict[str, Any]) -> None:
    body = _dumps(_envelope({"lines": [_line(), _line(**{"message_id": "m-2", **change})]}))
    assert _fast(body) is None
    assert _either(body) == _slow(body)


def test_the_rows_carry_storable_text_and_the_refusals_their_reasons() -> None:
    body = _dumps(_envelope({"lines": [
        _line(message="a\x00b\tc\\"), _line(message_id="m-2", at="2026-12-01T12:00:00+05:60"),
        _line(message_id="id\x00\n", message="x" * (LINES_MAX * 20)),
        _line(message_id="id\ud800")]}))  # pydantic refuses a lone surrogate in a length-checked string
    decoded = decode(body)
    assert [sid for sid, _tail in decoded.lines] == [7, 7]
    assert decoded.lines[0][1] == f"other\t7\tinfo\ta\\\\u0000b\\tc\\\\\t{T0.isoformat()}\tm-1\n"
    assert decoded.lines[1][1].endswith("\tid\\\\u0000\\n\n")  # a NUL in an id no longer fails every write
    assert "more characters cut]" in decoded.lines[1][1]
    assert [why.split(":")[0:2] for why in decoded.refused_lines] == [["lines[1]", " at"], ["lines[3]", " message_id"]]
