"""Where a notification goes: the structured log, a Slack-compatible webhook, Prometheus
Alertmanager's v2 API and a Sentry-compatible DSN. Each is optional, bounded (a timeout per
attempt, a few attempts with backoff) and never raises: every outcome comes back as a `Delivery`
for the ledger.

The issue tracker gets every event as a Sentry envelope (the ingestion API Sentry and GlitchTip
maintain; the legacy `store` endpoint is deprecated), built and authenticated by `sentry-sdk`'s own
`Dsn` and `Envelope`. The SDK's transports are not used to post it: they hand the envelope to a
background worker that drops it on failure and reports nothing back, while the ledger records
every delivery's outcome, and this sink is bounded and retried like the others."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sentry_sdk.consts import EndpointType
from sentry_sdk.envelope import Envelope
from sentry_sdk.utils import BadDsn, Dsn
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, retry_if_result, stop_after_attempt, wait_exponential

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.domain.policy import Sink

log = logging.getLogger("zimmer.alerts.page")
TRACKER_CLIENT = "zimmer-alerts/1"
# An event's id at the tracker is derived from ours, so a delivery retried after a lost answer is
# one event there (Sentry drops a repeated event_id), not two.
TRACKER_IDS = uuid.UUID("6f1d3a52-4c0e-4b8e-9a57-2d3b1f0c9e11")


@dataclass(frozen=True)
class Notice:
    """What one notification says, whichever sink carries it."""

    kind: str  # "issue", "page", "resolved" or "event" (one occurrence, for the issue tracker)
    title: str
    level: str
    source: str
    message: str
    fingerprint: str
    starts_at: datetime
    ends_at: datetime | None = None  # Alertmanager: when the alert stops being active
    snippet: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    event_id: str = ""  # "event": the ledger's id of the occurrence
    log_level: str | None = None  # the level the log sink writes it at, when lower than `level`


@dataclass(frozen=True)
class Delivery:
    sink: Sink
    outcome: str  # sent, failed, not_configured
    detail: str = ""
    attempts: int = 0
    refused: bool = False  # the sink refused it (a 4xx, a bad DSN): sending it again will not help


class Sinks:
    def __init__(self, settings: AlertSettings, http: httpx.AsyncClient, backoff: float = 0.5):
        self.settings = settings
        self.http = http
        self.backoff = backoff

    def configured(self, sink: Sink) -> bool:
        return sink == "log" or bool({"slack": self.settings.alert_slack_webhook_url,
                                      "alertmanager": self.settings.alertmanager_url,
                                      "issue_tracker": self.settings.sentry_dsn}[sink])

    async def send(self, sink: Sink, notice: Notice) -> Delivery:
        if not self.configured(sink):
            return Delivery(sink, "not_configured", f"no {sink} is configured")
        if sink == "log":
            # ERROR without a page: this is the log sink, the page's own record.
            emit = log.error if (notice.log_level or notice.level) == "error" else log.warning
            emit(notice.title, extra={"fields": {"kind": notice.kind, "source": notice.source,
                                                 "message": notice.message, "fingerprint": notice.fingerprint,
                                                 "snippet": notice.snippet, "context": notice.context}})
            return Delivery(sink, "sent", attempts=1)
        try:
            url, body, headers = {"slack": self._slack, "alertmanager": self._alertmanager,
                                  "issue_tracker": self._sentry}[sink](notice)
        except BadDsn as exc:
            return Delivery(sink, "failed", f"the Sentry DSN is not one: {exc}"[:300], refused=True)
        return await self._post(sink, url, body, headers)

    async def _post(self, sink: Sink, url: str, body: bytes, headers: dict[str, str]) -> Delivery:
        """Up to `alert_sink_attempts` POSTs, `backoff` seconds apart and doubling: one that did not
        arrive, a 5xx or a 429 is sent again; a 2xx is sent, any other answer refused."""
        attempts = self.settings.alert_sink_attempts
        tried = 0

        async def attempt() -> Delivery:
            nonlocal tried
            tried += 1
            r = await self.http.post(url, content=body, headers=headers,
                                     timeout=self.settings.alert_sink_timeout_seconds)
            if r.status_code < 300:
                return Delivery(sink, "sent", f"HTTP {r.status_code}", tried)
            return Delivery(sink, "failed", f"HTTP {r.status_code}: {r.text[:200]}", tried,
                            refused=r.status_code < 500 and r.status_code != 429)

        def gave_up(state: RetryCallState) -> Delivery:
            assert state.outcome is not None
            exc = state.outcome.exception()
            if exc is None:
                return state.outcome.result()  # the last answer, a 5xx or a 429
            return Delivery(sink, "failed", f"{type(exc).__name__}: {exc}"[:300], attempts)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts), wait=wait_exponential(multiplier=self.backoff),
            retry=(retry_if_exception_type(httpx.HTTPError)
                   | retry_if_result(lambda d: d.outcome == "failed" and not d.refused)),
            retry_error_callback=gave_up)
        return await retrying(attempt)

    def _slack(self, n: Notice) -> tuple[str, bytes, dict[str, str]]:
        state = {"issue": "new issue", "page": "still happening", "resolved": "resolved"}[n.kind]
        text = f"*[{n.level.upper()}] {n.title}* ({state}, {n.source})\n{n.message}"
        if n.snippet:
            text += f"\n```{n.snippet}```"
        return self.settings.alert_slack_webhook_url, _json({"text": text}), JSON

    def _alertmanager(self, n: Notice) -> tuple[str, bytes, dict[str, str]]:
        alert = {"labels": {"alertname": n.title, "severity": n.level, "source": n.source,
                            "fingerprint": n.fingerprint},
                 "annotations": {"summary": n.message, **({"snippet": n.snippet} if n.snippet else {})},
                 "startsAt": n.starts_at.isoformat()}
        if n.ends_at is not None:
            alert["endsAt"] = n.ends_at.isoformat()
        return self.settings.alertmanager_url.rstrip("/") + "/api/v2/alerts", _json([alert]), JSON

    def _sentry(self, n: Notice) -> tuple[str, bytes, dict[str, str]]:
        auth = Dsn(self.settings.sentry_dsn).to_auth(TRACKER_CLIENT)
        event_id = uuid.uuid5(TRACKER_IDS, n.event_id or n.fingerprint).hex
        event = {"event_id": event_id, "message": {"formatted": f"{n.title}: {n.message}"},
                 "level": "warning" if n.level == "warning" else "error", "logger": n.source,
                 "platform": "python", "fingerprint": [n.fingerprint], "timestamp": n.starts_at.isoformat(),
                 "tags": {"source": n.source},
                 "extra": {**n.context, **({"snippet": n.snippet} if n.snippet else {})}}
        envelope = Envelope(headers={"event_id": event_id, "sent_at": datetime.now(UTC).isoformat()})
        envelope.add_event(event)
        return (auth.get_api_url(EndpointType.ENVELOPE), envelope.serialize(),
                {"X-Sentry-Auth": auth.to_header(), "Content-Type": "application/x-sentry-envelope"})


JSON = {"Content-Type": "application/json"}


def _json(body: Any) -> bytes:
    return json.dumps(body, default=str).encode()
