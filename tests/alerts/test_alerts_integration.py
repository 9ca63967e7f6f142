"""The one paging path end to end, on real PostgreSQL and NATS with a frozen clock (issue 11):
pages travel through the sender's outbox to the alerts ledger; a burst of distinct ids is one
issue; a lasting condition pages at 30 s and again at 4 h and stops when resolved; staging pages
nobody; every sink failure is in the ledger; a crashed job pages."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from alerting import alerts_service, eventually, issues  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.service import build
from zimmer_common.contracts.alerts import LIST_ALERTS, RESOLVE_CONDITION, AlertQuery, ResolveCondition
from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.settings import Environment


async def test_a_burst_of_distinct_ids_is_one_issue_and_an_explicit_report_beside_it_too(
        settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    dsn = await fake_sink()
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION,
                                   sentry_dsn=dsn.url.replace("http://", "http://publickey@") + "/42")
    try:
        for n in range(100):
            await service.pager.report(title="Clone reaper refused", fingerprint=["sweeper", "clone_reaper"],
                                       message="refused to delete a clone", context={"clone_id": n, "path": f"/c/{n}"})
        await eventually(lambda: _events(service, 100), "100 events on one issue")
        await service.pager.report(title="Clone reaper refused", fingerprint=["sweeper", "clone_reaper"],
                                   message="reported again, explicitly", snippet_source="token=abc123 failed")
        await eventually(lambda: _events(service, 101), "the explicit report on the same issue")
        assert len(await issues(service)) == 1
        await service.app.run_once()
        await service.app.run_once()  # an issue notifies once, ever; the tracker hears every event
        assert len(dsn.received) == 101 and set(dsn.paths) == {"/api/42/envelope/"}
        assert len({e["event_id"] for e in dsn.received}) == 101
        assert {tuple(e["fingerprint"]) for e in dsn.received} == {tuple(dsn.received[0]["fingerprint"])}
        assert "sentry_key=publickey" in dsn.headers[0]["X-Sentry-Auth"]
        assert "abc123" not in str(dsn.received[-1]) and "[REDACTED]" in str(dsn.received[-1])
        [issue] = await issues(service)
        assert issue.events == issue.tracker_events == 101  # counted locally too
        assert {(n.sink, n.outcome) for n in issue.notifications} == {("log", "sent"), ("slack", "not_configured")}
        await service.pager.report(title="Clone reaper refused", fingerprint=["sweeper", "clone_reaper"],
                                   message="and once more")
        await eventually(lambda: _events(service, 102), "the 102nd event")
        await service.app.run_once()
        assert len(dsn.received) == 102  # the tracker counts it; no second issue notice anywhere
        assert [n.outcome for n in (await issues(service))[0].notifications if n.sink == "log"] == ["sent"]
    finally:
        await service.stop()


async def _events(service: Any, n: int) -> bool:
    found = await issues(service)
    return len(found) == 1 and found[0].events == n


async def test_a_lasting_condition_pages_at_30_s_and_4_h_and_stops_when_resolved(
        settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    slack = await fake_sink()
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, alert_slack_webhook_url=slack.url)
    try:
        async def still_true() -> None:
            await service.pager.report(title="Cron schedule stale", fingerprint=["alerts", "cron_stale"],
                                       message="recover_starting is 3 ticks behind", condition_key="cron:recover")

        await still_true()
        await eventually(lambda: _condition(service, True), "the condition")
        pages = [m for m in slack.received if "still happening" in m["text"]]
        clock.advance(29)
        await service.app.run_once()
        assert len([m for m in slack.received if "still happening" in m["text"]]) == len(pages) == 0
        clock.advance(1)  # 30 s: the group wait is over
        await service.app.run_once()
        assert _pages(slack) == 1
        clock.advance(timedelta(hours=4) - timedelta(seconds=1))
        await still_true()  # checked again: still true
        # Recorded before going on: arriving after the resolve below, it would open the condition
        # again (a page travels through the outbox and JetStream, slower on a loaded machine).
        await eventually(lambda: _events(service, 2), "the second report recorded")
        await service.app.run_once()
        assert _pages(slack) == 1
        clock.advance(1)  # 4 h after the first page
        await service.app.run_once()
        assert _pages(slack) == 2
        await service.bus.request(RESOLVE_CONDITION, ResolveCondition(condition_key="cron:recover"))
        clock.advance(timedelta(hours=5))
        await service.app.run_once()
        await service.app.run_once()
        assert _pages(slack) == 2  # resolved: never again
    finally:
        await service.stop()


def _pages(slack: Any) -> int:
    return len([m for m in slack.received if "still happening" in m["text"]])


async def _condition(service: Any, still_true: bool) -> bool:
    conditions = (await service.bus.request(LIST_ALERTS, AlertQuery())).conditions
    return any(c.still_true == still_true for c in conditions)


async def test_staging_records_issues_and_pages_nobody(settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    slack, dsn = await fake_sink(), await fake_sink()
    service = await alerts_service(settings_factory, clock, Environment.STAGING, alert_slack_webhook_url=slack.url,
                                   sentry_dsn=dsn.url.replace("http://", "http://k@") + "/1")
    try:
        await service.pager.report(title="Nothing is executing", fingerprint=["alerts", "stall"], message="stalled",
                                   condition_key="stall")
        await eventually(lambda: _condition(service, True), "the condition")
        clock.advance(60)
        await service.app.run_once()
        assert slack.received == [] and len(dsn.received) == 1  # the issue is recorded; nobody is paged
        result = await service.bus.request(LIST_ALERTS, AlertQuery())
        outcomes = {(n.sink, n.outcome) for n in result.page_notifications}
        assert ("slack", "not_allowed") in outcomes and ("alertmanager", "not_allowed") in outcomes
    finally:
        await service.stop()


async def test_every_sink_failure_is_in_the_ledger(settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    slack = await fake_sink()
    slack.status = 500
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, alert_slack_webhook_url=slack.url,
                                   alertmanager_url="http://127.0.0.1:9")  # nothing listens there
    try:
        await service.pager.report(title="Queue backlog critical", fingerprint=["alerts", "backlog"], message="deep",
                                   condition_key="lane:default")
        await eventually(lambda: _condition(service, True), "the condition")
        clock.advance(30)
        await service.app.run_once()
        result = await service.bus.request(LIST_ALERTS, AlertQuery())
        failed = {n.sink: n for n in result.page_notifications if n.outcome == "failed"}
        assert set(failed) == {"slack", "alertmanager"}
        assert failed["slack"].attempts == 2 and "HTTP 500" in failed["slack"].detail
        assert failed["alertmanager"].attempts == 2 and "Connect" in failed["alertmanager"].detail
        assert _pages(slack) == 2  # the page: tried twice, then recorded (its issue was sent too)
    finally:
        await service.stop()


async def test_a_crashed_job_pages(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    async def explode(ctx: JobContext) -> None:
        raise PermissionError("cannot remove /clones/x: Authorization: Bearer s3cr3t-token")

    config = AlertSettings(alert_check_seconds=3600, health_check_seconds=3600)
    service = build(settings_factory(env=Environment.TEST), clock=clock, alert_settings=config)
    service.job_specs.append(JobSpec("explode", "maintenance", explode))
    await service.start()
    try:
        await service.runner.enqueue("explode")

        async def paged() -> bool:
            return any(i.title == "Job failed: explode" for i in await issues(service))

        await eventually(paged, "the crashed job's page")
        [issue] = [i for i in await issues(service) if i.title == "Job failed: explode"]
        assert issue.level == "error" and issue.source == "alerts"
        assert issue.last_snippet and "PermissionError" in issue.last_snippet and "s3cr3t" not in issue.last_snippet
        await service.app.run_once()
        [issue] = [i for i in await issues(service) if i.title == "Job failed: explode"]
        assert ("log", "sent") in {(n.sink, n.outcome) for n in issue.notifications}  # test env: the log only
        assert {n.outcome for n in issue.notifications if n.sink != "log"} == {"not_allowed"}
    finally:
        await service.stop()


async def test_every_error_page_repeats_while_its_events_arrive_and_resolves_when_they_stop(
        settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 003 "Alerts": "The ERROR record is the repeating page. A GitHub/GlitchTip issue speaks
    once; the log rule speaks again every repeat interval." Issue 26 #3: `log_partitions` crashed
    three times and was notified once, ever, with nothing to Alertmanager; only condition pages
    repeated. Every error page joins its title's group: it pages after the group wait, again every
    repeat interval while its events keep arriving, and resolves once none arrived for one."""
    slack, alertmanager = await fake_sink(), await fake_sink()
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, alert_slack_webhook_url=slack.url,
                                   alertmanager_url=alertmanager.url)
    try:
        async def crash(n: int) -> None:
            await service.pager.report(title="Job failed: log_partitions", message="log_partitions raised LockTimeout",
                                       fingerprint=["sweeper", "log_partitions", "LockNotAvailable"])
            await eventually(lambda: _events(service, n), f"crash {n} recorded")

        def to_alertmanager(since: int = 0) -> list[dict[str, Any]]:
            return [alert for batch in alertmanager.received[since:] for alert in batch
                    if alert["labels"]["alertname"] == "Job failed: log_partitions"]

        await crash(1)
        clock.advance(30)
        await service.app.run_once()
        assert _pages(slack) == 1 and len(to_alertmanager()) == 1  # the issue spoke once; the page too
        for n, hours in ((2, 1), (3, 2)):  # it keeps crashing, hourly
            clock.advance(timedelta(hours=hours) if n == 2 else timedelta(hours=1))
            await crash(n)
            await service.app.run_once()
        assert _pages(slack) == 1  # inside the repeat interval
        clock.advance(timedelta(hours=2))  # 4 h after the first page, its events still arriving
        await service.app.run_once()
        assert _pages(slack) == 2 and len(to_alertmanager()) == 2
        before = len(alertmanager.received)
        clock.advance(timedelta(hours=4))  # no crash for a repeat interval: resolved, once
        await service.app.run_once()
        await service.app.run_once()
        assert _pages(slack) == 2
        assert [m for m in slack.received if "resolved" in m["text"]] == []  # Slack hears pages only
        [resolved] = to_alertmanager(before)
        assert datetime.fromisoformat(resolved["endsAt"]) == clock.now()  # ends now: resolved
        [issue] = await issues(service)
        assert issue.events == 3 and [n.sink for n in issue.notifications].count("slack") == 1
    finally:
        await service.stop()


async def test_a_page_the_contract_refuses_is_cut_down_and_still_sent(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 26 #7: past the contract's 2,000 characters the `Page` failed validation and the page
    was lost (logged WARNING "page not sent"). It is cut to what the contract takes, and sent."""
    service = await alerts_service(settings_factory, clock, Environment.TEST)
    try:
        page = await service.pager.report(
            title="Restore failed for session 1234567", fingerprint=[f"part-{n}" for n in range(15)],
            message="git said: " + "x" * 5000 + "\x00 the end", context={"bad": "nul\x00here"})
        assert page is not None and len(page.message) <= 2000 and page.message.endswith("(cut)")
        assert page.title == "Restore failed for session <id>" and len(page.fingerprint) == 10
        assert page.context == {"context_dropped": page.context["context_dropped"]}
        await eventually(lambda: _titled(service, "Restore failed for session <id>"), "the cut-down page recorded")
    finally:
        await service.stop()


async def _titled(service: Any, title: str) -> bool:
    return any(i.title == title for i in await issues(service))


async def test_a_hung_sink_holds_no_lock_and_no_notifier_sends_twice(settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 26 #9: the notifier held one transaction across every sink call (N new issues × 16 s
    per sink when Slack hangs, every issue's row locked meanwhile; a failed commit re-sent
    everything). It claims what it sends in a short transaction, sends outside it, and records each
    outcome in its own."""
    import asyncio

    from sqlalchemy import text

    slack = await fake_sink()
    slack.hold = asyncio.Event()
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, alert_slack_webhook_url=slack.url)
    try:
        for kind in ("first", "second"):
            await service.pager.report(title=f"Sweep failed {kind}", fingerprint=["sweeper", kind], message="x",
                                       level="warning")
        await eventually(lambda: _count(service, 2), "two issues")
        sending = asyncio.create_task(service.app.run_once())
        await eventually(lambda: _received(slack), "the notifier inside Slack's call")
        async with service.engine.begin() as conn:  # the ledger's rows are free while a sink hangs
            await conn.execute(text("SET LOCAL lock_timeout = '1s'"))
            await conn.execute(text("UPDATE alerts.issues SET events = events"))
        assert await service.app.run_once() == 0  # a second notifier: what is claimed is not sent twice
        slack.hold.set()
        assert await sending > 0
        assert [m["text"] for m in slack.received].count(slack.received[0]["text"]) == 1
        assert all(i.notified_at is not None for i in await issues(service))
        assert await service.app.run_once() == 0  # notified: nothing more
    finally:
        slack.hold.set()
        await service.stop()


async def _count(service: Any, n: int) -> bool:
    return len(await issues(service)) == n


async def _received(sink: Any) -> bool:
    return bool(sink.received)
