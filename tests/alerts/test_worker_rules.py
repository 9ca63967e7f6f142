""""N active / M registered" workers (seed 003): active within WORKER_ACTIVE_INTERVAL of the last
heartbeat, registered within REGISTERED_FOR. Fixed datetimes throughout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from zimmer_alerts.domain.readings import Heartbeat
from zimmer_alerts.domain.workers import (
    REGISTERED_FOR,
    WORKER_ACTIVE_INTERVAL,
    live_instances_by_service,
    newest_live_start,
    worker_statistics,
)

T0 = datetime(2026, 8, 2, 9, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def beat(service: str, instance: str, ago: timedelta, started_ago: timedelta = timedelta(hours=2)) -> Heartbeat:
    return Heartbeat(service=service, instance_id=instance, version="1.2.3", at=T0 - ago, started_at=T0 - started_ago)


def test_the_thresholds() -> None:
    assert WORKER_ACTIVE_INTERVAL == timedelta(minutes=5) and REGISTERED_FOR == timedelta(hours=1)


def test_a_slipped_heartbeat_is_still_active() -> None:
    # 2026-08-02: a beat 40 s old under load read as "1 active / 2 registered" at a 30 s threshold.
    stats = worker_statistics([beat("backlog", "b1", 12 * S), beat("backlog", "b2", 40 * S)], T0)
    assert (stats.active, stats.registered) == (2, 2)


def test_active_registered_and_deregistered() -> None:
    stats = worker_statistics([
        beat("backlog", "b1", 10 * S),
        beat("backlog", "b2", 5 * 60 * S),  # exactly the interval: no longer active
        beat("spot-gate", "s1", 59 * 60 * S),
        beat("spot-gate", "s2", 60 * 60 * S),  # silent an hour: deregistered
    ], T0)
    assert (stats.active, stats.registered) == (1, 3)
    assert [(i.service, i.instance_id, i.active) for i in stats.instances] == [
        ("backlog", "b1", True), ("backlog", "b2", False), ("spot-gate", "s1", False)]


def test_the_newest_heartbeat_of_an_instance_counts() -> None:
    stats = worker_statistics([beat("backlog", "b1", 30 * 60 * S), beat("backlog", "b1", 20 * S)], T0)
    assert (stats.active, stats.registered) == (1, 1)
    assert stats.instances[0].last_heartbeat_at == T0 - 20 * S


def test_live_instances_and_the_newest_start() -> None:
    stats = worker_statistics([
        beat("backlog", "old", 20 * S, started_ago=timedelta(days=1)),
        beat("backlog", "new", 5 * S, started_ago=timedelta(minutes=2)),  # a cutover: both registered
        beat("backlog", "gone", 10 * 60 * S, started_ago=timedelta(minutes=1)),
        beat("alerts", "a1", 20 * 60 * S),
    ], T0)
    live = live_instances_by_service(stats)
    assert sorted(i.instance_id for i in live["backlog"]) == ["new", "old"] and "alerts" not in live
    assert newest_live_start(stats, "backlog") == T0 - timedelta(minutes=2)
    assert newest_live_start(stats, "alerts") is None


def test_no_heartbeats() -> None:
    stats = worker_statistics([], T0)
    assert (stats.active, stats.registered, stats.instances) == (0, 0, [])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["backlog", "alerts"]), st.sampled_from(["i1", "i2", "i3"]),
                          st.integers(0, 3 * 3600)), max_size=20))
def test_active_never_exceeds_registered(beats: list[tuple[str, str, int]]) -> None:
    stats = worker_statistics([beat(s, i, a * S) for s, i, a in beats], T0)
    assert 0 <= stats.active <= stats.registered == len(stats.instances) <= len({(s, i) for s, i, _ in beats})
    assert all((T0 - i.last_heartbeat_at) < REGISTERED_FOR for i in stats.instances)


def test_two_missed_beats_read_down_by_each_instances_own_cadence() -> None:
    # A replica killed with kill -9 read "10/10 workers" 2.5 minutes later: "active" is the seed's
    # 5 minutes; up/down is two of the instance's own intervals.
    fast = Heartbeat("spot-gate", "s1", "1", T0 - 31 * S, T0 - M5, interval_seconds=15.0)
    slow = Heartbeat("spot-gate", "s2", "1", T0 - 31 * S, T0 - M5, interval_seconds=30.0)
    late = Heartbeat("backlog", "b1", "1", T0 - 29 * S, T0 - M5, interval_seconds=15.0)  # one slipped beat
    stats = worker_statistics([fast, slow, late], T0)
    assert {i.instance_id: (i.state, i.active) for i in stats.instances} == {
        "s1": ("down", True), "s2": ("up", True), "b1": ("up", True)}
    assert {k: (v.up, v.registered) for k, v in stats.by_service.items()} == {"spot-gate": (1, 2), "backlog": (1, 1)}


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["backlog", "spot-gate", "alerts"]), st.sampled_from(["1", "2", "3"]),
                          st.integers(0, 2 * 3600), st.sampled_from([5.0, 15.0, 30.0])), max_size=12))
def test_per_service_counts_add_up(beats: list[tuple[str, str, int, float]]) -> None:
    stats = worker_statistics([Heartbeat(s, i, "1", T0 - ago * S, T0 - 3 * 3600 * S, interval_seconds=every)
                               for s, i, ago, every in beats], T0)
    assert sum(v.registered for v in stats.by_service.values()) == stats.registered
    for service, counts in stats.by_service.items():
        mine = [i for i in stats.instances if i.service == service]
        assert counts.registered == len(mine) and counts.up == sum(i.state == "up" for i in mine)
        assert all(i.active for i in mine if i.state == "up")  # up is the stricter reading


M5 = timedelta(minutes=5)
