"""The amber queue-recovery banner on every operator page (seed 003: "an amber banner on every
page"), fed by a short cached status read.

A page render must not wait on alerts: the status is read at most once per 5 s, each read bounded
by half a second, and a failed read is cached like a good one, so while alerts is down a page
shows no banner and no error, and does not wait again for 5 s. An enter or exit made through this
gateway replaces the cached status at once. The banner shows only while the status is active and
its expiry is still ahead by the gateway's clock, so an elapsed halt is never announced.

Open pages follow it live (issue 32 #1): a change made anywhere (another gateway, MCP, the TTL
job) is announced by alerts as `queue_recovery_changed`, which every gateway's live feed hears
(`changed`: the cache is dropped, then every open page re-fetches and reads it again); and the
expiry needs no event: each time the gateway reads an active status it sets a timer for its expiry
(`announce` when it fires, a moment after it so alerts' clock agrees), so the banner goes from
every open page when the window ends, not on the next unrelated event. A read that fails (alerts
slow under load, or restarting) shows no banner, and is tried again in the background after
RETRY_SECONDS, doubling to RETRY_MAX_SECONDS, until one succeeds; if that one finds the mode on,
every open page is told: otherwise a page served during the failure would go on without the banner
until some unrelated event. No timer, read or connection exists before the first page is served.

A pure ASGI layer (not BaseHTTPMiddleware, which would wrap the MCP stream too): for a page GET it
leaves the status on `request.state.queue_recovery`, where `render` finds it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from zimmer_common.contracts import health as h
from zimmer_common.service import Service

CACHE_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 0.5
EXPIRY_MARGIN_SECONDS = 0.25  # the expiry timer fires this long after the window ends
RETRY_SECONDS, RETRY_MAX_SECONDS = 1.0, 30.0  # a failed read, tried again in the background
NOT_PAGES = ("/api/", "/mcp", "/static", "/metrics", "/healthz", "/readyz", "/docs", "/openapi", "/redoc", "/signin")


class RecoveryBanner:
    def __init__(self, service: Service):
        self.service = service
        self._status: h.QueueRecoveryStatus | None = None
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()
        self._changes = 0  # changes announced so far: a read begun before one is not kept as fresh
        self._expiry: asyncio.TimerHandle | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._retry_delay = RETRY_SECONDS
        self._retrying: asyncio.Future[None] | None = None  # the background read, kept from the collector
        self.announce: Callable[[], None] = lambda: None  # tell every open page (bootstrap.py: the live pages)

    def remember(self, status: h.QueueRecoveryStatus) -> None:
        self._status, self._read_at = status, time.monotonic()
        self._arm(status)

    def changed(self) -> None:
        """Alerts announced a change (through any gateway, or by the TTL): the next page reads it."""
        self._changes += 1
        self._read_at = float("-inf")

    def _arm(self, status: h.QueueRecoveryStatus | None) -> None:
        """One timer, for the expiry of the status last read (none while the mode is off)."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if status is None or not status.active or status.expires_at is None:
            return
        left = (status.expires_at - self.service.clock.now()).total_seconds()
        if left > 0:
            self._expiry = asyncio.get_running_loop().call_later(left + EXPIRY_MARGIN_SECONDS, self._expired)

    def _expired(self) -> None:
        self._expiry = None
        self.announce()

    async def current(self) -> h.QueueRecoveryStatus | None:
        if time.monotonic() - self._read_at >= CACHE_SECONDS:
            async with self._lock:
                if time.monotonic() - self._read_at >= CACHE_SECONDS:  # another render refreshed it meanwhile
                    await self._refresh()
        status = self._status
        if status is None or not status.active or status.expires_at is None:
            return None
        return status if status.expires_at > self.service.clock.now() else None

    async def _refresh(self) -> None:
        changes = self._changes
        status: h.QueueRecoveryStatus | None = None
        bus = self.service.bus
        if bus is not None:
            try:
                status = await asyncio.wait_for(bus.request(h.QUEUE_RECOVERY_STATUS, h.HealthQuery(),
                                                            timeout=READ_TIMEOUT_SECONDS), READ_TIMEOUT_SECONDS + 0.1)
            except Exception:  # noqa: BLE001 - alerts down or slow: no banner, no error, no wait for 5 s
                status = None
        if status is not None:
            self.remember(status)
            self._retry_delay = RETRY_SECONDS
        else:
            self._forget()
            if bus is not None:  # no bus: not started, or stopped; nothing to try again
                self._try_again_later()
        if self._changes != changes:  # a change was announced while this read was out: read again next time
            self._read_at = float("-inf")

    def _try_again_later(self) -> None:
        if self._retry is not None:
            return
        delay, self._retry_delay = self._retry_delay, min(self._retry_delay * 2, RETRY_MAX_SECONDS)
        self._retry = asyncio.get_running_loop().call_later(delay, self._try_again)

    def _try_again(self) -> None:
        self._retry = None
        self._retrying = asyncio.ensure_future(self._read_for_pages())

    async def _read_for_pages(self) -> None:
        async with self._lock:
            self._read_at = float("-inf")
            await self._refresh()  # a failure arms the next try
        if self._status is not None and self._status.active:
            self.announce()  # the pages served during the failure showed no banner: they re-fetch

    def _forget(self) -> None:
        self._status, self._read_at = None, time.monotonic()
        self._arm(None)


def banner_view(status: h.QueueRecoveryStatus | None) -> dict[str, Any] | None:
    """What the layout prints: the expiry (`until_at`, a moment the page shows in the reader's zone;
    `until`, its HH:MM in UTC), who and why."""
    if status is None or status.expires_at is None:
        return None
    return {"until": status.expires_at.astimezone(UTC).strftime("%H:%M"), "until_at": status.expires_at,
            "entered_by": status.entered_by,
            "reason": status.reason, "lanes": ", ".join(status.lanes)}


class BannerLayer:
    def __init__(self, app: ASGIApp, banner: RecoveryBanner):
        self.app = app
        self.banner = banner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and not scope["path"].startswith(NOT_PAGES):
            scope.setdefault("state", {})["queue_recovery"] = banner_view(await self.banner.current())
        await self.app(scope, receive, send)


def install_recovery_banner(app: FastAPI, service: Service) -> RecoveryBanner:
    banner = RecoveryBanner(service)
    app.state.recovery_banner = banner
    app.add_middleware(BannerLayer, banner=banner)
    return banner


def remember(app: Any, status: h.QueueRecoveryStatus) -> None:
    """After an enter or exit through this gateway: the banner says so on the very next page."""
    banner = getattr(app.state, "recovery_banner", None)
    if banner is not None:
        banner.remember(status)
    live = getattr(app.state, "live_broadcaster", None)  # open pages show it now (bootstrap.py, live.py)
    if live is not None:
        live.notify(live.every_page)
