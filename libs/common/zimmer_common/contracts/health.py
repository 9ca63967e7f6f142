"""The health report and its levers (seed 003 "Queues" to "'N active / M registered' workers",
"cron freshness", "Queue recovery mode", "Queued job maintenance"; DESIGN §4): what the alerts
service answers live on `zimmer.alerts.rpc.system_health`, and the recovery-mode and queued-message
maintenance requests behind `action_health`.

The seed's GoodJob rows are JetStream here; docs/health.md keeps the mapping. A lane is a set of
durable consumers: each service's job-runner consumer of that lane, and the `events`, `ingest`
and `commands` lanes of the event, ingest and runtime-command consumers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from zimmer_common.contracts.disk import DiskHealth
from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import NAME_MAX, LongText, Name, at_least_one_of
from zimmer_common.contracts.logs import LogRetentionHealth
from zimmer_common.contracts.subjects import event_subject

CTX = "alerts"
Status = Literal["ok", "warning", "critical"]
CronState = Literal["fresh", "overdue", "stale", "disabled", "exempt"]
READY_BREAKDOWN_LIMIT = 5  # subjects in a capped breakdown before "other (N more)"


class Count(Payload):
    name: str
    count: int


class Age(Payload):
    name: str
    age_seconds: float


class HeadOfLine(Payload):
    lane: str
    subject: str
    age_seconds: float


class LaneStatistics(Payload):
    """One lane. Ages are seconds; `None` where nothing is there to age (never 0)."""

    lane: str
    consumers: int
    ready: int
    claimed: int
    pool: int | None = Field(None, description="Threads: the consumers' max_ack_pending summed; None = unbounded")
    oldest_ready_age_seconds: float | None
    head_subject: str | None
    oldest_claimed_age_seconds: float | None
    youngest_claimed_age_seconds: float | None
    oldest_claimed_job: str | None
    last_finished_at: datetime | None
    seconds_since_last_finished: float | None
    processing_rate_per_hour: float | None
    paused: bool = Field(description="Every consumer of the lane is paused (queue recovery mode or by hand)")
    depth_threshold: int
    stall_age_seconds: float
    execution_ceiling_seconds: float | None


class QueueStatistics(Payload):
    """The seed's queue_statistics. By-lane maps leave out a lane with nothing in them (an idle
    lane and a draining one are different facts); by-subject lists are capped at 5 + other."""

    readable: bool = True  # False: JetStream could not be read; every figure below is absent
    problem: str | None = None
    ready_count: int = 0
    claimed_count: int = 0
    oldest_ready_age_seconds: float | None = None
    oldest_claimed_age_seconds: float | None = None
    head_of_line: HeadOfLine | None = None
    ready_count_by_lane: list[Count] = []
    ready_count_by_subject: list[Count] = []
    oldest_ready_age_seconds_by_lane: list[Age] = []
    claimed_count_by_lane: list[Count] = []
    claimed_count_by_subject: list[Count] = []
    oldest_claimed_age_seconds_by_lane: list[Age] = []
    youngest_claimed_age_seconds_by_lane: list[Age] = []
    oldest_claimed_job_by_lane: dict[str, str] = {}
    last_finished_at: datetime | None = None
    seconds_since_last_finished: float | None = None
    processing_rate_per_hour: float | None = None
    lanes: list[LaneStatistics] = []


class QueueVerdict(Payload):
    status: Status
    code: str | None = Field(None, description="execution_stalled, wedged_lane:<lane>, backlog_lane:<lane>, "
                                                "backlog_cross_lane; None when ok")
    title: str | None = Field(None, description="Nothing is executing / Queue lane wedged / Queue backlog critical")
    summary: str
    paused_lanes: list[str] = []


class CronKeyReading(Payload):
    key: str
    service: str
    job: str
    cadence: str
    lane: str
    state: CronState
    reason: str
    grace_seconds: float
    last_produced_at: datetime | None
    owed_since: datetime | None
    held_by: str | None = None


class CronHealth(Payload):
    readable: bool = True
    problem: str | None = None
    status: Status = "ok"
    keys: list[CronKeyReading] = []


class WorkerInstance(Payload):
    service: str
    instance_id: str
    version: str
    last_heartbeat_at: datetime
    started_at: datetime
    active: bool  # a heartbeat within 5 minutes (seed 003's "N active")
    # up: a heartbeat within two of its own intervals; down: missed two (a replica killed or hung).
    state: Literal["up", "down"] = "up"


class ServiceInstances(Payload):
    """'2 of 2 spot-gate instances up': a service's registered instances and how many are up."""

    up: int
    registered: int


class WorkerStatistics(Payload):
    active: int
    registered: int
    instances: list[WorkerInstance]
    by_service: dict[str, ServiceInstances] = {}


class QueueRecoveryStatus(Payload):
    active: bool
    entered_by: str | None = None
    reason: str | None = None
    entered_at: datetime | None = None
    expires_at: datetime | None = None
    lanes: list[str] = []
    paused_consumers: list[str] = []
    resumed_consumers: list[str] = Field([], description="Exit only: the demand-side consumers it resumed")
    resumed_by_hand: list[str] = Field([], description="Exit only: resumed consumers the mode had not paused "
                                                       "(paused by hand)")


class StreamReplicas(Payload):
    """One JetStream stream's replicas as its leader reports them (STREAM.INFO's cluster block)."""

    stream: str
    expected: int  # the stream's configured replicas
    current: int  # the leader and every replica caught up
    leader: str | None  # None: no leader (an election, or a lost quorum): writes are refused
    offline: list[str] = []  # replicas whose server is gone
    lagging: list[str] = []  # replicas online but not caught up


class ClusterHealth(Payload):
    """The NATS cluster under JetStream (issue 29 #4): each stream's leader and replicas, and the
    servers seen offline. Warning while a stream is under-replicated (one more loss from refusing
    writes), critical while one has no leader."""

    readable: bool
    problem: str | None = None
    status: Status = "ok"
    streams: list[StreamReplicas] = []
    servers_offline: list[str] = []
    summary: str = ""


class HealthReport(Payload):
    generated_at: datetime
    overall_status: Status
    summary: str = Field(description="The report as prose: what get_system_health prints above the JSON")
    queue: QueueStatistics
    verdict: QueueVerdict
    cron: CronHealth
    workers: WorkerStatistics
    queue_recovery_mode: QueueRecoveryStatus
    cluster: ClusterHealth | None = None  # None: not read (a report computed by an older alerts)
    # The sweeper's readings, added by the gateway (seed 003: GET /api/v1/health carries
    # log_retention_health; issue 16: the disk): neither is counted in overall_status. Each is
    # None with its *_problem saying why when the sweeper did not answer.
    log_retention: LogRetentionHealth | None = None
    log_retention_problem: str | None = None
    disk: DiskHealth | None = None
    disk_problem: str | None = None


class HealthQuery(Request):
    pass


# ---- queue recovery mode ------------------------------------------------------------------

class EnterQueueRecoveryMode(Request):
    reason: LongText = Field(min_length=1, description="Why the demand-side lanes are being halted")
    ttl_minutes: int = Field(60, ge=1, le=100_000, description="Minutes until it lifts by itself; clamped to 5 to "
                                                               "240 (the seed: clamped, not refused)")
    actor: Name = Field("operator", description="Who entered it (set by the gateway from the caller)")


class ExitQueueRecoveryMode(Request):
    actor: Name = "operator"


# ---- queued-message maintenance -------------------------------------------------------------

MAINTENANCE_CAP = 2_000
PROTECTED_LANES = ("auth",)  # the seed's agents lane has no counterpart here; auth is spared too
# Refused by job as well as by lane, so moving one onto another lane does not make it discardable
# (seed 003: "Both are refused by class as well"): the backstop that lifts recovery mode.
PROTECTED_JOBS = ("queue_recovery_expiry",)


# The job lanes (zimmer_common.lanes.LANES, which a test holds this to); auth is refused (409) as protected.
LaneName = Literal["default", "pollers", "triggers", "auth", "inference", "maintenance"]
# A subject filter under zimmer.jobs.: tokens that are not empty and hold no whitespace (as Python's
# `str.isspace` has it) nor NUL, `*` only as a whole token, `>` only as the whole last one.
_TOKEN = "[^.*>\\x00\\t-\\r\\x1c- \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]+"
SUBJECT_FILTER_PATTERN = f"^zimmer\\.jobs(\\.({_TOKEN}|\\*))*\\.({_TOKEN}|\\*|>)$"
SubjectFilter = Annotated[str, Field(max_length=NAME_MAX, json_schema_extra={"pattern": SUBJECT_FILTER_PATTERN})]


class QueuedScope(Request):
    """Which waiting messages: a lane, a subject (exact or with NATS wildcards), or both. One is
    required: there is no "everything"."""

    model_config = ConfigDict(json_schema_extra=at_least_one_of("lane", "subject"))
    lane: LaneName | None = None
    subject: SubjectFilter | None = Field(None, description="zimmer.jobs.<…>, exact or with NATS wildcards")


class QueuedMutation(QueuedScope):
    expected_count: int = Field(ge=0, le=MAINTENANCE_CAP,
                                description="How many messages you expect to affect; a mismatch refuses")
    delay_minutes: int | None = Field(None, ge=1, le=7 * 24 * 60,
                                      description="Reschedule only: minutes from now to deliver them again")
    actor: Name = "operator"


class QueuedPreview(Payload):
    lane: str | None
    subject: str | None
    count: int
    by_subject: list[Count]
    by_lane: list[Count]
    over_cap: bool
    claimed: list[Count] = Field([], description="In scope but already delivered to a worker (ack pending): "
                                                 "not counted, never touched")


class QueuedReceipt(Payload):
    action: Literal["discard", "reschedule"]
    recoverable: bool
    count: int
    by_subject: list[Count]
    by_lane: list[Count]
    skipped: list[Count]
    deliver_at: datetime | None = None


SYSTEM_HEALTH = RpcSpec(CTX, "system_health", HealthQuery, HealthReport)
ENTER_QUEUE_RECOVERY = RpcSpec(CTX, "enter_queue_recovery_mode", EnterQueueRecoveryMode, QueueRecoveryStatus)
QUEUE_RECOVERY_STATUS = RpcSpec(CTX, "queue_recovery_status", HealthQuery, QueueRecoveryStatus)
EXIT_QUEUE_RECOVERY = RpcSpec(CTX, "exit_queue_recovery_mode", ExitQueueRecoveryMode, QueueRecoveryStatus)
# Queue recovery mode was entered, extended or lifted (by a person or by its TTL), announced in the
# transaction that changed it: every gateway's live pages show, change or drop the banner at once,
# whichever gateway or job made the change (issue 32 #1). The payload is the mode's status after it.
QUEUE_RECOVERY_CHANGED = event_subject(CTX, "queue_recovery_changed")
PREVIEW_QUEUED = RpcSpec(CTX, "preview_queued_messages", QueuedScope, QueuedPreview)
DISCARD_QUEUED = RpcSpec(CTX, "discard_queued_messages", QueuedMutation, QueuedReceipt)
RESCHEDULE_QUEUED = RpcSpec(CTX, "reschedule_queued_messages", QueuedMutation, QueuedReceipt)
