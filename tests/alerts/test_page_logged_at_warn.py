"""Seed 000 "The page is not also an ERROR log record" (issue 27 #4): the stranded alert pages at
error and logs at WARN. Through the real alerts service (its ledger, notifier and sinks, fake
Slack and Alertmanager over HTTP): one report reaches Slack once, as its own issue; the alerts
service's log sink writes it at WARN with its fingerprint; and it joins no ERROR page group, so
no "still happening" page follows it."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from alerting import alerts_service, eventually, issues  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.settings import Environment

TITLE = "Work backlog: stranded rows unresolved for 1 week, 10+ rows"


async def test_a_page_logged_at_warn_pages_once_and_is_no_error_record(
        settings_factory, clock, fake_sink, caplog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    slack, alertmanager = await fake_sink(), await fake_sink()
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION, alert_slack_webhook_url=slack.url,
                                   alertmanager_url=alertmanager.url)
    try:
        with caplog.at_level(logging.INFO):
            await service.pager.report(title=TITLE, level="error", log_level="warning",
                                       source="backlog/liveness_sweep", message="11 rows; the oldest has waited 9 days",
                                       fingerprint=["backlog", "stranded", "1w", "10+", clock.now().isoformat()])

            async def recorded() -> bool:
                return len(await issues(service)) == 1
            await eventually(recorded, "the stranded page recorded")
            for _ in range(3):  # past the group wait and interval: an ERROR group would page by now
                clock.advance(timedelta(minutes=5))
                await service.app.run_once()
        texts: list[str] = [m["text"] for m in slack.received]
        assert len(texts) == 1 and "new issue" in texts[0] and TITLE in texts[0]
        assert not any(alert["labels"]["alertname"] == TITLE for batch in alertmanager.received for alert in batch)
        sunk: list[Any] = [r for r in caplog.records if r.name == "zimmer.alerts.page" and r.getMessage() == TITLE]
        assert [r.levelname for r in sunk] == ["WARNING"]
        assert sunk[0].fields["fingerprint"]  # type: ignore[attr-defined]  # log records carry the `fields` extra
        assert not [r for r in caplog.records if r.levelname == "ERROR" and r.getMessage() == TITLE]
        [issue] = await issues(service)
        assert [(n.sink, n.outcome) for n in issue.notifications if n.sink == "slack"] == [("slack", "sent")]
    finally:
        await service.stop()
