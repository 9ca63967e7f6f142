"""The gateway process: its lifecycle around what `bootstrap` builds. The HTTP server runs inside
the service lifecycle, so it starts after the bus is up and stops (bounded) before the bus closes."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import uvicorn

from zimmer_common.logs import kv
from zimmer_common.service import Service
from zimmer_common.settings import Settings
from zimmer_gateway.bootstrap import bootstrap

NAME = "gateway"
log = logging.getLogger("zimmer.gateway")


class GatewayService(Service):
    """The gateway is a service whose start also brings up the HTTP server."""

    http_server: uvicorn.Server

    @property
    def http_port(self) -> int:
        return bound_port(self.http_server)


def build(settings: Settings) -> GatewayService:
    service = GatewayService(NAME, settings, serve_metrics=False)  # /metrics is on the HTTP port
    server = bootstrap(service, settings)
    serving: list[asyncio.Task[None]] = []

    @service.on_start
    async def start_http(svc: Service) -> None:
        serving.append(asyncio.create_task(server.serve()))
        for _ in range(200):  # bounded: 10 s for the socket to bind
            if server.started or serving[0].done():
                break
            await asyncio.sleep(0.05)
        if not server.started:
            if serving[0].done():  # uvicorn exits (SystemExit) when it cannot bind: read, not left to the loop
                with contextlib.suppress(BaseException):
                    serving[0].result()
            raise RuntimeError(f"gateway HTTP server did not start on {settings.http_host}:{settings.http_port}")
        log.info("http listening", extra=kv(url=f"http://{settings.http_host}:{bound_port(server)}"))

    @service.on_stop
    async def stop_http(svc: Service) -> None:
        server.should_exit = True
        if serving:
            await asyncio.wait(serving, timeout=5)

    service.http_server = server
    return service


def bound_port(server: uvicorn.Server) -> int:
    return int(server.servers[0].sockets[0].getsockname()[1])
