"""The alerts ledger's list pages by bytes as well as by count (issue 27 #13), on real PostgreSQL
and NATS: an issue carries its newest notifications and a count of the rest (a tracker refusing
every event adds a row per event, so one issue would otherwise outgrow a page); and the list read
under a byte budget answers with the issues that fit and `next_before`, which, followed while new
pages keep arriving, carries every issue exactly once."""

from __future__ import annotations

from typing import Any

from alerting import alerts_service, eventually, issues  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from sqlalchemy import func, select

from zimmer_alerts.store import ledger_pages
from zimmer_alerts.store.tables import notifications
from zimmer_common.byte_pages import row_bytes
from zimmer_common.contracts.alerts import LIST_ALERTS, NOTIFICATIONS_SHOWN, AlertQuery
from zimmer_common.settings import Environment

EVENTS = 30


async def test_an_issue_carries_its_newest_notifications_and_counts_the_rest(
        settings_factory, clock, fake_sink) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    tracker = await fake_sink()
    tracker.status = 400  # refuses every event: one failed row per event
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION,
                                   sentry_dsn=tracker.url.replace("http://", "http://k@") + "/1")
    try:
        for n in range(EVENTS):
            await service.pager.report(title="Sweep refused", fingerprint=["sweeper", "refused"], message=f"try {n}")

        async def all_recorded() -> bool:
            found = await issues(service)
            return len(found) == 1 and found[0].events == EVENTS

        await eventually(all_recorded, "every event on one issue")
        await service.app.run_once()
        [issue] = await issues(service)
        mine = notifications.c.issue_id == issue.id
        async with service.engine.connect() as conn:
            told = (await conn.execute(select(func.count()).select_from(notifications).where(mine))).scalar_one()
            newest = (await conn.execute(select(notifications.c.sink, notifications.c.detail).where(mine)
                                         .order_by(notifications.c.id.desc()).limit(NOTIFICATIONS_SHOWN))).all()
        assert told > EVENTS and len(tracker.received) == EVENTS  # every refusal is in the ledger
        assert len(issue.notifications) == NOTIFICATIONS_SHOWN and issue.notifications_not_shown == told - 20
        assert [(n.sink, n.detail) for n in issue.notifications] == [tuple(r) for r in reversed(newest)]
        assert ("issue_tracker", "failed") in {(n.sink, n.outcome) for n in issue.notifications}
    finally:
        await service.stop()


async def test_a_page_holds_the_issues_that_fit_and_the_cursor_reads_each_once(
        settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await alerts_service(settings_factory, clock, Environment.TEST)
    try:
        for n in range(12):  # the frozen clock: every issue seen at one instant, so ids break the ties
            await _page(service, n)
        await eventually(lambda: _count(service, 12), "twelve issues")
        one = row_bytes((await issues(service))[0])
        budget = 4 * one + 100  # the side lists are empty here: four issues fit

        async def page(before: str | None) -> Any:
            async with service.engine.connect() as conn:
                return await ledger_pages.read(conn, AlertQuery(limit=500, before=before), budget)

        first = await page(None)
        assert [i.title for i in first.issues] == [f"Bytes {n}" for n in (11, 10, 9, 8)] and first.next_before
        clock.advance(5)
        await _page(service, 11)  # an issue already read is seen again: it moves ahead, not onto a later page
        await _page(service, 12)  # a new issue: newer than the cursor, so on the next pass
        await eventually(lambda: _count(service, 13), "the thirteenth issue")
        seen, at = [i.title for i in first.issues], first.next_before
        while at is not None:
            later = await page(at)
            assert 1 <= len(later.issues) <= 4
            seen += [i.title for i in later.issues]
            at = later.next_before
        assert seen == [f"Bytes {n}" for n in range(11, -1, -1)]  # each exactly once, in order
        # A count under what fits is the count (both seen at one instant: the higher id first).
        small = await service.bus.request(LIST_ALERTS, AlertQuery(limit=2))
        assert [i.title for i in small.issues] == ["Bytes 12", "Bytes 11"] and small.next_before is not None
        last = await service.bus.request(LIST_ALERTS, AlertQuery(limit=500, before=small.next_before))
        assert len(last.issues) == 11 and last.next_before is None  # the whole rest fits one real answer
    finally:
        await service.stop()


async def _page(service: Any, n: int) -> None:
    await service.pager.report(title=f"Bytes {n}", fingerprint=["bytes", str(n)], message=f"{n} " + "m" * 1990,
                               level="warning")


async def _count(service: Any, n: int) -> bool:
    return len((await service.bus.request(LIST_ALERTS, AlertQuery(limit=500))).issues) == n
