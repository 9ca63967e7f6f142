"""Where a notification goes: the structured log, a Slack-compatible webhook, Prometheus
Alertmanager's v2 API and a Sentry-compatible DSN. Each is optional, bounded (a timeout per
attempt, a few attempts with backoff) and never raises: every outcome comes back as a `Delivery`
for the ledger."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.domain.policy import Sink

log = logging.getLogger("zimmer.alerts.page")


@dataclass(frozen=True)
class Notice:
    """What one notification says, whichever sink carries it."""

    kind: str  # "issue", "page" or "resolved"
    title: str
    level: str
    source: str
    message: str
    fingerprint: str
    starts_at: datetime
    ends_at: datetime | None = None  # Alertmanager: when the alert stops being active
    snippet: str | None = None
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Delivery:
    sink: Sink
    outcome: str  # sent, failed, not_configured
    detail: str = ""
    attempts: int = 0


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
            emit = log.error if notice.level == "error" else log.warning
            emit(notice.title, extra={"fields": {"kind": notice.kind, "source": notice.source,
                                                 "message": notice.message, "fingerprint": notice.fingerprint,
                                                 "snippet": notice.snippet, "context": notice.context}})
            return Delivery(sink, "sent", attempts=1)
        url, body, headers = {"slack": self._slack, "alertmanager": self._alertmanager,
                              "issue_tracker": self._sentry}[sink](notice)
        return await self._post(sink, url, body, headers)

    async def _post(self, sink: Sink, url: str, body: Any, headers: dict[str, str]) -> Delivery:
        last = ""
        attempts = self.settings.alert_sink_attempts
        for attempt in range(1, attempts + 1):
            try:
                r = await self.http.post(url, json=body, headers=headers, timeout=self.settings.alert_sink_timeout_seconds)
                if r.status_code < 300:
                    return Delivery(sink, "sent", f"HTTP {r.status_code}", attempt)
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                if r.status_code < 500 and r.status_code != 429:
                    return Delivery(sink, "failed", last, attempt)  # a refusal: retrying will not change it
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"[:300]
            if attempt < attempts:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        return Delivery(sink, "failed", last, attempts)

    def _slack(self, n: Notice) -> tuple[str, Any, dict[str, str]]:
        state = {"issue": "new issue", "page": "still happening", "resolved": "resolved"}[n.kind]
        text = f"*[{n.level.upper()}] {n.title}* ({state}, {n.source})\n{n.message}"
        if n.snippet:
            text += f"\n```{n.snippet}```"
        return self.settings.alert_slack_webhook_url, {"text": text}, {}

    def _alertmanager(self, n: Notice) -> tuple[str, Any, dict[str, str]]:
        alert = {"labels": {"alertname": n.title, "severity": n.level, "source": n.source,
                            "fingerprint": n.fingerprint},
                 "annotations": {"summary": n.message, **({"snippet": n.snippet} if n.snippet else {})},
                 "startsAt": n.starts_at.isoformat()}
        if n.ends_at is not None:
            alert["endsAt"] = n.ends_at.isoformat()
        return self.settings.alertmanager_url.rstrip("/") + "/api/v2/alerts", [alert], {}

    def _sentry(self, n: Notice) -> tuple[str, Any, dict[str, str]]:
        dsn = urlsplit(self.settings.sentry_dsn)
        project = dsn.path.strip("/").rsplit("/", 1)[-1]
        url = f"{dsn.scheme}://{dsn.hostname}{f':{dsn.port}' if dsn.port else ''}/api/{project}/store/"
        auth = f"Sentry sentry_version=7, sentry_key={dsn.username}, sentry_client=zimmer-alerts/1"
        event = {"event_id": uuid.uuid4().hex, "message": f"{n.title}: {n.message}", "level": n.level,
                 "logger": n.source, "fingerprint": [n.fingerprint], "timestamp": n.starts_at.isoformat(),
                 "tags": {"source": n.source}, "extra": {**n.context, **({"snippet": n.snippet} if n.snippet else {})}}
        return url, event, {"X-Sentry-Auth": auth}
