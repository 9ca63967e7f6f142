"""What the health rules read: plain values, gathered at the edge (zimmer_alerts.handlers.health_reader)
from JetStream and from the job-run and heartbeat records the alerts service keeps. The rules in
zimmer_alerts.domain.queues, .cron and .workers are functions of these and a `now`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class ConsumerReading:
    """One durable consumer, from one consumer-info read and one message read by sequence."""

    stream: str
    consumer: str
    lane: str  # a job lane's name, or "events", "ingest", "commands"
    service: str | None  # the deployment it belongs to, when its name says so
    ready: int  # num_pending: not yet delivered
    claimed: int  # num_ack_pending: delivered, not yet acked
    pool: int | None  # max_ack_pending; None when unbounded (-1)
    oldest_ready_at: datetime | None  # timestamp of the first undelivered message
    oldest_ready_subject: str | None
    last_finished_at: datetime | None  # ack_floor.last_active
    acked_total: int  # ack_floor.consumer_seq: what it has finished, ever
    paused: bool
    paused_until: datetime | None = None
    # Ready messages per subject, when the reader could split them (stream subject counts);
    # None: only the head's subject is known, and the rest are counted as "(unknown)".
    ready_by_subject: dict[str, int] | None = None
    # When the consumer was created: the floor of "waiting since" for a lane that never finished.
    created_at: datetime | None = None
    # Since when its ready work has waited without the lane finishing anything (`domain.lanes`):
    # for a job lane, whose ticks coalesce to one per job, the waiting message's own time is only
    # the newest tick's. None: read the head message's time instead.
    waiting_since: datetime | None = None


@dataclass(frozen=True)
class ClaimedRun:
    """A job run started and not finished (job_run events), aged from its start."""

    service: str
    job: str
    lane: str
    started_at: datetime
    instance_id: str


@dataclass(frozen=True)
class Heartbeat:
    service: str
    instance_id: str
    version: str
    at: datetime
    started_at: datetime
    lanes: tuple[str, ...] = ()
    interval_seconds: float = 15.0  # its cadence: two missed beats read down


@dataclass(frozen=True)
class KeyRecord:
    """What the job-run events say of one scheduled key (service.job)."""

    key: str
    last_enqueued_at: datetime | None  # the newest tick it produced (scheduled or enqueued by hand)
    last_enqueued_scheduled: bool  # False: the newest copy was enqueued outside the schedule
    last_started_at: datetime | None
    last_finished_at: datetime | None  # finished or failed
    running_since: datetime | None  # a started run with no end yet
    waiting_since: datetime | None  # a tick waiting on the stream for a worker (its timestamp)


@dataclass(frozen=True)
class Readings:
    now: datetime
    consumers: list[ConsumerReading]
    claimed_runs: list[ClaimedRun]
    heartbeats: list[Heartbeat]
    finished_last_hour_by_lane: dict[str, int] = field(default_factory=dict)
    readable: bool = True
    problem: str | None = None
    # This deployment's lane execution ceilings where they differ from the seed's (ZIMMER_ALERT_LANE_CEILINGS).
    ceilings: Mapping[str, timedelta] = field(default_factory=dict)
