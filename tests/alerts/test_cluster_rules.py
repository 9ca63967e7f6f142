"""The NATS cluster's health from each stream's STREAM.INFO cluster block (issue 29 #4): pure."""

from __future__ import annotations

from zimmer_alerts.domain.cluster import cluster_health, stream_replicas


def info(replicas: int, leader: str | None, *others: dict) -> dict:
    cluster = {"name": "zimmer", "replicas": list(others)}
    if leader:
        cluster["leader"] = leader
    return {"config": {"num_replicas": replicas}, "cluster": cluster}


def test_a_single_server_stream_is_whole() -> None:
    one = stream_replicas("ZIMMER_EVENTS", {"config": {"num_replicas": 1}, "cluster": {"leader": "n1"}})
    assert (one.expected, one.current, one.leader) == (1, 1, "n1")
    bare = stream_replicas("ZIMMER_JOBS", {"config": {"num_replicas": 1}})  # no cluster block at all
    assert (bare.current, bare.leader) == (1, "local")
    assert cluster_health([one, bare]).status == "ok"


def test_a_node_down_is_under_replication_naming_the_node() -> None:
    whole = stream_replicas("ZIMMER_EVENTS", info(3, "n1", {"name": "n2", "current": True},
                                                  {"name": "n3", "current": True}))
    short = stream_replicas("ZIMMER_JOBS", info(3, "n2", {"name": "n1", "current": True},
                                                {"name": "n3", "current": False, "offline": True}))
    slow = stream_replicas("ZIMMER_INGEST", info(3, "n1", {"name": "n2", "current": False, "lag": 40},
                                                 {"name": "n3", "current": False, "offline": True}))
    assert (whole.current, short.current, short.offline, slow.lagging, slow.current) == (3, 2, ["n3"], ["n2"], 1)
    health = cluster_health([whole, short, slow])
    assert health.status == "warning" and health.servers_offline == ["n3"]
    assert "ZIMMER_JOBS 2 of 3 replicas current" in health.summary and "offline: n3" in health.summary


def test_no_leader_or_no_answer_is_critical() -> None:
    leaderless = stream_replicas("ZIMMER_EVENTS", info(3, None, {"name": "n2", "current": False}))
    assert leaderless.leader is None and leaderless.current == 0
    assert cluster_health([leaderless]).status == "critical"
    unread = cluster_health([], {"ZIMMER_RUNTIME": "JetStream API STREAM.INFO.ZIMMER_RUNTIME did not answer"})
    assert (unread.status, unread.readable) == ("critical", False) and "ZIMMER_RUNTIME" in (unread.problem or "")


def test_a_replica_silent_for_ten_seconds_is_offline_though_nothing_says_so() -> None:
    # nats-server 2.10/2.11 marks a killed peer only as not current; `active` keeps growing.
    silent = stream_replicas("ZIMMER_EVENTS", info(3, "n1", {"name": "n2", "current": True, "active": 2_000_000},
                                                   {"name": "n3", "current": False, "active": 12_000_000_000}))
    catching_up = stream_replicas("ZIMMER_JOBS", info(3, "n1", {"name": "n3", "current": False, "active": 1_000_000}))
    assert (silent.offline, silent.lagging, catching_up.offline, catching_up.lagging) == (["n3"], [], [], ["n3"])


def test_a_server_one_leader_saw_go_is_offline_for_every_stream() -> None:
    seen = stream_replicas("ZIMMER_JOBS", info(3, "n1", {"name": "n3", "current": False, "offline": True}))
    idle = stream_replicas("ZIMMER_EVENTS", info(3, "n2", {"name": "n3", "current": False, "active": 1_000}))
    health = cluster_health([seen, idle])
    assert [(s.offline, s.lagging) for s in health.streams] == [(["n3"], []), (["n3"], [])]


def test_a_replica_a_leader_never_heard_from_in_its_term_is_offline() -> None:
    # nats-server 2.11+: a leader elected after the replica died has never heard from it: `active` 0.
    def led_for(seconds: float, active: int = 0) -> dict:
        answer = info(3, "n1", {"name": "n2", "current": True, "active": 1_000_000},
                      {"name": "n3", "current": False, "active": active})
        answer["cluster"]["leader_since"] = "2026-12-05T16:00:00.123456789Z"
        answer["ts"] = f"2026-12-05T16:00:{seconds:09.6f}Z"
        return answer

    silent_term = stream_replicas("ZIMMER_EVENTS", led_for(30.5))
    fresh_term = stream_replicas("ZIMMER_EVENTS", led_for(2.5))
    heard = stream_replicas("ZIMMER_EVENTS", led_for(30.5, active=500_000_000))
    assert [(s.offline, s.lagging) for s in (silent_term, fresh_term, heard)] == [
        (["n3"], []), ([], ["n3"]), ([], ["n3"])]
    unparseable = led_for(30.5)
    unparseable["ts"] = "not a time"
    assert stream_replicas("ZIMMER_EVENTS", unparseable).lagging == ["n3"]
