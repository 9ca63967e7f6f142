"""Log retention's rules as plain functions (seed 003 "Two windows"; DESIGN §9): a partition is
dropped only when every row it can hold is past its window, and no row outlives its window by
more than the partition's day."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from zimmer_common.contracts.logs import MESSAGE_MAX
from zimmer_sweeper.logs.domain import (
    WINDOWS,
    DayPartition,
    OldestReading,
    expired,
    level_class,
    oldest,
    status,
    storable,
    to_create,
    to_drop,
)

US = timedelta(microseconds=1)
D = date(2026, 9, 1)


def test_names_round_trip_and_other_tables_are_not_partitions() -> None:
    p = DayPartition(D, "verbose")
    assert p.name == "logs_verbose_p20260901" and p.parent == "logs_verbose"
    assert DayPartition.parse(p.name) == p
    assert DayPartition.parse("logs_other_p20261301") is None  # month 13
    assert DayPartition.parse("logs_verbose") is None and DayPartition.parse("ingest_ledger") is None
    assert p.lower == datetime(2026, 9, 1, tzinfo=UTC) and p.upper == datetime(2026, 9, 2, tzinfo=UTC)


def test_verbose_goes_at_seven_days_past_the_end_of_its_day_not_a_microsecond_before() -> None:
    p = DayPartition(D, "verbose")
    edge = datetime(2026, 9, 9, tzinfo=UTC)  # end of the day + 7 days
    assert not expired(p, edge - US)
    assert expired(p, edge)


def test_other_levels_go_at_ninety_days_past_the_end_of_their_day() -> None:
    p = DayPartition(D, "other")
    edge = datetime(2026, 9, 2, tzinfo=UTC) + timedelta(days=90)
    assert not expired(p, edge - US)
    assert expired(p, edge)
    assert not expired(p, datetime(2026, 9, 9, tzinfo=UTC))  # the verbose edge keeps every other level


@given(st.sampled_from(["verbose", "other"]), st.integers(0, 86_400 * 1_000_000 - 1),
       st.integers(0, 200 * 86_400))
def test_no_row_inside_its_window_is_dropped_and_none_outlives_it_by_more_than_a_day(
        klass: str, offset_us: int, now_s: int) -> None:
    p = DayPartition(D, klass)  # type: ignore[arg-type]  # klass is one of the literals
    row_at = p.lower + timedelta(microseconds=offset_us)
    now = p.lower + timedelta(seconds=now_s)
    if expired(p, now):
        assert now - row_at > WINDOWS[p.klass]  # strictly past its window
    else:
        assert now - row_at < WINDOWS[p.klass] + timedelta(days=1)


def test_create_ahead_covers_today_and_a_week_for_both_classes_and_skips_what_exists() -> None:
    now = datetime(2026, 12, 1, 23, 59, tzinfo=UTC)
    made = to_create(now, {DayPartition(date(2026, 12, 1), "verbose")})
    assert len(made) == 15
    assert min(p.day for p in made) == date(2026, 12, 1) and max(p.day for p in made) == date(2026, 12, 8)
    assert DayPartition(date(2026, 12, 1), "verbose") not in made


def test_drop_order_is_oldest_first_and_only_expired() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    have = {DayPartition(date(2026, 11, 20), "verbose"), DayPartition(date(2026, 11, 10), "verbose"),
            DayPartition(date(2026, 11, 25), "verbose"), DayPartition(date(2026, 11, 10), "other")}
    assert [p.name for p in to_drop(now, have)] == ["logs_verbose_p20261110", "logs_verbose_p20261120"]


def test_oldest_reads_the_day_of_the_oldest_partition_holding_a_row() -> None:
    now = datetime(2026, 12, 1, 6, tzinfo=UTC)
    nonempty = [DayPartition(date(2026, 11, 28), "verbose"), DayPartition(date(2026, 10, 1), "other")]
    assert oldest(nonempty, now).at == datetime(2026, 10, 1, tzinfo=UTC)
    assert oldest(nonempty, now, "verbose").age == timedelta(days=3, hours=6)
    assert oldest([], now) == OldestReading(None, None)


def test_status_warns_only_a_week_past_the_window() -> None:
    def reading(days: float) -> OldestReading:
        return OldestReading(datetime(2026, 1, 1, tzinfo=UTC), timedelta(days=days))

    assert status(reading(97), reading(14), reading(97))[0] == "ok"
    state, why = status(reading(97.1), reading(3), reading(97.1))
    assert state == "warning" and "other" in why and "not counted in overall status" in why
    assert status(reading(14.5), reading(14.5), reading(1))[0] == "warning"
    assert status(OldestReading(None, None), OldestReading(None, None), OldestReading(None, None)) == \
        ("ok", "no rows stored")


def test_level_classes() -> None:
    assert level_class("verbose") == "verbose"
    assert {level_class(x) for x in ("info", "warning", "error")} == {"other"}  # type: ignore[arg-type]  # the levels are the literals


def test_unstorable_text_is_escaped_and_a_runaway_line_is_cut_never_refused() -> None:
    assert storable("a\x00b") == "a\\u0000b"
    assert storable("x\ud800y") == "x\\ud800y"
    long = storable("é" * (MESSAGE_MAX + 10))
    assert long.startswith("é" * MESSAGE_MAX) and long.endswith("[10 more characters cut]")
    assert storable("plain") == "plain"
