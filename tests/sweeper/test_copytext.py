"""The ingest's text COPY encoder (`copytext`) on the real PostgreSQL: any storable string, as a
line's text or its message id, and any time with any offset, comes back unchanged; and what is not
storable (NUL, lone surrogates) comes back as `storable` makes it, never failing the COPY."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zimmer_common.db import asyncpg_dsn
from zimmer_sweeper.logs import copytext
from zimmer_sweeper.logs.decode import Refused, decode, decode_models
from zimmer_sweeper.logs.domain import storable

TABLE = """CREATE TABLE copied (created_at timestamptz NOT NULL, level_class text NOT NULL,
    session_id bigint NOT NULL, level text NOT NULL, message text NOT NULL, logged_at timestamptz NOT NULL,
    message_id text NOT NULL)"""

# Storable text: anything but NUL and lone surrogates, with the characters text COPY treats
# specially (and what could pass for its markers: \N, \., a lone backslash at the end) made common.
storable_text = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80),
    st.lists(st.sampled_from(["\\", "\t", "\n", "\r", "N", ".", "\\N", "\\.", "\r\n", "é", "😀", "\x7f", "\x01", " "]),
             max_size=12).map("".join))
any_text = st.text(max_size=40)  # NUL and lone surrogates too
offsets = st.one_of(st.just(UTC), st.timedeltas(-timedelta(hours=23, minutes=59), timedelta(hours=23, minutes=59))
                    .map(lambda d: timezone(timedelta(minutes=round(d.total_seconds() / 60)))),
                    st.timedeltas(-timedelta(hours=23), timedelta(hours=23)).map(
                        lambda d: timezone(timedelta(seconds=int(d.total_seconds())))))
times = st.datetimes(datetime(1970, 1, 2), datetime(9998, 12, 30), timezones=offsets)


@pytest.fixture
def pg(database_url: str) -> Iterator[tuple[asyncio.AbstractEventLoop, asyncpg.Connection]]:
    """A connection on a loop of the test's own, so that hypothesis can drive it example by example."""
    loop = asyncio.new_event_loop()
    conn = loop.run_until_complete(asyncpg.connect(asyncpg_dsn(database_url)))
    loop.run_until_complete(conn.execute(TABLE))
    try:
        yield loop, conn
    finally:
        loop.run_until_complete(conn.close())
        loop.close()


async def _round_trip(conn: asyncpg.Connection, created_at: datetime,
                      rows: list[tuple[str, datetime, str]]) -> list[asyncpg.Record]:
    await conn.execute("TRUNCATE copied")
    data = copytext.buffer(created_at, [copytext.row_tail("other", i + 1, "info", message, at, message_id)
                                        for i, (message, at, message_id) in enumerate(rows)])
    await conn.copy_to_table("copied", columns=list(copytext.COLUMNS), source=data, format="text")
    return list(await conn.fetch("SELECT * FROM copied ORDER BY session_id"))


def test_any_storable_text_and_any_time_come_back_unchanged(pg) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    loop, conn = pg

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(times, st.lists(st.tuples(storable_text, times, storable_text.filter(bool)), min_size=1, max_size=8))
    def check(created_at: datetime, rows: list[tuple[str, datetime, str]]) -> None:
        stored = loop.run_until_complete(_round_trip(conn, created_at, rows))
        assert [(r["message"], r["logged_at"], r["message_id"]) for r in stored] == rows
        assert {r["created_at"] for r in stored} == {created_at}
        assert [(r["session_id"], r["level_class"], r["level"]) for r in stored] == [
            (i + 1, "other", "info") for i in range(len(rows))]

    check()


def test_unstorable_text_comes_back_as_storable_makes_it(pg) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    loop, conn = pg

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.tuples(any_text, any_text.filter(bool)), min_size=1, max_size=8))
    def check(rows: list[tuple[str, str]]) -> None:
        at = datetime(2026, 12, 1, 12, tzinfo=UTC)
        stored = loop.run_until_complete(_round_trip(
            conn, at, [(storable(message), at, copytext.storable_id(mid)) for message, mid in rows]))
        assert [(r["message"], r["message_id"]) for r in stored] == [
            (storable(message), copytext.storable_id(mid)) for message, mid in rows]

    check()


def test_the_escapes_and_an_empty_batch() -> None:
    assert copytext.escape("a\\b\tc\nd\re") == "a\\\\b\\tc\\nd\\re"
    assert copytext.escape("plain é") == "plain é"
    assert copytext.storable_id("id\x00\ud800é") == "id\\u0000\\ud800é"
    assert copytext.buffer(datetime(2026, 12, 1, tzinfo=UTC), []) == b""


def test_decoded_lines_are_stored_as_pydantic_reads_them(pg) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """End to end: a message's lines through `decode` (its fast path when it takes them) and the COPY
    come back as the values pydantic reads from the same message, times and text included."""
    loop, conn = pg
    canonical = st.builds(lambda d, off, frac: d.strftime("%Y-%m-%dT%H:%M:%S") + frac + off,
                          st.datetimes(datetime(1971, 1, 1), datetime(9997, 12, 31)),
                          st.sampled_from(["Z", "+00:00", "-00:00", "+05:30", "-15:59", "+23:59", "-23:59"]),
                          st.sampled_from(["", ".5", ".000001", ".123456"]))
    line = st.fixed_dictionaries({"message_id": st.text(min_size=1, max_size=30), "session_id": st.integers(1, 9),
                                  "level": st.sampled_from(["verbose", "info"]), "message": any_text, "at": canonical})

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(line, min_size=1, max_size=6))
    def check(lines: list[dict[str, object]]) -> None:
        body = json.dumps({"id": "e", "type": "log_lines", "version": 1, "source": "runtime",
                           "occurred_at": "2026-12-01T12:00:00Z", "data": {"lines": lines}}).encode()
        try:
            expected = decode_models(body)
        except Refused:
            return
        created_at = datetime(2026, 12, 1, 12, tzinfo=UTC)

        async def run() -> list[asyncpg.Record]:
            await conn.execute("TRUNCATE copied")
            data = copytext.buffer(created_at, [tail for _sid, tail in decode(body).lines])
            await conn.copy_to_table("copied", columns=list(copytext.COLUMNS), source=data, format="text")
            return list(await conn.fetch("SELECT * FROM copied"))

        stored = loop.run_until_complete(run())
        assert sorted((r["message_id"], r["session_id"], r["level"], r["message"], r["logged_at"]) for r in stored) == \
            sorted((copytext.storable_id(mid), item.session_id, item.level, storable(item.message), item.at)
                   for mid, item in expected.lines)

    check()
