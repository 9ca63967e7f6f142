"""The spot-gate process: its lifecycle (start, serve, stop) around what `bootstrap` builds.

Sessions, the quota pool and the spot gate (seed 004). Owns the PostgreSQL schema `spot_gate`;
talks to other services only over NATS.
"""

from __future__ import annotations

import logging

from zimmer_common.clock import Clock
from zimmer_common.logs import kv
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings
from zimmer_spot_gate.bootstrap import bootstrap
from zimmer_spot_gate.handlers.sessions import SpotGate
from zimmer_spot_gate.handlers.turns import SCHEMA
from zimmer_spot_gate.metrics import REFRESH_SECONDS

log = logging.getLogger("zimmer.spot_gate")
NAME = "spot-gate"


def build(settings: Settings, clock: Clock | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_spot_gate.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    app = bootstrap(service)

    @service.on_start
    async def start_metrics(svc: Service) -> None:
        svc.spawn(refresh_metrics(svc, app), "spot-metrics")

    return service


async def refresh_metrics(service: Service, app: SpotGate) -> None:
    """The policy view's numbers as metrics, every REFRESH_SECONDS until the service stops."""
    while not service.stopping:
        try:
            app.metrics.observe(await app.policy.get())
            app.metrics.observe_costs(await app.policy.costs())
        except Exception as exc:  # noqa: BLE001 - a missed refresh leaves the last values
            log.warning("spot metrics refresh failed", extra=kv(error=repr(exc)))
        await service.pause(REFRESH_SECONDS)
