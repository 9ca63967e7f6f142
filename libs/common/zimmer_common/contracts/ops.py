"""Operational contracts every service speaks: ping, heartbeats, job-run lifecycle."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.subjects import event_subject

PING_OP = "ping"
HEARTBEAT = event_subject("ops", "heartbeat")
JOB_RUN = event_subject("ops", "job_run")


class PingRequest(Request):
    pass


class PingReply(Payload):
    service: str
    version: str
    instance_id: str
    uptime_seconds: float
    ready: bool  # started, and its database (if it has one) answers
    database: bool | None = None  # None: the service owns no database


def ping_rpc(ctx: str) -> RpcSpec[PingRequest, PingReply]:
    return RpcSpec(ctx, PING_OP, PingRequest, PingReply)


class Heartbeat(Payload):
    service: str
    instance_id: str
    version: str
    at: datetime
    uptime_seconds: float
    lanes: list[str]
    # The cadence this instance beats at: two of them without a beat and it reads down.
    interval_seconds: float = 15.0
    # The last beat of a graceful stop: the instance is retired at once, not left to read down.
    stopping: bool = False


class JobRunState(StrEnum):
    ENQUEUED = "enqueued"
    STARTED = "started"
    FINISHED = "finished"
    FAILED = "failed"


class JobRun(Payload):
    """One lifecycle step of one run; `run_id` is the tick's stream sequence."""

    service: str
    job: str
    lane: str
    run_id: str
    state: JobRunState
    at: datetime
    instance_id: str
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_seconds: float | None = None
    error: str | None = None
    scheduled: bool = True


class JobTick(Payload):
    """The body of a job tick on `zimmer.jobs.<ctx>.<lane>.<job>` and of its schedule on
    `zimmer.jobs.schedule.<ctx>.<job>` (DESIGN §4): bare JSON, no envelope; the subject says the
    rest. Written by `zimmer_common.jobs` as `{"job": name}`."""

    job: str
