"""Wiring of the backlog service: what it serves, which jobs it runs, in start-up order.

The ranked work backlog. Owns the PostgreSQL schema `backlog`; talks to other services only over NATS.
"""

from __future__ import annotations

from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "backlog"
SCHEMA = "backlog"


def build(settings: Settings) -> Service:
    return Service(NAME, settings, schema=SCHEMA, migrations="zimmer_backlog.migrations", jobs=[outbox_prune_job(SCHEMA)])
