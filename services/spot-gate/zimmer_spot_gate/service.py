"""Wiring of the spot-gate service: what it serves, which jobs it runs, in start-up order.

Sessions, the quota pool and the spot gate. Owns the PostgreSQL schema `spot_gate`; talks to other services only over NATS.
"""

from __future__ import annotations

from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "spot-gate"
SCHEMA = "spot_gate"


def build(settings: Settings) -> Service:
    return Service(NAME, settings, schema=SCHEMA, migrations=None, jobs=[outbox_prune_job(SCHEMA)])
