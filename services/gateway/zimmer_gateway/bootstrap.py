"""The gateway's composition root: what `service.py`'s process runs, built once.

The gateway owns no schema, so it has no unit of work: every write it takes is another service's,
asked over NATS (`create_app` builds the REST routes, the MCP server and the operator pages over
the service's bus). Built here: the pager, the live pages' feed (live.py, web/live.py), the
peers' readiness probe (a job on the `pollers` lane, with its `zimmer_gateway_peer_up` gauge)
and the HTTP server, which `service.py` starts once the bus is up and stops before it closes.
"""

from __future__ import annotations

import logging

import uvicorn
from prometheus_client import Gauge

from zimmer_common.contracts.health import QUEUE_RECOVERY_CHANGED
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv
from zimmer_common.pager import attach_pager
from zimmer_common.service import Service
from zimmer_common.settings import Settings
from zimmer_gateway.app import PEERS, create_app, ping_peers
from zimmer_gateway.live import Broadcaster, LiveFeed
from zimmer_gateway.web.live import create_live
from zimmer_gateway.web.live_renders import LiveRenders

log = logging.getLogger("zimmer.gateway")


def bootstrap(service: Service, settings: Settings) -> uvicorn.Server:
    """Wire the gateway into `service`: its pager, its readiness probe, and the HTTP server to run."""
    attach_pager(service)
    peer_up = Gauge("zimmer_gateway_peer_up", "1 when the service answered the gateway's last readiness probe",
                    ["peer"], registry=service.metrics.registry)

    async def readiness_probe(_ctx: JobContext) -> None:
        answers = await ping_peers(service)
        for name in PEERS:
            peer_up.labels(name).set(0 if isinstance(answers[name], Exception) else 1)
        down = [n for n, a in answers.items() if isinstance(a, Exception)]
        if down:
            log.warning("services not answering", extra=kv(down=down))

    service.job_specs.append(JobSpec("readiness_probe", "pollers", readiness_probe))
    app = create_app(service)
    # Live pages: one ordered consumer on ZIMMER_EVENTS for the process, fanned out to the pages'
    # event streams (live.py); the streams end when the HTTP server is told to exit.
    broadcaster = Broadcaster(service.metrics.registry)
    feed = LiveFeed(broadcaster)
    app.state.live_broadcaster = broadcaster  # an enter or exit of queue recovery through this gateway (recovery_banner.py)
    app.include_router(create_live(broadcaster, closing=lambda: server.should_exit))
    app.add_middleware(LiveRenders, settings=settings, broadcaster=broadcaster)  # one render a burst
    banner = getattr(app.state, "recovery_banner", None)
    if banner is not None:  # queue recovery changed anywhere, or its window ended: every open page shows it
        banner.announce = lambda: broadcaster.notify(broadcaster.every_page)
        feed.watch(QUEUE_RECOVERY_CHANGED, banner.changed)

    @service.on_start
    async def start_live_feed(svc: Service) -> None:
        assert svc.bus is not None  # started after the bus is up
        await feed.start(svc.bus)

    @service.on_stop
    async def stop_live_feed(_svc: Service) -> None:
        await feed.stop()

    server = uvicorn.Server(uvicorn.Config(app, host=settings.http_host, port=settings.http_port,
                                           log_config=None, access_log=False, lifespan="on"))
    # uvicorn installs its own signal handlers when it runs as the main server; the service
    # lifecycle owns signals here.
    server.install_signal_handlers = lambda: None
    return server
