"""The live pages' fan-out (gateway/live.py), in process: which pages an event wakes, one notice
per client however many events arrive before it is sent, a bounded queue per client (a client that
falls behind is dropped and counted), the feed's state sent to every client, and a session page
woken only by events about the sessions it shows."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from zimmer_common.contracts.ops import HEARTBEAT, JOB_RUN
from zimmer_common.contracts.subjects import PAGE_SUBJECT
from zimmer_gateway.live import About, Broadcaster, about, pages_for


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_each_event_wakes_the_pages_that_show_it() -> None:
    assert pages_for("zimmer.backlog.evt.item_appended") == {"issues"}
    # A session event's headers wake the listings; its payload (`about`) wakes the session pages it concerns.
    assert pages_for("zimmer.spot.evt.session_status_changed") == {"ranked", "sessions", "quotas", "issues"}
    assert pages_for(JOB_RUN) == {"health"}
    assert pages_for(PAGE_SUBJECT) == {"health"}
    assert pages_for(HEARTBEAT) == set()
    assert pages_for("zimmer.spot.evt.quota_reading_recorded") == {"quotas"}  # only Quotas shows the pool


async def test_a_burst_is_one_notice_and_a_client_that_falls_behind_is_dropped() -> None:
    registry = CollectorRegistry()
    live = Broadcaster(registry, queue_size=2)
    issues, health = live.subscribe("issues"), live.subscribe("health")
    assert value(registry, "zimmer_gateway_live_clients", page="issues") == 1

    for _ in range(100):
        live.notify(pages_for("zimmer.backlog.evt.item_appended"))
    assert issues.queue.qsize() == 1 and health.queue.qsize() == 0  # coalesced, and only where it shows
    assert value(registry, "zimmer_gateway_live_notices_total", page="issues") == 1

    live.set_up(True)
    assert issues.queue.qsize() == 2 and health.queue.qsize() == 1  # the state goes to everyone
    live.set_up(False)  # issues' queue is full: it is dropped, health's is not
    assert issues.dropped.is_set() and not health.dropped.is_set()
    assert value(registry, "zimmer_gateway_live_dropped_clients_total", page="issues") == 1
    assert value(registry, "zimmer_gateway_live_clients", page="issues") == 0
    assert issues not in live.clients and health in live.clients
    assert value(registry, "zimmer_gateway_live_feed_up") == 0

    live.unsubscribe(health)
    live.unsubscribe(health)  # twice is once
    assert value(registry, "zimmer_gateway_live_clients", page="health") == 0


def test_a_session_event_names_its_session_and_its_parent() -> None:
    view = b'{"id": "spot.1", "type": "session_status_changed", "data": {"session": {"id": 7, "parent_session_id": 3}}}'
    assert about(view) == About(7, 3)
    assert about(b'{"data": {"session": {"id": 7, "parent_session_id": null}}}') == About(7)
    assert about(b'{"data": {"session_id": 9, "reason": "deleted"}}') == About(9)
    assert about(b"not json") is None and about(b'{"data": {"account": "a"}}') is None


def test_a_session_page_wakes_only_for_the_sessions_it_shows() -> None:
    live = Broadcaster(CollectorRegistry())
    page = live.subscribe("session", own=5, shown=frozenset({1, 5, 8}))  # root 1, itself, child 8
    anyone = live.subscribe("session")  # a page that named no session: every session event
    listing = live.subscribe("sessions")
    session_pages = frozenset({"session"})

    live.notify(session_pages, About(42))  # unrelated
    assert page.queue.qsize() == 0 and anyone.queue.qsize() == 1 and listing.queue.qsize() == 0
    for event in (About(5, 1), About(1), About(8, 5), About(99, 5), None):  # itself, its root, a child, a new child
        page.change_pending = False
        live.notify(session_pages, event)
        assert page.change_pending, event
    page.change_pending = False
    live.notify(session_pages, About(77, 1))  # a sibling under its root: not shown on this page
    assert not page.change_pending
    live.notify(frozenset({"session", "health"}))  # a notice for every page (the recovery banner)
    assert page.change_pending
