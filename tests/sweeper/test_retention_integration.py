"""LogRetentionJob against real PostgreSQL with a frozen clock: exact at the window edges, whole
partitions dropped (each logged with its row estimate), one failed drop does not stop the rest
and pages, the budget is honoured, and a deleted session's lines go with it."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

import asyncpg
from sweeping import eventually, publish_lines  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.budget import SweepBudget
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts.logs import LOG_RETENTION_HEALTH, RetentionHealthQuery
from zimmer_common.contracts.spot import SESSION_DELETED, SessionDeleted
from zimmer_common.db import asyncpg_dsn
from zimmer_sweeper.logs import partitions
from zimmer_sweeper.logs.domain import DayPartition
from zimmer_sweeper.service import build

EDGE = datetime(2026, 12, 1, tzinfo=UTC)  # verbose day 11-23 and other day 09-01 both reach their window here
VERBOSE_DAY, OTHER_DAY = date(2026, 11, 23), date(2026, 9, 1)


async def _fill(svc, sql, day: date, klass: str, session_id: int = 1, rows: int = 3) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    await partitions.create_one(svc.engine, DayPartition(day, klass))  # type: ignore[arg-type]  # klass is one of the literals
    level = "verbose" if klass == "verbose" else "info"
    at = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    await sql("INSERT INTO sweeper.logs (level_class, created_at, session_id, level, message, logged_at, message_id) "
              "SELECT $1, $2, $3, $4, 'line ' || g, $2, $5 || g FROM generate_series(1, $6) g",
              klass, at, session_id, level, f"{day}-{klass}-{session_id}-", rows)


async def started_without_jobs(svc):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """The service up with its job runners stopped (a job already running finishes first): these
    tests call `retention.run` themselves, and neither the log_partitions run the service asks for
    at start nor a scheduled tick may run beside them. Under load the start-up run landed while
    the test held its lock: its CREATE waited behind the blocked DROP, failed and paged."""
    await svc.start()
    for runner in (svc.runner, svc.host_runner):
        if runner is not None:
            await runner.stop(grace=30)


async def _tables(sql) -> set[str]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return {r["relname"] for r in await sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname IN ('logs_verbose', 'logs_other')")}


async def test_retention_is_exact_at_the_window_edges(settings_factory, sql, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    clock = FrozenClock(EDGE - timedelta(microseconds=1))
    svc = build(settings_factory(), clock=clock)
    await started_without_jobs(svc)
    try:
        for day, klass in ((VERBOSE_DAY, "verbose"), (VERBOSE_DAY + timedelta(days=1), "verbose"),
                           (OTHER_DAY, "other"), (OTHER_DAY + timedelta(days=1), "other"), (VERBOSE_DAY, "other")):
            await _fill(svc, sql, day, klass)
        report = await svc.app.retention.run(SweepBudget(90))
        assert report.dropped == [] and report.failed == []  # a microsecond inside: nothing goes
        assert {"logs_verbose_p20261123", "logs_other_p20260901"} <= await _tables(sql)

        clock.advance(timedelta(microseconds=1))
        await sql("ANALYZE sweeper.logs")
        with caplog.at_level(logging.INFO, logger="zimmer.sweeper.retention"):
            report = await svc.app.retention.run(SweepBudget(90))
        assert [(d["partition"], d["estimated_rows"]) for d in report.dropped] == [
            ("logs_other_p20260901", 3), ("logs_verbose_p20261123", 3)]
        left = await _tables(sql)
        assert "logs_verbose_p20261123" not in left and "logs_other_p20260901" not in left
        assert {"logs_verbose_p20261124", "logs_other_p20260902", "logs_other_p20261123"} <= left
        dropped_lines = [r for r in caplog.records if r.getMessage() == "log partition dropped"]
        assert {r.fields["partition"] for r in dropped_lines} == {"logs_other_p20260901", "logs_verbose_p20261123"}
        assert all(r.fields["estimated_rows"] == 3 for r in dropped_lines)
        remaining = (await sql("SELECT count(*) AS n FROM sweeper.logs"))[0]["n"]
        assert remaining == 9
        run = (await sql("SELECT dropped, failed FROM sweeper.retention_runs ORDER BY id DESC LIMIT 1"))[0]
        assert (run["dropped"], run["failed"]) == (2, 0)
    finally:
        await svc.stop()


async def test_one_failed_drop_does_not_stop_the_rest_and_pages_until_it_succeeds(settings_factory, sql,
                                                                                  database_url) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    svc = build(settings_factory(), clock=FrozenClock(EDGE + timedelta(days=2)))
    await started_without_jobs(svc)
    blocker = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        for day in (VERBOSE_DAY - timedelta(days=1), VERBOSE_DAY, VERBOSE_DAY + timedelta(days=1)):
            await _fill(svc, sql, day, "verbose")
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE sweeper.logs_verbose_p20261123 IN ACCESS SHARE MODE")
        report = await svc.app.retention.run(SweepBudget(90))
        assert [d["partition"] for d in report.failed] == ["logs_verbose_p20261123"]
        assert "lock timeout" in report.failed[0]["error"]
        assert [d["partition"] for d in report.dropped] == ["logs_verbose_p20261122", "logs_verbose_p20261124"]
        await tx.rollback()

        pages = await sql("SELECT payload FROM sweeper.outbox WHERE event_type = 'page' ORDER BY id")
        assert len(pages) == 1 and '"still_true": true' in pages[0]["payload"]
        report = await svc.app.retention.run(SweepBudget(90))
        assert [d["partition"] for d in report.dropped] == ["logs_verbose_p20261123"]
        pages = await sql("SELECT payload FROM sweeper.outbox WHERE event_type = 'page' ORDER BY id")
        assert len(pages) == 2 and '"still_true": false' in pages[1]["payload"]  # resolved
    finally:
        await blocker.close()
        await svc.stop()


async def test_a_spent_budget_drops_nothing_and_names_what_it_left(settings_factory, sql, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    svc = build(settings_factory(), clock=FrozenClock(EDGE + timedelta(days=2)))
    await started_without_jobs(svc)
    try:
        await _fill(svc, sql, VERBOSE_DAY, "verbose")
        with caplog.at_level(logging.WARNING, logger="zimmer.sweeper.retention"):
            report = await svc.app.retention.run(SweepBudget(0))
        assert report.budget_exhausted and report.dropped == []
        assert report.unreached == ["logs_verbose_p20261123"]
        assert any("budget spent" in r.getMessage() for r in caplog.records)
    finally:
        await svc.stop()


async def test_a_deleted_sessions_lines_go_with_it_in_slices_and_late_ones_are_not_written(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    for day in (date(2026, 11, 30), date(2026, 12, 1)):
        await _fill(sweeper, sql, day, "other", session_id=5, rows=6_000)
        await _fill(sweeper, sql, day, "other", session_id=6, rows=10)
    await sweeper.bus.publish_event(SESSION_DELETED, "session_deleted",
                                    SessionDeleted(session_id=5, deleted_at=EDGE), event_id="del-5")
    await sweeper.bus.publish_event(SESSION_DELETED, "session_deleted",
                                    SessionDeleted(session_id=5, deleted_at=EDGE), event_id="del-5-again")

    async def purged() -> bool:
        rows = await sql("SELECT finished_at, deleted_rows FROM sweeper.log_purges WHERE session_id = 5")
        return bool(rows) and rows[0]["finished_at"] is not None

    await eventually(purged, "session 5's purge", within=30)
    counts = {r["session_id"]: r["n"] for r in await sql(
        "SELECT session_id, count(*) AS n FROM sweeper.logs GROUP BY session_id")}
    assert counts == {6: 20}
    assert (await sql("SELECT deleted_rows FROM sweeper.log_purges WHERE session_id = 5"))[0]["deleted_rows"] == 12_000
    await publish_lines(sweeper.bus, [("late-5", 5, "info", "after the delete"), ("live-6", 6, "info", "still here")])

    async def live_written() -> bool:
        return bool(await sql("SELECT 1 FROM sweeper.logs WHERE message_id = 'live-6'"))

    await eventually(live_written, "session 6's new line")
    assert not await sql("SELECT 1 FROM sweeper.logs WHERE session_id = 5")


async def test_the_health_reading_comes_from_the_catalog_and_warns_a_week_past_the_window(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async def created_ahead() -> bool:  # the start-up run of log_partitions: today and a week, both classes
        return (await sweeper.bus.request(LOG_RETENTION_HEALTH, RetentionHealthQuery())).partitions == 16

    await eventually(created_ahead, "the partitions the start-up run creates")
    reading = await sweeper.bus.request(LOG_RETENTION_HEALTH, RetentionHealthQuery())
    assert reading.status == "ok" and reading.oldest_log_at is None
    await _fill(sweeper, sql, date(2026, 11, 30), "verbose", rows=50)
    await sql("ANALYZE sweeper.logs")
    reading = await sweeper.bus.request(LOG_RETENTION_HEALTH, RetentionHealthQuery())
    assert reading.estimated_rows == 50 == reading.estimated_verbose_rows
    assert reading.total_bytes > reading.index_bytes > 0
    assert reading.oldest_verbose_log_at == datetime(2026, 11, 30, tzinfo=UTC)
    assert reading.oldest_verbose_log_age_seconds == 36 * 3600
    await _fill(sweeper, sql, date(2026, 8, 25), "other")  # 98.5 days old: more than a week past 90
    reading = await sweeper.bus.request(LOG_RETENTION_HEALTH, RetentionHealthQuery())
    assert reading.status == "warning" and not reading.counts_in_overall
    assert reading.oldest_log_at == datetime(2026, 8, 25, tzinfo=UTC)
    assert "8 days past its 90-day window" in reading.status_note
