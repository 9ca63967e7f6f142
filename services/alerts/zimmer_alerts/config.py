"""The alerts service's own configuration: its sinks, each optional (unset: not configured)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AlertSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ZIMMER_", extra="ignore")

    alert_slack_webhook_url: str = ""  # a Slack-compatible incoming webhook
    alertmanager_url: str = ""  # Prometheus Alertmanager, e.g. http://alertmanager:9093
    sentry_dsn: str = ""  # Sentry-compatible (GlitchTip accepts the same): https://<key>@host/<project>
    alert_sink_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    alert_sink_attempts: int = Field(default=3, ge=1, le=10)
    alert_check_seconds: float = Field(default=5.0, gt=0, le=3600)  # how often the notifier looks
    # Scheduled keys (service.job) an operator has switched off: cron freshness reads them
    # "disabled" and never judges them (seed 003). Comma-separated, e.g. "backlog.liveness_sweep".
    cron_disabled_keys: str = ""
    health_check_seconds: float = Field(default=60.0, gt=0, le=3600)  # how often the health monitor checks

    def disabled_keys(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.cron_disabled_keys.split(",") if k.strip())
