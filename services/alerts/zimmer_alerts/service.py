"""Wiring of the alerts service: what it serves, which jobs it runs, in start-up order.

The one paging path and the health monitors. Owns the PostgreSQL schema `alerts`; talks to other services only over NATS.
"""

from __future__ import annotations

from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "alerts"
SCHEMA = "alerts"


def build(settings: Settings) -> Service:
    return Service(NAME, settings, schema=SCHEMA, migrations=None, jobs=[outbox_prune_job(SCHEMA)])
