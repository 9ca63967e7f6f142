"""The alerts service's own configuration: its sinks, each optional (unset: not configured)."""

from __future__ import annotations

import json
from datetime import timedelta

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from zimmer_common.lanes import LANES
from zimmer_common.settings import ConfigurationError


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
    # Lane execution ceilings that differ from the seed's, as JSON seconds per lane, e.g. {"default": 45}:
    # how long a tick may wait, or a run hold a thread, before the lane pages. For drills (the stall
    # scenario's short form); a production deployment keeps the seed's.
    alert_lane_ceilings: str = ""

    def lane_ceilings(self) -> dict[str, timedelta]:
        if not self.alert_lane_ceilings.strip():
            return {}
        try:
            given = json.loads(self.alert_lane_ceilings)
            if not isinstance(given, dict):
                raise ValueError("not an object")
            ceilings = {}
            for lane, seconds in given.items():
                if lane not in LANES:
                    raise ValueError(f"unknown lane {lane!r} (lanes: {', '.join(LANES)})")
                if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 86_400:
                    raise ValueError(f"{lane}: seconds must be a number above 0 and at most a day, not {seconds!r}")
                ceilings[lane] = timedelta(seconds=seconds)
            return ceilings
        except ValueError as exc:
            raise ConfigurationError(f"ZIMMER_ALERT_LANE_CEILINGS is not valid ({exc}); expected JSON seconds per "
                                     'lane, e.g. {"default": 45}') from None

    def disabled_keys(self) -> frozenset[str]:
        return frozenset(k.strip() for k in self.cron_disabled_keys.split(",") if k.strip())
