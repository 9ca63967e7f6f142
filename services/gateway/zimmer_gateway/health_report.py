"""The health report as the gateway serves it (issue 15): asked live of the alerts service, whose
RPC handler computes it from JetStream and its records on each call (never a cached monitor
result), and answered even when that service is what stopped.

A report that cannot be computed is itself the finding: the gateway answers with a report whose
overall status is critical and whose every section says it could not be read, rather than a bare
503 that a dashboard or an agent triaging a page would read as "try later".
"""

from __future__ import annotations

import json

from zimmer_common.bus import Bus
from zimmer_common.clock import Clock
from zimmer_common.contracts import health as h
from zimmer_common.errors import ZimmerError

REPORT_TIMEOUT_SECONDS = 5.0
UNREADABLE_CODE = "report_unavailable"


async def system_health(bus: Bus | None, clock: Clock) -> h.HealthReport:
    if bus is None:
        return unreadable_report("the gateway is not connected to the message bus", clock)
    try:
        return await bus.request(h.SYSTEM_HEALTH, h.HealthQuery(), timeout=REPORT_TIMEOUT_SECONDS)
    except ZimmerError as exc:
        return unreadable_report(f"the alerts service did not answer ({exc.code.value}: {exc.message})", clock)


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
