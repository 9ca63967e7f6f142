"""The sender: publishes buffered reports to ZIMMER_INGEST one at a time, in order, each with its
idempotency key as `Nats-Msg-Id`, and removes a report only once JetStream has acked it.

Across a NATS restart: a publish that fails (disconnected, no ack in time) is retried, the same
report with the same key, until it is acked; reports made meanwhile wait behind it in the buffer.
A report the server stored but whose ack was lost is published again and dropped by the stream
as a duplicate (inside its 10-minute window), and the consumers apply each envelope id once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from zimmer_common.contracts.wire import MSG_ID_HEADER
from zimmer_runtime.buffer import OutgoingReport, ReportBuffer
from zimmer_runtime.metrics import RuntimeMetrics

log = logging.getLogger("zimmer_runtime.reports")

RETRY_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0)


class ReportSender:
    def __init__(self, nc: Callable[[], NatsClient], js: Callable[[], JetStreamContext], buffer: ReportBuffer, *,
                 metrics: RuntimeMetrics, publish_timeout: float, closing: asyncio.Event):
        self._nc = nc
        self._js = js
        self.buffer = buffer
        self.metrics = metrics
        self.publish_timeout = publish_timeout
        self._closing = closing
        self._wake = asyncio.Event()  # a report was added, or the connection came back
        self._emptied = asyncio.Event()
        self._emptied.set()
        self._task: asyncio.Task[None] | None = None
        metrics.buffer_capacity.set(buffer.capacity)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="zimmer-runtime-reports")

    def add(self, report: OutgoingReport) -> None:
        dropped = self.buffer.append(report)
        if dropped is not None:
            self.metrics.dropped.labels(dropped.kind).inc()
            log.warning("report buffer full: the oldest report was dropped unsent",
                        extra={"kind": dropped.kind, "key": dropped.key, "capacity": self.buffer.capacity})
        self.metrics.buffered.set(len(self.buffer))
        self._emptied.clear()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def flush(self, timeout: float) -> bool:
        """Wait (at most `timeout`) until every report so far is acked; False if some are not."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._emptied.wait(), timeout)
        return not len(self.buffer)

    async def stop(self, grace: float) -> int:
        """Send what is buffered for up to `grace`, then stop; returns how many were left unsent."""
        await self.flush(grace)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        return len(self.buffer)

    async def _sleep(self, seconds: float) -> None:
        """Until `seconds` pass or something woke the sender (a report, a reconnect) since the
        loop last looked at the buffer."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _run(self) -> None:
        failures = 0
        while True:
            self._wake.clear()  # before looking: a report added from here on wakes the sleep below
            report = self.buffer.head()
            if report is None:
                self._emptied.set()
                await self._sleep(1.0)
                continue
            if not self._nc().is_connected:
                await self._sleep(1.0)  # the reconnect callback wakes it at once
                continue
            try:
                await self._js().publish(report.subject, report.body, timeout=self.publish_timeout,
                                         headers={MSG_ID_HEADER: report.key})
            except Exception as exc:  # noqa: BLE001 - disconnected, no ack in time, stream missing: not stored
                self.metrics.publish_failures.inc()
                if failures == 0:
                    log.warning("report not acked; retrying it until it is", extra={"key": report.key,
                                                                                    "error": repr(exc)})
                await self._sleep(RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)])
                failures += 1
                continue
            failures = 0
            if self.buffer.remove_sent(report):
                self.metrics.sent.labels(report.kind).inc()
            self.metrics.buffered.set(len(self.buffer))
