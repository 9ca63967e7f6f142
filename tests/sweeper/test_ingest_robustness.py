"""The log ingest under hostile input and a failing database: what is not a log line is refused
and terminated (the rest of its batch is written), unstorable text is escaped rather than lost,
a day with no partition yet is created on the spot, and a write that fails is retried with
nothing lost or doubled."""

from __future__ import annotations

import json
from datetime import timedelta

from sweeping import T0, eventually, publish_lines  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts.logs import INGEST_LOGS, MESSAGE_MAX
from zimmer_common.contracts.subjects import Stream
from zimmer_sweeper.logs.ingest import DURABLE, BatchSizing


def _raw(mid: str, data: object, type_: str = "log_line", version: int = 1) -> bytes:
    return json.dumps({"id": mid, "type": type_, "version": version, "source": "runtime",
                       "occurred_at": T0.isoformat(), "data": data}).encode()


async def test_what_is_not_a_log_line_is_refused_and_unstorable_text_is_escaped(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    good = {"session_id": 3, "level": "info", "at": T0.isoformat()}
    await sweeper.bus.publish_many([
        (INGEST_LOGS, b"not json", "bad-1"),
        (INGEST_LOGS, _raw("bad-2", {**good, "message": "x"}, type_="spend"), "bad-2"),
        (INGEST_LOGS, _raw("bad-3", {**good, "message": "x"}, version=9), "bad-3"),
        (INGEST_LOGS, _raw("bad-4", {**good, "level": "debug", "message": "x"}), "bad-4"),
        (INGEST_LOGS, _raw("bad-5", {**good, "session_id": 0, "message": "x"}), "bad-5"),
        (INGEST_LOGS, _raw("bad-6", {**good, "at": 0, "message": "x"}), "bad-6"),
        (INGEST_LOGS, _raw("nul", {**good, "message": "a\u0000b"}), "nul"),
        (INGEST_LOGS, b'{"id":"sur","type":"log_line","version":1,"source":"r","occurred_at":"2026-12-01T12:00:00Z",'
                      b'"data":{"session_id":3,"level":"info","at":"2026-12-01T12:00:00Z","message":"x\\ud800y"}}',
         "sur"),
        (INGEST_LOGS, _raw("long", {**good, "message": "z" * (MESSAGE_MAX * 4)}), "long"),
        (INGEST_LOGS, _raw("ok", {**good, "message": "fine"}), "ok"),
    ])

    async def written() -> bool:
        return len(await sql("SELECT 1 FROM sweeper.logs")) == 4

    await eventually(written, "the four storable lines")
    stored = {r["message_id"]: r["message"] for r in await sql("SELECT message_id, message FROM sweeper.logs")}
    assert stored["nul"] == "a\\u0000b" and stored["sur"] == "x\\ud800y" and stored["ok"] == "fine"
    assert len(stored["long"]) < MESSAGE_MAX + 50 and stored["long"].endswith("more characters cut]")
    info = await sweeper.bus.js.consumer_info(Stream.INGEST.value, DURABLE)
    assert info.num_pending == 0 and info.num_ack_pending == 0  # the refused ones were terminated, not retried
    metrics = sweeper.app.metrics
    assert metrics.lines.labels("refused")._value.get() == 6


async def test_a_day_without_a_partition_gets_one_when_its_first_line_arrives(sweeper, sql, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    clock.advance(timedelta(days=40))  # far past the week log_partitions created ahead
    await publish_lines(sweeper.bus, [("late-day", 4, "info", "a quiet month later")])

    async def written() -> bool:
        rows = await sql("SELECT tableoid::regclass::text AS part FROM sweeper.logs WHERE message_id = 'late-day'")
        return [r["part"] for r in rows] == ["sweeper.logs_other_p20270110"]

    await eventually(written, "the line in its new day's partition")


async def test_a_failing_write_is_retried_until_it_lands_with_nothing_lost_or_doubled(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await publish_lines(sweeper.bus, [("before", 8, "info", "first")])

    async def first() -> bool:
        return bool(await sql("SELECT 1 FROM sweeper.logs WHERE message_id = 'before'"))

    await eventually(first, "the first line")
    await sql("ALTER TABLE sweeper.ingest_ledger RENAME TO ingest_ledger_away")  # every write now fails
    await publish_lines(sweeper.bus, [(f"during-{i}", 8, "warning", f"line {i}") for i in range(200)])

    async def refused_a_while() -> bool:
        return sweeper.app.ingest._failures >= 2  # noqa: SLF001 - the loop's own count of failed writes

    await eventually(refused_a_while, "two failed writes", within=30)
    assert len(await sql("SELECT 1 FROM sweeper.logs")) == 1
    assert sweeper.app.ingest.sizing.size == sweeper.app.ingest.sizing.minimum  # fetches less while it fails
    await sql("ALTER TABLE sweeper.ingest_ledger_away RENAME TO ingest_ledger")

    async def all_written() -> bool:
        return len(await sql("SELECT 1 FROM sweeper.logs")) == 201

    await eventually(all_written, "the 200 lines after the database recovers", within=60)
    assert len(await sql("SELECT DISTINCT message_id FROM sweeper.logs")) == 201


def test_batch_sizing_halves_after_a_slow_write_and_grows_after_quick_full_ones() -> None:
    sizing = BatchSizing(size=400, minimum=50, maximum=1000, per_message=1)
    sizing.after_write(2.0, 400)
    assert sizing.size == 200
    sizing.after_write(0.01, 200)
    assert sizing.size == 300
    sizing.after_write(0.01, 10)  # a short batch says nothing about capacity
    assert sizing.size == 300
    for _ in range(10):
        sizing.after_write(0.01, sizing.size)
    assert sizing.size == 1000
    sizing.after_failure()
    assert sizing.size == 50
    for _ in range(10):
        sizing.after_write(5.0, 50)
    assert sizing.size == 50


def test_the_first_fetch_and_the_one_after_a_failure_are_bounded_by_the_line_cap() -> None:
    sizing = BatchSizing(size=500, minimum=50, maximum=2000, max_lines=20_000)
    assert sizing.size == 20  # nothing seen yet: messages may be full 1,000-line batches
    sizing.after_write(0.01, 20, 20)  # single lines
    assert sizing.size == 30
    sizing.after_write(0.01, 30, 30 * 1000)
    sizing.after_failure()
    assert sizing.size == 20


def test_batch_sizing_keeps_a_transaction_under_its_line_cap_when_messages_are_batches() -> None:
    sizing = BatchSizing(size=500, minimum=50, maximum=2000, max_lines=20_000, per_message=1)
    sizing.after_write(0.01, 500, 500 * 800)  # 800 lines a message: 25 messages hold the cap
    assert sizing.size == 25
    sizing.after_write(0.01, 25, 25)  # single lines again: grows back by half a quick full batch at a time
    assert sizing.size == 37


async def test_a_batch_keeps_its_good_lines_and_refuses_its_bad_ones_alone(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    def line(mid: str, **change: object) -> dict[str, object]:
        return {"message_id": mid, "session_id": 9, "level": "info", "message": mid, "at": T0.isoformat(), **change}

    batch = _raw("batch-1", {"lines": [
        line("good-1"), line("bad-level", level="debug"), line("good-2", message="x\ud800y"),
        line("bad-year", at="0001-01-01T00:00:00+01:00"), line("bad-naive", at="2026-12-01T12:00:00"),
        line("bad-number", at=0), line("good-3", level="verbose")]}, type_="log_lines")
    await sweeper.bus.publish_many([
        (INGEST_LOGS, batch, "batch-1"),
        (INGEST_LOGS, _raw("batch-2", {"lines": []}, type_="log_lines"), "batch-2"),
        (INGEST_LOGS, _raw("batch-3", {"lines": [line("only-bad", session_id=-1)]}, type_="log_lines"), "batch-3")])

    async def written() -> bool:
        return len(await sql("SELECT 1 FROM sweeper.logs")) == 3

    await eventually(written, "the batch's three good lines")
    stored = {r["message_id"]: r["message"] for r in await sql("SELECT message_id, message FROM sweeper.logs")}
    assert stored == {"good-1": "good-1", "good-2": "x\\ud800y", "good-3": "good-3"}
    info = await sweeper.bus.js.consumer_info(Stream.INGEST.value, DURABLE)
    assert info.num_pending == 0 and info.num_ack_pending == 0
    assert sweeper.app.metrics.lines.labels("refused")._value.get() == 4 + 2  # four lines, two whole messages


async def test_the_ingest_loop_outlives_a_batch_that_fails_outside_its_write(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Whatever a batch raises beyond the write `commit` handles, the loop logs it and goes on:
    a dead loop would stop every session's timeline until the lag alarm, a day later."""
    ingest = sweeper.app.ingest
    calls = {"n": 0}

    def exploding(outcome, seconds, size):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a metrics callback that breaks")

    ingest.on_batch = exploding
    await publish_lines(sweeper.bus, [("first", 11, "info", "one")])

    async def first_written() -> bool:
        return calls["n"] >= 1

    await eventually(first_written, "the first batch")
    await publish_lines(sweeper.bus, [("second", 11, "info", "two")])

    async def second_written() -> bool:
        return bool(await sql("SELECT 1 FROM sweeper.logs WHERE message_id = 'second'"))

    await eventually(second_written, "the batch after the failing one")
