"""The amber queue-recovery banner on every operator page (seed 003: "an amber banner on every
page"), fed by a short cached status read.

A page render must not wait on alerts: the status is read at most once per 5 s, each read bounded
by half a second, and a failed read is cached like a good one, so while alerts is down a page
shows no banner and no error, and does not wait again for 5 s. An enter or exit made through this
gateway replaces the cached status at once. The banner shows only while the status is active and
its expiry is still ahead by the gateway's clock, so an elapsed halt is never announced.

A pure ASGI layer (not BaseHTTPMiddleware, which would wrap the MCP stream too): for a page GET it
leaves the status on `request.state.queue_recovery`, where `render` finds it.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from zimmer_common.contracts import health as h
from zimmer_common.service import Service

CACHE_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 0.5
NOT_PAGES = ("/api/", "/mcp", "/static", "/metrics", "/healthz", "/readyz", "/docs", "/openapi", "/redoc", "/signin")


class RecoveryBanner:
    def __init__(self, service: Service):
        self.service = service
        self._status: h.QueueRecoveryStatus | None = None
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    def remember(self, status: h.QueueRecoveryStatus) -> None:
        self._status, self._read_at = status, time.monotonic()

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
        status: h.QueueRecoveryStatus | None = None
        bus = self.service.bus
        if bus is not None:
            try:
                status = await asyncio.wait_for(bus.request(h.QUEUE_RECOVERY_STATUS, h.HealthQuery(),
                                                            timeout=READ_TIMEOUT_SECONDS), READ_TIMEOUT_SECONDS + 0.1)
            except Exception:  # noqa: BLE001 - alerts down or slow: no banner, no error, no wait for 5 s
                status = None
        self.remember(status) if status is not None else self._forget()

    def _forget(self) -> None:
        self._status, self._read_at = None, time.monotonic()


def banner_view(status: h.QueueRecoveryStatus | None) -> dict[str, Any] | None:
    """What the layout prints: the expiry as HH:MM UTC, who and why."""
    if status is None or status.expires_at is None:
        return None
    return {"until": status.expires_at.astimezone(UTC).strftime("%H:%M"), "entered_by": status.entered_by,
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
