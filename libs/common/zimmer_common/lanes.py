"""Job lanes (the seed's GoodJob queues): how many runs at once, and how long one may hold a
thread before the health monitors call the lane wedged.

A lane maps to one durable pull consumer per service with `max_ack_pending = threads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Lane:
    name: str
    threads: int
    # The longest a job here is designed to hold a thread (seed 003 "When a lane is wedged").
    execution_ceiling: timedelta
    # How long JetStream waits for an ack before redelivering; workers send in_progress
    # acks at a third of it while a job runs, so only a dead worker lets it expire.
    ack_wait_seconds: float = 30.0


LANES: dict[str, Lane] = {lane.name: lane for lane in (
    Lane("default", threads=2, execution_ceiling=timedelta(minutes=15)),
    Lane("pollers", threads=1, execution_ceiling=timedelta(minutes=15)),
    Lane("triggers", threads=2, execution_ceiling=timedelta(minutes=15)),
    Lane("auth", threads=1, execution_ceiling=timedelta(minutes=30)),
    Lane("inference", threads=2, execution_ceiling=timedelta(minutes=15)),
    Lane("maintenance", threads=2, execution_ceiling=timedelta(minutes=90)),
)}
