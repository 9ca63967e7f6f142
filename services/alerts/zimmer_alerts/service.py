"""The alerts process: its lifecycle (start, serve, stop) around what `bootstrap` builds.

The one paging path (seed 003 "Alerts"; issue 11): pages arrive on `zimmer.alerts.cmd.page`
from every service's outbox, are recorded in the ledger (issues by fingerprint, conditions by
key, page groups by title), and a notifier loop sends what is due to the sinks the environment
allows; the health monitor's loop pages on the health report (issue 15). Owns the PostgreSQL
schema `alerts`; talks to other services only over NATS.
"""

from __future__ import annotations

import logging

from zimmer_alerts.bootstrap import Alerts, bootstrap
from zimmer_alerts.config import AlertSettings
from zimmer_alerts.store.tables import SCHEMA
from zimmer_common.clock import Clock
from zimmer_common.logs import kv
from zimmer_common.paging import page_or_log
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

log = logging.getLogger("zimmer.alerts")
health_log = logging.getLogger("zimmer.health")
NAME = "alerts"


def build(settings: Settings, clock: Clock | None = None, alert_settings: AlertSettings | None = None) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_alerts.migrations",
                      jobs=[outbox_prune_job(SCHEMA)], clock=clock)
    alerts = bootstrap(service, alert_settings or AlertSettings())
    service.app = alerts.notifier
    service.recovery = alerts.recovery  # type: ignore[attr-defined]  # the expiry job's pass, for tests

    @service.on_start
    async def start_monitor(svc: Service) -> None:
        # The NATS server's first sighting is a lower bound of cron freshness (a restarted server
        # fires no missed ticks); note it at start, not only at the first report.
        try:
            await alerts.reporter.note_server()
        except Exception as exc:  # noqa: BLE001 - the first report records it instead
            health_log.warning("NATS server not recorded at start", extra=kv(error=repr(exc)))
        svc.spawn(check_health(svc, alerts), "health-monitor")

    @service.on_start
    async def start_notifier(svc: Service) -> None:
        svc.spawn(notify(svc, alerts), "alert-notifier")

    @service.on_stop
    async def close_http(_svc: Service) -> None:
        await alerts.http.aclose()

    return service


async def check_health(service: Service, alerts: Alerts) -> None:
    """The health monitor, every `health_check_seconds` until the service stops. The first check
    waits one interval: a process just started has nothing to judge yet, and a page needs two
    checks anyway."""
    while not service.stopping:
        await service.pause(alerts.config.health_check_seconds)
        if service.stopping:
            break
        try:
            report = await alerts.monitor.check_once()
        except Exception as exc:  # noqa: BLE001 - a failed check pages; the next one runs
            await page_or_log(service.page_error, "Health check failed", "the health monitor's check raised; "
                              "the next one runs in a minute", ["health", "check", type(exc).__name__],
                              snippet_source=exc)
            continue
        try:  # the Health charts' minute (issue 32 #4): its loss is a gap in a chart, never a missed page
            await alerts.history.record(report)
        except Exception as exc:  # noqa: BLE001 - the next check records the next minute
            health_log.warning("lane history not recorded", extra=kv(error=repr(exc)))


async def notify(service: Service, alerts: Alerts) -> None:
    """The notifier, every `alert_check_seconds` until the service stops."""
    while not service.stopping:
        try:
            await alerts.notifier.run_once()
        except Exception as exc:  # noqa: BLE001 - the next pass retries; the loop never dies
            log.warning("alert notifier pass failed", extra=kv(error=repr(exc)))
        await service.pause(alerts.config.alert_check_seconds)
