"""Wiring of the backlog service: what it serves, consumes and schedules, in start-up order.

The ranked work backlog (seed 000). Owns the PostgreSQL schema `backlog`; talks to other
services only over NATS, and learns session status from spot-gate's session events.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_backlog.backlog import SCHEMA, Backlog
from zimmer_common.consumer import ConsumerSpec
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.spot import SESSION_CREATED, SESSION_STATUS_CHANGED
from zimmer_common.contracts.subjects import Stream
from zimmer_common.service import Service, outbox_prune_job
from zimmer_common.settings import Settings

NAME = "backlog"


def build(settings: Settings) -> Service:
    service = Service(NAME, settings, schema=SCHEMA, migrations="zimmer_backlog.migrations",
                      jobs=[outbox_prune_job(SCHEMA)])

    def engine() -> AsyncEngine:
        assert service.engine is not None, "used before start"
        return service.engine

    backlog = Backlog(engine, lambda: service.relay)
    service.app = backlog
    service.rpc(c.GET_ITEMS)(backlog.list)
    service.rpc(c.APPEND)(backlog.append)
    service.consume(ConsumerSpec("backlog_session_events", Stream.EVENTS,
                                 (SESSION_CREATED, SESSION_STATUS_CHANGED)))(backlog.on_session_event)
    return service
