""""N active / M registered" workers (seed 003), from the heartbeats every service instance sends.

Active clears the heartbeat cadence by an order of magnitude rather than matching it: a threshold
at the cadence reports a healthy worker as down whenever one beat slips under load (the seed's
2026-08-02 "1 active / 2 registered"). An instance silent for REGISTERED_FOR is deregistered, as
GoodJob reaps a process row, so a replica that went away does not stay "registered" for ever.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Literal

from zimmer_alerts.domain.readings import Heartbeat
from zimmer_common.contracts.health import ServiceInstances, WorkerInstance, WorkerStatistics

WORKER_ACTIVE_INTERVAL = timedelta(minutes=5)
REGISTERED_FOR = timedelta(hours=1)
MISSED_BEATS_DOWN = 2  # one late beat under load is not a dead replica; two are


def instance_state(hb: Heartbeat, now: datetime) -> Literal["up", "down"]:
    """Up while its newest beat is within MISSED_BEATS_DOWN of its own intervals."""
    return "up" if now - hb.at <= timedelta(seconds=MISSED_BEATS_DOWN * hb.interval_seconds) else "down"


def worker_statistics(heartbeats: Iterable[Heartbeat], now: datetime) -> WorkerStatistics:
    """One row per (service, instance), from its newest heartbeat; active when that is younger than
    WORKER_ACTIVE_INTERVAL, registered while younger than REGISTERED_FOR, up or down by its own
    cadence; and per service, how many of its registered instances are up. (An instance a
    graceful stop retired is not among the heartbeats: it is gone at once.)"""
    newest: dict[tuple[str, str], Heartbeat] = {}
    for hb in heartbeats:
        key = (hb.service, hb.instance_id)
        if key not in newest or hb.at > newest[key].at:
            newest[key] = hb
    instances = [
        WorkerInstance(service=hb.service, instance_id=hb.instance_id, version=hb.version,
                       last_heartbeat_at=hb.at, started_at=hb.started_at,
                       active=now - hb.at < WORKER_ACTIVE_INTERVAL, state=instance_state(hb, now))
        for key, hb in sorted(newest.items())
        if now - hb.at < REGISTERED_FOR
    ]
    by_service: dict[str, ServiceInstances] = {}
    for i in instances:
        counts = by_service.setdefault(i.service, ServiceInstances(up=0, registered=0))
        counts.registered += 1
        counts.up += i.state == "up"
    return WorkerStatistics(active=sum(i.active for i in instances), registered=len(instances), instances=instances,
                            by_service=by_service)


def live_instances_by_service(workers: WorkerStatistics) -> dict[str, list[WorkerInstance]]:
    """The active instances of each service (a service with none is absent)."""
    live: dict[str, list[WorkerInstance]] = defaultdict(list)
    for instance in workers.instances:
        if instance.active:
            live[instance.service].append(instance)
    return dict(live)


def newest_live_start(workers: WorkerStatistics, service: str) -> datetime | None:
    """When the newest live instance of `service` started: during a cutover the old one is still
    registered and running the old schedule, so the newest is the one that counts."""
    return max((i.started_at for i in live_instances_by_service(workers).get(service, [])), default=None)
