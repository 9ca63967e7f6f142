"""The Alerts panel's "N of the M issues shown are still paging" has its series (issue 32 #2):
zimmer_alert_newest_issues{state=shown|still_paging}, set by the alerts service where the ledger
changes (a page recorded, a condition resolved) and at every notifier pass, against a running
alerts service, NATS and Postgres. It agrees with the panel's own read of the ledger."""

from __future__ import annotations

from typing import Any

from alerting import alerts_service, eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts.alerts import LIST_ALERTS, PANEL_ISSUES, RESOLVE_CONDITION, AlertQuery, ResolveCondition
from zimmer_common.settings import Environment


def gauge(service: Any) -> tuple[float | None, float | None]:
    sample = service.metrics.registry.get_sample_value
    return (sample("zimmer_alert_newest_issues", {"state": "shown"}),
            sample("zimmer_alert_newest_issues", {"state": "still_paging"}))


async def panel(service: Any) -> tuple[float, float]:
    """What the Health page's Alerts panel counts: the newest issues and how many still page."""
    shown = (await service.bus.request(LIST_ALERTS, AlertQuery(limit=PANEL_ISSUES))).issues
    return float(len(shown)), float(sum(1 for i in shown if i.still_firing))


async def test_the_newest_issues_gauge_moves_with_the_panels_numbers(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await alerts_service(settings_factory, clock, Environment.PRODUCTION)
    try:
        await service.pager.report(title="Disk nearly full", fingerprint=["disk", "host-a"], message="3 GB left",
                                   condition_key="disk:host-a")  # pages while its condition is true

        async def shows(expected: tuple[float, float]) -> bool:
            return gauge(service) == expected

        await eventually(lambda: shows((1.0, 1.0)), "one issue shown, still paging")
        await service.pager.report(title="Slow answer", fingerprint=["slow"], message="GitHub took 9 s",
                                   level="warning")  # a warning pages once: shown, not paging
        await eventually(lambda: shows((2.0, 1.0)), "two shown, one still paging")
        assert gauge(service) == await panel(service)

        await service.bus.request(RESOLVE_CONDITION, ResolveCondition(condition_key="disk:host-a"))
        assert gauge(service) == (2.0, 0.0) == await panel(service)  # set as the resolve committed
        await service.app.run_once()  # and the notifier's pass agrees
        assert gauge(service) == (2.0, 0.0)
    finally:
        await service.stop()
