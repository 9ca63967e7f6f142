"""Wiring of the sweeper service: what it serves, which jobs it runs, in start-up order.

Session logs, clones, transcripts and trash. Owns the PostgreSQL schema `sweeper`; talks to other services only over NATS.
"""

from __future__ import annotations

from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings
from zimmer_alerts.pager import attach_pager

NAME = "sweeper"
SCHEMA = "sweeper"


def build(settings: Settings) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations=None, jobs=[outbox_prune_job(SCHEMA)])
    attach_pager(service)  # a crashed sweep pages
    return service
