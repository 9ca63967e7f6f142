"""Every subject of the published language with what travels on it, written down once (DESIGN §3;
issue 28 #1).

An RPC's pairing is its `RpcSpec` (subject, request, response), declared in its context's module
and found here by walking the modules. What goes through JetStream (domain events, runtime
commands, ingest, pages, operations events, job ticks) was paired only at each publisher's call
(`emit(conn, schema, ITEM_APPENDED, "item_appended", ItemEvent(...))`): this module is where each
subject meets its envelope `type`, its payload model, its stream and the side that sends it. The
AsyncAPI document (`contracts.asyncapi`) and its test read these lists and nothing else.

Subjects with a variable token (a per-host RPC, every service's ping, job ticks) are written with
`{parameter}` placeholders, built by the same subject builders the services call.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from zimmer_common.contracts import alerts, backlog, clones, health, logs, ops, runtime, spot
from zimmer_common.contracts.disk import reclaim_space_spec
from zimmer_common.contracts.envelope import RpcSpec
from zimmer_common.contracts.subjects import CONTEXTS, Stream, job_subject, schedule_subject


class Direction(StrEnum):
    """Which way a message goes, seen from the control plane's services (AsyncAPI's `action`)."""

    SENT = "send"  # a service publishes it; the runtime, another service or any subscriber reads it
    RECEIVED = "receive"  # the runtime or another peer publishes it; a service consumes it


@dataclass(frozen=True)
class Parameter:
    """A `{name}` token of a subject pattern."""

    name: str
    description: str
    enum: tuple[str, ...] = ()


@dataclass(frozen=True)
class MessageSpec:
    """One kind of message on a JetStream subject. `event_type` is the `EventEnvelope.type` the
    payload travels under; None means the body is the payload itself, with no envelope."""

    subject: str
    event_type: str | None
    payload: type[BaseModel]
    stream: Stream
    direction: Direction
    sender: str
    summary: str
    parameters: tuple[Parameter, ...] = ()


@dataclass(frozen=True)
class RpcPattern:
    """An RPC whose subject has a variable token, its spec built with `{parameter}` placeholders."""

    spec: RpcSpec[Any, Any]
    parameters: tuple[Parameter, ...]
    summary: str


SERVICE_CONTEXTS = tuple(sorted(CONTEXTS.values()))
CTX = Parameter("ctx", "A service's subject context (`spot` is spot-gate's).", SERVICE_CONTEXTS)
JOB_CTX = Parameter("ctx", "The owning service's context, or `<ctx>-<host>` for a per-host job "
                    "(the sweeper's disk sweeps, one sweeper per runtime host).")
LANE = Parameter("lane", "The job's lane: one durable work-queue consumer per service and lane.")
JOB = Parameter("job", "The job's name.")
HOST = Parameter("host", "The runtime host whose sweeper answers (lower case letters, digits, '-' and '_').")


def _event(subject: str, event_type: str, payload: type[BaseModel], sender: str, summary: str) -> MessageSpec:
    return MessageSpec(subject, event_type, payload, Stream.EVENTS, Direction.SENT, sender, summary)


def _command(subject: str, event_type: str, payload: type[BaseModel], summary: str) -> MessageSpec:
    return MessageSpec(subject, event_type, payload, Stream.RUNTIME, Direction.SENT, "spot-gate", summary)


def _ingest(subject: str, event_type: str, payload: type[BaseModel], summary: str) -> MessageSpec:
    return MessageSpec(subject, event_type, payload, Stream.INGEST, Direction.RECEIVED, "runtime", summary)


BACKLOG_EVENTS = [
    _event(backlog.ITEM_APPENDED, "item_appended", backlog.ItemEvent, "backlog", "An item joined the backlog."),
    _event(backlog.ITEM_STARTED, "item_started", backlog.ItemEvent, "backlog",
           "An item's session was spawned: the item left the queue for good."),
    _event(backlog.ITEM_REMOVED, "item_removed", backlog.ItemEvent, "backlog",
           "An item was removed (a pull, or an operator's remove)."),
    _event(backlog.ITEM_PINNED, "item_pinned", backlog.ItemEvent, "backlog", "An item was pinned at a precedence."),
    _event(backlog.ITEM_UNPINNED, "item_unpinned", backlog.ItemEvent, "backlog", "An item's pin was taken off."),
    _event(backlog.ITEM_HELD, "item_held", backlog.ItemEvent, "backlog", "A stranded item was held for a human decision."),
]

SPOT_EVENTS = [
    _event(spot.SESSION_CREATED, "session_created", spot.SessionEvent, "spot-gate", "A session was spawned."),
    _event(spot.SESSION_STATUS_CHANGED, "session_status_changed", spot.SessionEvent, "spot-gate",
           "A session's status changed; `previous` holds the old one."),
    _event(spot.SESSION_CLASS_CHANGED, "session_class_changed", spot.SessionEvent, "spot-gate",
           "A session moved between the priority and spot classes."),
    _event(spot.SESSION_PRECEDENCE_CHANGED, "session_precedence_changed", spot.SessionEvent, "spot-gate",
           "A session's precedence changed."),
    _event(spot.SESSION_PAUSED, "session_paused", spot.SessionEvent, "spot-gate",
           "A session was paused (into the spot queue, until a time, by the ceiling sweep, or parked)."),
    _event(spot.SESSION_ARCHIVED, "session_archived", spot.SessionEvent, "spot-gate", "A session was archived."),
    _event(spot.SESSION_UNARCHIVED, "session_unarchived", spot.SessionEvent, "spot-gate", "A session was unarchived."),
    _event(spot.SESSION_DELETED, "session_deleted", spot.SessionDeleted, "spot-gate",
           "A session's row is gone (an operator's DELETE or an archive purge): what is kept by its id goes too."),
    _event(spot.QUOTA_READING_RECORDED, "quota_reading_recorded", spot.QuotaReadingRecorded, "spot-gate",
           "An account's quota reading was recorded (the Quotas page follows it)."),
]

OPERATIONS_EVENTS = [
    _event(ops.HEARTBEAT, "heartbeat", ops.Heartbeat, "every service",
           "A service instance is alive; read by alerts (health and cron freshness)."),
    _event(ops.JOB_RUN, "job_run", ops.JobRun, "every service", "One lifecycle step of one job run; read by alerts."),
    _event(alerts.PAGE, "page", alerts.Page, "every service",
           "Something a human must hear about, sent through the sender's outbox; consumed by alerts."),
    _event(health.QUEUE_RECOVERY_CHANGED, "queue_recovery_changed", health.QueueRecoveryStatus, "alerts",
           "Queue recovery mode was entered, extended or lifted (a person or its TTL): the gateways' live pages "
           "show, change or drop the banner."),
]

RUNTIME_COMMANDS = [
    _command(runtime.START_TURN, "start_turn", runtime.StartTurn, "Run a turn the gate admitted, with its prompt."),
    _command(runtime.STOP_TURN, "stop_turn", runtime.StopTurn,
             "Stop a session's turn; the runtime answers with the session's status report."),
    _command(runtime.SAMPLE_QUOTA, "sample_quota", runtime.SampleQuota,
             "Read these accounts' quota now and report it on zimmer.ingest.quota_reading."),
]

INGEST = [
    _ingest(runtime.INGEST_SESSION_STATUS, "session_status", runtime.SessionStatusReport,
            "A session's status as the runtime sees it; consumed by spot-gate."),
    _ingest(runtime.INGEST_QUOTA_READING, "quota_reading", runtime.QuotaReadingIn,
            "An account's quota windows as last read; consumed by spot-gate."),
    _ingest(runtime.INGEST_SPEND, "spend", runtime.SpendReport,
            "Tokens one model request spent; counted once per `request_id` by spot-gate."),
    _ingest(clones.INGEST_CLONE, "clone", clones.CloneReport,
            "The runtime made a session's clone; spot-gate stores its path."),
    _ingest(logs.INGEST_LOGS, logs.LOG_LINE, logs.LogLineIn,
            "One timeline line (spot-gate writes the gate's own lines this way too); stored by the sweeper."),
    _ingest(logs.INGEST_LOGS, logs.LOG_LINES, logs.LogLinesIn,
            "A batch of up to 1,000 timeline lines, each with its own message id: the shape a runtime should use."),
]

JOB_TICKS = [
    MessageSpec(job_subject("{ctx}", "{lane}", "{job}"), None, ops.JobTick, Stream.JOBS, Direction.RECEIVED,
                "the service's schedule, or an enqueue", "Run this job now: one waiting tick per subject, "
                "taken by the owning service's lane consumer.", (JOB_CTX, LANE, JOB)),
    MessageSpec(schedule_subject("{ctx}", "{job}"), None, ops.JobTick, Stream.JOBS, Direction.SENT,
                "the owning service, at start", "A job's message schedule: headers `Nats-Schedule` (the cadence) and "
                "`Nats-Schedule-Target` (the tick subject); the server publishes the ticks. No lane consumer's filter "
                "takes this prefix, so the schedule stays in the stream.", (JOB_CTX, JOB)),
]

MESSAGES: list[MessageSpec] = BACKLOG_EVENTS + SPOT_EVENTS + OPERATIONS_EVENTS + RUNTIME_COMMANDS + INGEST + JOB_TICKS

RPC_PATTERNS: list[RpcPattern] = [
    RpcPattern(ops.ping_rpc("{ctx}"), (CTX,), "Every service answers ping: its version, instance and readiness."),
    RpcPattern(reclaim_space_spec("{host}"), (HOST,),
               "Reclaim space on one host's clones volume, asked of that host's sweeper."),
]


def contract_modules() -> list[Any]:
    """Every module of the contracts package, imported."""
    package = importlib.import_module("zimmer_common.contracts")
    return [importlib.import_module(f"{package.__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name)]


def rpc_specs() -> list[RpcSpec[Any, Any]]:
    """Every RPC declared as a module constant in the contracts, once each, by subject."""
    found: dict[str, RpcSpec[Any, Any]] = {}
    for module in contract_modules():
        for value in vars(module).values():
            if isinstance(value, RpcSpec):
                found.setdefault(value.subject, value)
    return [found[subject] for subject in sorted(found)]
