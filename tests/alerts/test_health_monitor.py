"""The monitor's paging decisions (issue 15; seed 003 SystemHealthMonitorJob), fed reports: a page
after two consecutive critical checks, the streak cleared by any other check, the condition
resolved once it no longer holds; "Cron schedule stale" per key; nothing while queue recovery
mode is on; an unreadable cron check pages loudly instead of reading as "nothing stale"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from zimmer_alerts.handlers.monitor import CRON_TITLE, UNREADABLE_TITLE, HealthMonitor
from zimmer_common.contracts import health as h

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STALLED = h.QueueVerdict(status="critical", code="execution_stalled", title="Nothing is executing",
                         summary="nothing finished in 10 min")
OK = h.QueueVerdict(status="ok", summary="Queue processing normally")


def report(verdict: h.QueueVerdict = OK, stale: tuple[str, ...] = (), recovery: bool = False,
           cron_readable: bool = True) -> h.HealthReport:
    keys = [h.CronKeyReading(key=k, service=k.split(".")[0], job=k.split(".")[1], cadence="@every 1m",
                             lane="default", state="stale", reason="Not produced", grace_seconds=1800,
                             last_produced_at=None, owed_since=None) for k in stale]
    cron = h.CronHealth(status="critical" if stale else "ok", keys=keys) if cron_readable else h.CronHealth(
        readable=False, problem="JetStream did not answer", status="critical")
    return h.HealthReport(generated_at=NOW, overall_status=verdict.status, summary="", queue=h.QueueStatistics(),
                          verdict=verdict, cron=cron, workers=h.WorkerStatistics(active=1, registered=1, instances=[]),
                          queue_recovery_mode=h.QueueRecoveryStatus(active=recovery))


class Reports:
    def __init__(self, *reports: h.HealthReport):
        self.queue = list(reports)

    async def report(self) -> h.HealthReport:
        return self.queue.pop(0)


class RecordingPager:
    def __init__(self) -> None:
        self.pages: list[dict[str, Any]] = []

    async def report(self, **page: Any) -> None:
        self.pages.append(page)


def monitor(*reports: h.HealthReport) -> tuple[HealthMonitor, RecordingPager]:
    pager = RecordingPager()
    return HealthMonitor(Reports(*reports), pager), pager  # type: ignore[arg-type]  # stand-in reports and pager


async def checks(m: HealthMonitor, n: int) -> None:
    for _ in range(n):
        await m.check_once()


async def test_two_consecutive_critical_checks_page_once_per_check_and_recovery_resolves() -> None:
    m, pager = monitor(report(STALLED), report(STALLED), report(STALLED), report(OK))
    await checks(m, 1)
    assert pager.pages == []
    await checks(m, 2)
    assert [(p["title"], p.get("still_true", True)) for p in pager.pages] == [
        ("Nothing is executing", True), ("Nothing is executing", True)]  # the ledger groups a lasting condition
    assert pager.pages[0]["condition_key"] == "health:execution_stalled"
    assert pager.pages[0]["context"]["status_code"] == "execution_stalled"
    await checks(m, 1)
    assert pager.pages[-1]["still_true"] is False and pager.pages[-1]["condition_key"] == "health:execution_stalled"


async def test_any_non_critical_check_clears_the_streak() -> None:
    warning = h.QueueVerdict(status="warning", code="lane_draining", title="Queue backlog elevated", summary="")
    m, pager = monitor(report(STALLED), report(warning), report(STALLED), report(OK), report(STALLED))
    await checks(m, 5)
    assert pager.pages == []


async def test_cron_stale_pages_per_key_streak_not_per_check() -> None:
    m, pager = monitor(report(stale=("backlog.outbox_prune",)), report(stale=("spot-gate.recheck_due",)),
                       report(stale=("spot-gate.recheck_due",)), report())
    await checks(m, 2)
    assert pager.pages == []  # two different keys, one check each: two unconfirmed readings
    await checks(m, 1)
    [page] = pager.pages
    assert page["title"] == CRON_TITLE and page["context"]["keys"] == ["spot-gate.recheck_due"]
    assert "get_system_health" in page["message"]
    await checks(m, 1)
    assert pager.pages[-1]["title"] == CRON_TITLE and pager.pages[-1]["still_true"] is False


async def test_nothing_pages_while_queue_recovery_mode_is_on() -> None:
    m, pager = monitor(*[report(STALLED, stale=("backlog.outbox_prune",), recovery=True)] * 3,
                       report(STALLED, stale=("backlog.outbox_prune",)))
    await checks(m, 4)
    assert pager.pages == []  # the streak starts again after the halt: one check is not a page


async def test_a_cron_check_that_cannot_read_pages_loudly() -> None:
    m, pager = monitor(report(cron_readable=False))
    await checks(m, 1)
    [page] = pager.pages
    assert page["title"] == UNREADABLE_TITLE and "JetStream did not answer" in page["message"]


async def test_a_page_about_many_keys_fits_its_bound_and_names_them() -> None:
    from zimmer_common.contracts.alerts import Page
    keys = tuple(f"service{i}.job_with_a_rather_long_name_{i}" for i in range(40))
    m, pager = monitor(report(stale=keys), report(stale=keys))
    await checks(m, 2)
    [page] = pager.pages
    assert len(page["message"]) <= 2000 and page["context"]["keys"] == list(keys)
    assert keys[0] in page["message"] and "more" in page["message"]
    Page(title=page["title"], level="error", source="alerts", fingerprint=page["fingerprint"],  # valid as sent
         message=page["message"], context=page["context"], occurred_at=NOW)


def with_cluster(status: str, summary: str = "ZIMMER_JOBS 2 of 3 replicas current; offline: n3") -> h.HealthReport:
    nats = h.ClusterHealth(readable=True, status=status, servers_offline=["n3"] if status != "ok" else [],
                           summary=summary if status != "ok" else "whole",
                           streams=[h.StreamReplicas(stream="ZIMMER_JOBS", expected=3, current=2 if status != "ok" else 3,
                                                     leader="n1")])
    return report().model_copy(update={"cluster": nats})


async def test_a_degraded_cluster_pages_after_five_minutes_once_and_resolves_when_whole() -> None:
    # One of three nodes down read "ok" everywhere: now it pages once it has lasted 5 minutes
    # (an election or a node's restart settles well within them), and resolves when whole.
    from zimmer_alerts.handlers.monitor import CLUSTER_CONDITION, CLUSTER_GRACE_SECONDS, CLUSTER_TITLE

    clock = [0.0]
    pager = RecordingPager()
    m = HealthMonitor(Reports(with_cluster("warning"), with_cluster("warning"), with_cluster("warning"),  # type: ignore[arg-type]  # stand-in reports and pager
                              with_cluster("ok"), with_cluster("warning")), pager, monotonic=lambda: clock[0])
    await m.check_once()
    clock[0] += CLUSTER_GRACE_SECONDS - 1
    await m.check_once()
    assert pager.pages == []  # not yet five minutes
    clock[0] += 2
    await m.check_once()
    [page] = pager.pages
    assert (page["title"], page["condition_key"]) == (CLUSTER_TITLE, CLUSTER_CONDITION)
    assert "offline: n3" in page["message"] and page["context"]["servers_offline"] == ["n3"]
    await m.check_once()
    assert pager.pages[-1]["still_true"] is False and "whole again" in pager.pages[-1]["message"]
    clock[0] += 60
    await m.check_once()  # degraded again: its five minutes start over
    assert len(pager.pages) == 2
