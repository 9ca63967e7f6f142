"""A sink is bounded and retried: a POST that did not arrive, a 5xx or a 429 is sent again, up to
`alert_sink_attempts` in all, and the last outcome is the delivery; a 2xx is sent and any other
answer is refused at once. Against httpx's own transport for a server that answers as told."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.handlers.sinks import Delivery, Notice, Sinks

NOTICE = Notice(kind="page", title="Queue backlog critical", level="error", source="alerts", message="deep",
                fingerprint="alerts:backlog", starts_at=datetime(2026, 12, 4, 12, 0, tzinfo=UTC))
WEBHOOK = "http://slack.invalid/hook"


def _sinks(answers: list[int | None], attempts: int = 3) -> tuple[Sinks, list[httpx.Request]]:
    """Sinks whose webhook answers each POST with the next status; None: the POST does not arrive."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status = answers.pop(0)
        if status is None:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(status, text="ok" if status < 300 else "no")

    settings = AlertSettings(alert_slack_webhook_url=WEBHOOK, alert_sink_attempts=attempts)
    return Sinks(settings, httpx.AsyncClient(transport=httpx.MockTransport(answer)), backoff=0.001), seen


async def _send(make: Callable[[], tuple[Sinks, list[httpx.Request]]]) -> tuple[Delivery, int]:
    sinks, seen = make()
    try:
        return await sinks.send("slack", NOTICE), len(seen)
    finally:
        await sinks.http.aclose()


async def test_a_post_that_fails_then_arrives_is_sent_on_a_later_attempt() -> None:
    delivery, posts = await _send(lambda: _sinks([503, None, 200]))
    assert (delivery.outcome, delivery.detail, delivery.attempts, posts) == ("sent", "HTTP 200", 3, 3)


async def test_a_sink_that_keeps_failing_is_given_up_after_its_attempts_with_the_last_error() -> None:
    delivery, posts = await _send(lambda: _sinks([500, 500, 429]))
    assert (delivery.outcome, delivery.attempts, delivery.refused, posts) == ("failed", 3, False, 3)
    assert delivery.detail == "HTTP 429: no"
    delivery, posts = await _send(lambda: _sinks([500, None], attempts=2))
    assert (delivery.outcome, delivery.attempts, posts) == ("failed", 2, 2)
    assert delivery.detail.startswith("ConnectError: connection refused")


@pytest.mark.parametrize("status", [400, 404, 413])
async def test_a_refusal_is_not_sent_again(status: int) -> None:
    delivery, posts = await _send(lambda: _sinks([status, 200]))
    assert (delivery.outcome, delivery.attempts, delivery.refused, posts) == ("failed", 1, True, 1)
    assert delivery.detail == f"HTTP {status}: no"
