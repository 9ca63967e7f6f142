"""Settings, parsed once from ZIMMER_* environment variables.

Secrets are `SecretStr` so they never appear in reprs or logs. Outside development and test
the process refuses to start without a real API key, naming the variable, because a
production fleet reachable with a placeholder key is worse than one that does not start.
"""

from __future__ import annotations

import re
import socket
from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from zimmer_common.contracts.subjects import HOST_PATTERN

PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "placeholder", "secret", "dev", "xxx", "todo"})


class Environment(StrEnum):
    PRODUCTION = "production"
    STAGING = "staging"
    DEVELOPMENT = "development"
    TEST = "test"


class ConfigurationError(RuntimeError):
    """Start-up refused because the configuration is unusable; the message names the variable."""


def _default_instance_id() -> str:
    """The host name: stable across restarts, so a restarted instance is the same worker, not a new
    one registered for an hour (a container's host name is its id; replicas sharing a host set
    ZIMMER_INSTANCE_ID, as `zimmer up` does)."""
    return socket.gethostname() or "instance"




def _default_host() -> str:
    """This machine's name as a subject token: lower case, letters, digits, '-' and '_' only."""
    token = re.sub(r"[^a-z0-9_-]+", "-", socket.gethostname().lower()).strip("-_")[:63]
    return token or "host"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ZIMMER_", extra="ignore")

    env: Environment = Environment.DEVELOPMENT
    # URLs may carry credentials: kept out of repr; `safe_summary()` is what gets logged.
    database_url: str = Field(default="postgresql://postgres@127.0.0.1:5432/zimmer", repr=False)
    nats_url: str = Field(default="nats://127.0.0.1:4222", repr=False)
    api_key: SecretStr = SecretStr("")
    operator_token: SecretStr = SecretStr("")
    data_dir: Path = Path(".zimmer")
    instance_id: str = Field(default_factory=_default_instance_id)
    # The host this process runs on, for work scoped to a host's disk (the sweeper runs one per
    # runtime host): its per-host jobs tick on subjects carrying it, so every host sweeps its own.
    host: str = Field(default_factory=_default_host, pattern=HOST_PATTERN)
    log_level: str = "INFO"
    # Prometheus endpoint of a non-gateway service; 0 picks a free port, -1 disables it.
    metrics_port: int = 9100
    metrics_host: str = "0.0.0.0"
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    # Host names clients use to reach the gateway's MCP endpoint (comma-separated), beyond
    # localhost and ZIMMER_HTTP_HOST: the MCP transport refuses other Host headers (421).
    mcp_allowed_hosts: str = ""
    # Bound on every request/reply over the bus; a request past it is `unavailable`.
    rpc_timeout_seconds: float = 5.0
    heartbeat_interval_seconds: float = 15.0
    shutdown_grace_seconds: float = 8.0
    outbox_poll_seconds: float = 0.5
    # JetStream replicas per stream: 1 embedded, 3 on the compose cluster.
    stream_replicas: int = 1
    # Bounds on work in flight: beyond them a request is refused `busy` (503, nothing done).
    max_inflight_rpcs: int = Field(default=1024, ge=1)
    max_inflight_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    max_batch_pending: int = Field(default=1000, ge=1)
    # The gateway's request body limit (bytes): larger bodies are refused 413 while streaming.
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> Settings:
        if self.env in (Environment.PRODUCTION, Environment.STAGING):
            for var, value in (("ZIMMER_API_KEY", self.api_key), ("ZIMMER_OPERATOR_TOKEN", self.operator_token)):
                if value.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS:
                    raise ConfigurationError(
                        f"{var} is missing or a placeholder; set a real secret before starting in {self.env.value}"
                    )
        return self

    @property
    def nats_servers(self) -> list[str]:
        return [u.strip() for u in self.nats_url.split(",") if u.strip()]

    def safe_summary(self) -> dict[str, object]:
        """What may be logged at start-up: everything but secrets and credentials in URLs."""
        return {
            "env": self.env.value,
            "database": _redact_url(self.database_url),
            "nats": [_redact_url(u) for u in self.nats_servers],
            "instance_id": self.instance_id,
            "api_key_set": bool(self.api_key.get_secret_value()),
            "operator_token_set": bool(self.operator_token.get_secret_value()),
        }


def _redact_url(url: str) -> str:
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"


def load_settings(**overrides: object) -> Settings:
    """Parse the environment; raises ConfigurationError (not a pydantic error) for bad secrets."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]  # pydantic-settings validates the overrides
    except ConfigurationError:
        raise
    except ValueError as exc:  # pydantic wraps validator errors; unwrap ours
        for err in getattr(exc, "errors", lambda: [])():
            ctx_err = err.get("ctx", {}).get("error")
            if isinstance(ctx_err, ConfigurationError):
                raise ctx_err from None
        raise ConfigurationError(str(exc)) from None
