"""The log ingest's configuration: how it fetches and how long JetStream waits for its ack
before redelivering."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class LogIngestSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ZIMMER_LOG_INGEST_", extra="ignore")

    # A line fetched but not acked within this is redelivered (to this replica or another): after
    # a crash, the wait before the lines it held are written. A slow write that outlasts it is
    # harmless (the ledger makes the second delivery write nothing), only wasteful.
    ack_wait_seconds: float = Field(default=30.0, ge=1, le=600)
    batch_min: int = Field(default=50, ge=1, le=10_000)
    batch_max: int = Field(default=2000, ge=1, le=10_000)

    @model_validator(mode="after")
    def _ordered(self) -> LogIngestSettings:
        if self.batch_min > self.batch_max:
            raise ValueError("ZIMMER_LOG_INGEST_BATCH_MIN must not exceed ZIMMER_LOG_INGEST_BATCH_MAX")
        return self
