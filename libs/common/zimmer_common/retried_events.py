"""Events that must arrive across a bus outage but belong to no transaction (a job run's
lifecycle, which the outbox cannot carry: the run is not a row of the runner's schema).

`publish` tries at once; when the bus does not take the event, it is retried in the background,
backing off, until it lands or `RETRY_HORIZON_SECONDS` pass. An event keeps its id (its
Nats-Msg-Id) across retries, so one that JetStream stored but whose ack was lost is dropped as a
duplicate (ZIMMER_EVENTS' duplicate window, 10 minutes, is longer than the horizon), and its
consumers merge events idempotently anyway. Found by the failover suite: runs ticked during a
stream leader's election were done, but their `job_run` events were lost, so alerts recorded no
run for that tick and cron freshness read a gap that was not there.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from tenacity import AsyncRetrying, retry_if_result, stop_after_delay, wait_exponential

from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import Payload
from zimmer_common.logs import kv
from zimmer_common.outage import Outages

log = logging.getLogger("zimmer.bus")

RETRY_HORIZON_SECONDS = 300.0  # inside ZIMMER_EVENTS' 10-minute duplicate window
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 5.0


class RetriedEvents:
    def __init__(self, bus: Bus, outages: Outages, *, horizon: float = RETRY_HORIZON_SECONDS):
        self.bus = bus
        self.outages = outages
        self.horizon = horizon
        self._retrying: set[asyncio.Task[None]] = set()

    @property
    def retrying(self) -> int:
        return len(self._retrying)

    async def publish(self, subject: str, event_type: str, payload: Payload, *, event_id: str,
                      occurred_at: datetime, where: str) -> None:
        """Publish now or, failing that, keep trying in the background; never raises."""
        if await self._try(subject, event_type, payload, event_id, occurred_at, where):
            return
        task = asyncio.create_task(self._retry(subject, event_type, payload, event_id, occurred_at, where),
                                   name=f"retry {event_id}")
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)

    async def _try(self, subject: str, event_type: str, payload: Payload, event_id: str, occurred_at: datetime,
                   where: str) -> bool:
        try:
            await self.bus.publish_event(subject, event_type, payload, event_id=event_id, occurred_at=occurred_at)
            return True
        except Exception as exc:  # noqa: BLE001 - an outage is reported once by Outages; anything else warns
            if self.outages.report(exc, where=where) is None:
                log.warning("could not publish event; retrying", extra=kv(event_id=event_id, error=repr(exc)))
            return False

    async def _retry(self, subject: str, event_type: str, payload: Payload, event_id: str, occurred_at: datetime,
                     where: str) -> None:
        # The first try was publish's own. The next comes FIRST_RETRY_SECONDS after it, each wait
        # twice the one before (MAX_RETRY_SECONDS at most), while the horizon has not passed.
        await asyncio.sleep(FIRST_RETRY_SECONDS)
        retrying = AsyncRetrying(stop=stop_after_delay(self.horizon - FIRST_RETRY_SECONDS),
                                 wait=wait_exponential(multiplier=2 * FIRST_RETRY_SECONDS, max=MAX_RETRY_SECONDS),
                                 retry=retry_if_result(lambda taken: not taken),
                                 retry_error_callback=lambda _state: False)
        if await retrying(self._try, subject, event_type, payload, event_id, occurred_at, where):
            return
        log.warning("event lost: the bus did not take it", extra=kv(event_id=event_id, subject=subject,
                                                                   retried_for_seconds=self.horizon))

    async def drain(self, timeout: float) -> None:
        """At stop: give the events still retrying `timeout` seconds to land, then give them up."""
        if not self._retrying:
            return
        _done, pending = await asyncio.wait(set(self._retrying), timeout=timeout)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("events given up at stop", extra=kv(events=len(pending)))
