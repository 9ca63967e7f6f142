"""The issue tracker receives every event of an issue (issue 26 #10; seed 003 "Alerts": GlitchTip
groups events into issues and notifies at most once per issue, ever). Each event goes as a Sentry
envelope built by sentry-sdk, once, in order; a tracker that is down costs one failed delivery per
lease and gets everything when it is back; an event it refuses is recorded and not sent again.
Real PostgreSQL and NATS, the tracker a small fake HTTP server."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from alerting import alerts_service, eventually, issues  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sqlalchemy import func, select

from zimmer_alerts.handlers.notifier import CLAIM_LEASE
from zimmer_alerts.store.tables import events
from zimmer_common.settings import Environment


async def _report(service: Any, n: int, *, title: str = "Clone cleanup failed") -> None:
    for i in range(n):
        await service.pager.report(title=title, fingerprint=["sweeper", "cleanup", title],
                                   message=f"cleanup {i} failed", context={"n": i})


async def _recorded(service: Any, n: int) -> None:
    async def check() -> bool:
        return sum(i.events for i in await issues(service)) == n
    await eventually(check, f"{n} events recorded")


def _dsn(sink: Any, project: int = 7) -> str:
    return sink.url.replace("http://", "http://k@") + f"/{project}"


async def test_a_tracker_that_is_down_gets_every_event_once_when_it_is_back(
        settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    tracker = await fake_sink()
    tracker.status = 503
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, sentry_dsn=_dsn(tracker))
    try:
        await _report(service, 5)
        await _recorded(service, 5)
        await service.app.run_once()
        await service.app.run_once()  # the batch is still claimed: nothing is tried again yet
        assert len(tracker.received) == 2  # the first event, two attempts; the rest wait behind it
        [issue] = await issues(service)
        failed = [n for n in issue.notifications if n.sink == "issue_tracker"]
        assert [(n.outcome, n.attempts) for n in failed] == [("failed", 2)] and "HTTP 503" in failed[0].detail
        assert issue.tracker_events == 0 and issue.notified_at is not None  # Slack/log heard of it once
        tracker.status = 200
        clock.advance(CLAIM_LEASE + timedelta(seconds=1))
        await service.app.run_once()
        ids = [e["event_id"] for e in tracker.received[2:]]
        assert len(ids) == 5 == len(set(ids)) and ids[0] == tracker.received[0]["event_id"]  # the same event
        assert [e["extra"]["n"] for e in tracker.received[2:]] == [0, 1, 2, 3, 4]  # in order
        await service.app.run_once()
        assert len(tracker.received) == 7  # nothing twice
        [issue] = await issues(service)
        assert issue.tracker_events == issue.events == 5
    finally:
        await service.stop()


async def test_an_event_the_tracker_refuses_is_recorded_and_not_sent_again(
        settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    tracker = await fake_sink()
    tracker.status = 400
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, sentry_dsn=_dsn(tracker))
    try:
        await _report(service, 2)
        await _recorded(service, 2)
        await service.app.run_once()
        assert len(tracker.received) == 2  # one attempt each: a refusal is not retried
        clock.advance(CLAIM_LEASE * 3)
        await service.app.run_once()
        assert len(tracker.received) == 2
        [issue] = await issues(service)
        assert [n.outcome for n in issue.notifications if n.sink == "issue_tracker"] == ["failed", "failed"]
        assert issue.tracker_events == 0
    finally:
        await service.stop()


async def test_no_tracker_says_so_once_per_issue_and_keeps_nothing_waiting(
        settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, sentry_dsn="")
    try:
        await _report(service, 3)
        await _recorded(service, 3)
        await service.app.run_once()
        [issue] = await issues(service)
        assert [(n.sink, n.outcome) for n in issue.notifications if n.sink == "issue_tracker"] == [
            ("issue_tracker", "not_configured")]
        async with service.engine.connect() as conn:
            waiting = (await conn.execute(select(func.count()).select_from(events)
                                          .where(events.c.tracked_at.is_(None)))).scalar_one()
        assert waiting == 0  # configuring a tracker later does not flood it with the past
    finally:
        await service.stop()


async def test_a_dsn_that_is_not_one_fails_each_event_once(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, sentry_dsn="not a dsn")
    try:
        await _report(service, 1)
        await _recorded(service, 1)
        await service.app.run_once()
        clock.advance(CLAIM_LEASE * 2)
        await service.app.run_once()
        [issue] = await issues(service)
        [failed] = [n for n in issue.notifications if n.sink == "issue_tracker"]
        assert failed.outcome == "failed" and "DSN" in failed.detail
    finally:
        await service.stop()
