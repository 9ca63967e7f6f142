"""Wiring of the sweeper service: what it serves, which jobs it runs, in start-up order.

Session logs, clones, transcripts and trash. Owns the PostgreSQL schema `sweeper`; talks to other services only over NATS.
"""

from __future__ import annotations

from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "sweeper"
SCHEMA = "sweeper"


def build(settings: Settings) -> Service:
    return Service(NAME, settings, schema=SCHEMA, migrations=None, jobs=[outbox_prune_job(SCHEMA)])
