"""Live pages (issue 32 #1): ZIMMER_EVENTS, read once per gateway process, fanned out to the
operator pages' server-sent event streams (`web/live.py`).

One ephemeral ordered consumer per gateway process (`LiveFeed`), headers only and from the newest
message on: a page needs to know *that* something changed, not what, so no payload crosses (but
spot's, on the second consumer below, to tell whose session an event is about).
Each event's subject names the page families it can change (`pages_for`); the `Broadcaster` puts
one "changed" notice in each of those pages' clients' queues. A notice not yet sent is never
queued twice (a burst of events is one re-fetch), every queue is bounded, and a client whose queue
is full is dropped (its stream ends, the browser reconnects and re-fetches), never buffered without
bound. The feed's state (`live`/`paused`) goes to every client too: the page says "Live updates
paused" while the consumer is gone (NATS down or restarted) and clears it when the consumer is back.

A session's page wakes only for its own sessions (issue 32 #1): the session events
(`SESSION_SUBJECTS`) are read a second time, whole, by a second ordered consumer filtered to spot's
events (`zimmer.spot.evt.>`, the session events and the quota readings: nothing else crosses with
its payload), and each wakes the session pages that show that session (itself, an ancestor or a
child in its hierarchy panel) or whose session it names as its parent (a new child), never the
page of an unrelated session. The listing pages still wake on every session event (headers only).

Other parts of the gateway may watch a subject (`LiveFeed.watch`): a hook runs when an event on
it arrives, before the pages hear. The queue-recovery banner (on every page) drops its cached
status when alerts announces a change (`QUEUE_RECOVERY_CHANGED`, which wakes every page).

A watchdog checks the consumers every `check_seconds` (one JetStream API request to the NATS
server, never a request to a service) and subscribes again when it is gone: an ephemeral consumer
does not outlive a NATS restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from nats.js.api import ConsumerConfig, DeliverPolicy
from prometheus_client import CollectorRegistry, Counter, Gauge

from zimmer_common.bus import Bus
from zimmer_common.contracts import spot
from zimmer_common.contracts.health import QUEUE_RECOVERY_CHANGED
from zimmer_common.contracts.ops import HEARTBEAT
from zimmer_common.contracts.spot import QUOTA_READING_RECORDED
from zimmer_common.contracts.subjects import PAGE_SUBJECT, Stream
from zimmer_common.logs import kv

log = logging.getLogger("zimmer.gateway.live")

PAGES: Final = ("issues", "ranked", "sessions", "session", "quotas", "health")
SESSION_PAGES: Final = frozenset({"ranked", "sessions", "session", "quotas", "issues"})
HEALTH: Final = frozenset({"health"})
QUOTAS: Final = frozenset({"quotas"})
NOTHING: Final = frozenset[str]()
EVERY_PAGE: Final = frozenset(PAGES)
FOLLOW_UP_SECONDS: Final = 0.4  # a page (alert) is recorded by the alerts service after it is published
QUEUE_SIZE: Final = 16  # notices a client may have unsent before it is dropped
SESSION_SUBJECTS: Final = frozenset({
    spot.SESSION_CREATED, spot.SESSION_STATUS_CHANGED, spot.SESSION_CLASS_CHANGED, spot.SESSION_PRECEDENCE_CHANGED,
    spot.SESSION_PAUSED, spot.SESSION_ARCHIVED, spot.SESSION_UNARCHIVED, spot.SESSION_DELETED})
SPOT_EVENTS: Final = "zimmer.spot.evt.>"  # the second consumer's filter: session events whole (and quota readings)
LISTINGS: Final = SESSION_PAGES - {"session"}  # a session event's headers wake these; its payload, session pages


def pages_for(subject: str) -> frozenset[str]:
    """The page families an event on `subject` can change (pure: the subject's context and name).

    Backlog events change Issues; a session's events (created, status, class, precedence, paused,
    archived) change every page that lists or counts sessions; pages, job runs and anything else
    change Health (its lanes, monitors, alerts and the recovery banner). Heartbeats change nothing a
    page shows (a service that stops sends none), so they wake no page."""
    parts = subject.split(".")
    ctx = parts[1] if len(parts) > 1 else ""
    if ctx == "backlog":
        return frozenset({"issues"})
    if subject == QUEUE_RECOVERY_CHANGED:  # the banner is on every page
        return EVERY_PAGE
    if subject == QUOTA_READING_RECORDED:  # an account's reading: only Quotas shows the pool
        return QUOTAS
    if subject in SESSION_SUBJECTS:  # the session pages it concerns are woken by its payload (`about`)
        return LISTINGS
    if ctx == "spot":
        return SESSION_PAGES
    if subject == HEARTBEAT:  # liveness every few seconds from every service: a page shows no heartbeat
        return NOTHING
    return HEALTH  # pages (PAGE_SUBJECT), job runs, the sweeper's and alerts' events


@dataclass(frozen=True)
class About:
    """Which session an event is about, and that session's parent (None: a root, or not said)."""

    session: int
    parent: int | None = None


def about(body: bytes) -> About | None:
    """The session a session event's envelope names (`data.session`, or `data.session_id` for a
    deletion); None when it names none it can read (then every session page wakes)."""
    try:
        data = json.loads(body).get("data") or {}
        view = data.get("session")
        if isinstance(view, dict):
            parent = view.get("parent_session_id")
            return About(int(view["id"]), int(parent) if parent is not None else None)
        return About(int(data["session_id"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


@dataclass(eq=False)
class Client:
    """One open page's stream: the notices waiting to be sent, bounded. A session page names its
    session (`own`) and the sessions it shows (`shown`: itself, its ancestors, its children)."""

    page: str
    queue: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    change_pending: bool = False
    dropped: asyncio.Event = field(default_factory=asyncio.Event)
    own: int | None = None
    shown: frozenset[int] = frozenset()

    def concerned(self, event: About | None) -> bool:
        """Whether an event about `event`'s session changes what this page shows (a page that names
        no session, or an event that names none, always is)."""
        if self.own is None or event is None:
            return True
        return event.session == self.own or event.session in self.shown or event.parent == self.own


class Broadcaster:
    """The in-process fan-out: page clients subscribe, the feed notifies."""

    def __init__(self, registry: CollectorRegistry, queue_size: int = QUEUE_SIZE) -> None:
        self.clients: set[Client] = set()
        self.every_page = EVERY_PAGE
        self.generation = 0
        self.queue_size = queue_size
        self.up = False
        self.connected = Gauge("zimmer_gateway_live_clients", "Open live-update streams (server-sent events), by page",
                               ["page"], registry=registry)
        self.notices = Counter("zimmer_gateway_live_notices", "'Changed' notices queued to live page streams, by page",
                               ["page"], registry=registry)
        self.drops = Counter("zimmer_gateway_live_dropped_clients",
                             "Live page streams dropped because their client fell behind (its queue was full)",
                             ["page"], registry=registry)
        self.events = Counter("zimmer_gateway_live_events", "Events the gateway's live feed read from ZIMMER_EVENTS",
                              registry=registry)
        self.feed_up = Gauge("zimmer_gateway_live_feed_up",
                             "1 while the gateway's live feed (its ordered consumer on ZIMMER_EVENTS) is subscribed",
                             registry=registry)
        self.shared_renders = Counter("zimmer_gateway_live_renders_shared",
                                      "Live page re-fetches answered with another reader's render of the same "
                                      "address (one render for a burst: web/live_renders.py)", registry=registry)
        for page in PAGES:
            self.connected.labels(page)
            self.notices.labels(page)
            self.drops.labels(page)

    def subscribe(self, page: str, own: int | None = None, shown: frozenset[int] = frozenset()) -> Client:
        client = Client(page, asyncio.Queue(self.queue_size), own=own, shown=shown)
        self.clients.add(client)
        self.connected.labels(page).inc()
        return client

    def unsubscribe(self, client: Client) -> None:
        if client in self.clients:
            self.clients.discard(client)
            self.connected.labels(client.page).dec()

    def _put(self, client: Client, notice: str) -> None:
        try:
            client.queue.put_nowait(notice)
        except asyncio.QueueFull:
            self.drops.labels(client.page).inc()
            client.dropped.set()
            self.unsubscribe(client)

    def notify(self, pages: frozenset[str], event: About | None = None) -> None:
        """Tell the pages of `pages` that something changed; with `event`, only those it concerns."""
        self.generation += 1  # every render made before this is stale (web/live_renders.py)
        for client in list(self.clients):
            if client.page in pages and not client.change_pending and client.concerned(event):
                client.change_pending = True
                self.notices.labels(client.page).inc()
                self._put(client, "changed")

    def set_up(self, up: bool) -> None:
        if up == self.up:
            return
        self.up = up
        self.generation += 1
        self.feed_up.set(1 if up else 0)
        for client in list(self.clients):
            self._put(client, "live" if up else "paused")


class LiveFeed:
    """The gateway's one ephemeral ordered consumer on ZIMMER_EVENTS, kept subscribed."""

    def __init__(self, broadcaster: Broadcaster, check_seconds: float = 1.0) -> None:
        self.broadcaster = broadcaster
        self.check_seconds = check_seconds
        self._sub: Any = None
        self._session_sub: Any = None
        self._task: asyncio.Task[None] | None = None
        self._watchers: dict[str, list[Callable[[], None]]] = {}

    def watch(self, subject: str, hook: Callable[[], None]) -> None:
        """Run `hook` when an event on `subject` arrives, before the pages are told."""
        self._watchers.setdefault(subject, []).append(hook)

    async def start(self, bus: Bus) -> None:
        self._task = asyncio.create_task(self._keep(bus), name="live-feed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._unsubscribe()
        self.broadcaster.set_up(False)

    async def _on_msg(self, msg: Any) -> None:
        self.broadcaster.events.inc()
        for hook in self._watchers.get(msg.subject, ()):
            hook()
        pages = pages_for(msg.subject)
        self.broadcaster.notify(pages)
        if msg.subject == PAGE_SUBJECT:  # the alerts service records it as we hear it: look again shortly
            asyncio.get_running_loop().call_later(FOLLOW_UP_SECONDS, self.broadcaster.notify, pages)

    async def _on_session_msg(self, msg: Any) -> None:
        if msg.subject in SESSION_SUBJECTS:
            self.broadcaster.notify(frozenset({"session"}), about(msg.data))

    async def _subscribe(self, bus: Bus) -> None:
        self._sub = await bus.js.subscribe(
            ">", stream=Stream.EVENTS.value, cb=self._on_msg, ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW, headers_only=True, idle_heartbeat=5.0,
            config=ConsumerConfig(inactive_threshold=30.0))
        self._session_sub = await bus.js.subscribe(
            SPOT_EVENTS, stream=Stream.EVENTS.value, cb=self._on_session_msg, ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW, idle_heartbeat=5.0, config=ConsumerConfig(inactive_threshold=30.0))

    async def _unsubscribe(self) -> None:
        subs, self._sub, self._session_sub = (self._sub, self._session_sub), None, None
        for sub in subs:
            if sub is not None:
                with contextlib.suppress(Exception):  # the connection or the consumer may be gone already
                    await sub.unsubscribe()

    async def _healthy(self, bus: Bus) -> bool:
        if self._sub is None or self._session_sub is None or not bus.nc.is_connected:
            return False
        try:
            for sub in (self._sub, self._session_sub):
                await asyncio.wait_for(sub.consumer_info(), timeout=2.0)
        except Exception:  # noqa: BLE001 - not found, timed out, disconnected: the consumer is not there
            return False
        return True

    async def _keep(self, bus: Bus) -> None:
        while True:
            if not await self._healthy(bus):
                self.broadcaster.set_up(False)
                await self._unsubscribe()
                if bus.nc.is_connected:
                    try:
                        await self._subscribe(bus)
                        # Caught up from this moment: whatever changed while it was down, the pages
                        # re-fetch when they hear "live" again.
                        self.broadcaster.set_up(True)
                        log.info("live feed subscribed", extra=kv(stream=Stream.EVENTS.value))
                    except Exception as exc:  # noqa: BLE001 - JetStream not ready yet: the next check tries again
                        log.warning("live feed cannot subscribe", extra=kv(error=str(exc)))
            await asyncio.sleep(self.check_seconds)
