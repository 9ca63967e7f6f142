"""The published language between Zimmer services: subject names and one pydantic model per
payload. Every service imports these; nothing else defines a subject string.

Versioning: each payload model declares `VERSION`; the envelope carries it. A consumer that
receives a newer major version than it knows refuses it loudly instead of misreading it.
"""

from zimmer_common.contracts.envelope import EventEnvelope, RpcReply, RpcSpec
from zimmer_common.contracts.ops import (
    HEARTBEAT,
    JOB_RUN,
    PING_OP,
    Heartbeat,
    JobRun,
    JobRunState,
    PingReply,
    PingRequest,
    ping_rpc,
)
from zimmer_common.contracts.subjects import (
    CONTEXTS,
    Stream,
    event_subject,
    job_subject,
    rpc_subject,
    schedule_subject,
)

__all__ = [
    "CONTEXTS",
    "HEARTBEAT",
    "JOB_RUN",
    "PING_OP",
    "EventEnvelope",
    "Heartbeat",
    "JobRun",
    "JobRunState",
    "PingReply",
    "PingRequest",
    "RpcReply",
    "RpcSpec",
    "Stream",
    "event_subject",
    "job_subject",
    "ping_rpc",
    "rpc_subject",
    "schedule_subject",
]
