"""The health report as the gateway serves it (issue 15): asked live of the alerts service, whose
RPC handler computes it from JetStream and its records on each call (never a cached monitor
result), and answered even when that service is what stopped.

A report that cannot be computed is itself the finding: the gateway answers with a report whose
overall status is critical and whose every section says it could not be read, rather than a bare
503 that a dashboard or an agent triaging a page would read as "try later".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from zimmer_common.bus import Bus
from zimmer_common.clock import Clock
from zimmer_common.contracts import disk as dk
from zimmer_common.contracts import health as h
from zimmer_common.contracts import logs as lg
from zimmer_common.contracts.envelope import RpcSpec
from zimmer_common.errors import ZimmerError

REPORT_TIMEOUT_SECONDS = 5.0
UNREADABLE_CODE = "report_unavailable"


async def system_health(bus: Bus | None, clock: Clock) -> h.HealthReport:
    """The alerts service's report, with the sweeper's log retention and disk readings beside it
    (asked at the same time; each says why when it is missing). Neither sweeper reading is counted
    in the overall status (seed 003: a retention backlog draining on schedule must not turn the
    report yellow; the disk pages on its own)."""
    if bus is None:
        return unreadable_report("the gateway is not connected to the message bus", clock)
    report, retention, disk = await asyncio.gather(
        _ask(bus, h.SYSTEM_HEALTH, h.HealthQuery()), _ask(bus, lg.LOG_RETENTION_HEALTH, lg.RetentionHealthQuery()),
        _ask(bus, dk.DISK_HEALTH, dk.DiskHealthQuery()))
    if isinstance(report, str):
        report = unreadable_report(f"the alerts service did not answer ({report})", clock)
    lines = []
    if isinstance(retention, str):
        lines.append(f"Log retention: cannot be read now ({retention}).")
    else:
        lines.append(f"Log retention: {retention.status} ({retention.status_note}; not counted in the overall status).")
    if isinstance(disk, str):
        lines.append(f"Disk and clones: cannot be read now ({disk}).")
    else:
        lines.append(f"Disk and clones: {disk.status} (not counted in the overall status).")
        lines.extend(disk.lines)
    return report.model_copy(update=dict(
        summary="\n".join([report.summary, *lines]),
        log_retention=None if isinstance(retention, str) else retention,
        log_retention_problem=retention if isinstance(retention, str) else None,
        disk=None if isinstance(disk, str) else disk, disk_problem=disk if isinstance(disk, str) else None))


async def _ask(bus: Bus, spec: RpcSpec[Any, Any], request: Any) -> Any:
    """The answer, or why there is none ("unavailable: …")."""
    try:
        return await bus.request(spec, request, timeout=REPORT_TIMEOUT_SECONDS)
    except ZimmerError as exc:
        return f"{exc.code.value}: {exc.message}"


def unreadable_report(problem: str, clock: Clock) -> h.HealthReport:
    summary = (f"Overall: critical. The health report cannot be computed: {problem}. Nothing below was measured; "
               "check that the alerts service and NATS are running (the Services panel on /health pings each).")
    return h.HealthReport(
        generated_at=clock.now(), overall_status="critical", summary=summary,
        queue=h.QueueStatistics(readable=False, problem=problem),
        verdict=h.QueueVerdict(status="critical", code=UNREADABLE_CODE, title="Health report unavailable",
                               summary=problem),
        cron=h.CronHealth(readable=False, problem=problem, status="critical"),
        workers=h.WorkerStatistics(active=0, registered=0, instances=[]),
        queue_recovery_mode=h.QueueRecoveryStatus(active=False))


def prose_then_json(report: h.HealthReport) -> str:
    """What get_system_health prints: the prose first (what an agent reads on a phone-sized
    budget), then every number as JSON."""
    return f"{report.summary}\n\n{json.dumps(report.model_dump(mode='json'), indent=1)}"
