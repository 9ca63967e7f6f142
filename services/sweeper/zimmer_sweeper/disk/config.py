"""This host's disk, as the sweeps are configured to see it: its roots, the durable volume, and the
free-space monitor's thresholds."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class DiskSettings(BaseSettings):
    """Where this host's session directories live (seed 003: ClonesDirectory.base, the transcript
    root ~/.claude/projects, scratch, prompt attachments, preserved artifacts, trash). The sweeper
    runs beside the disk it sweeps, one per runtime host, so these are this host's paths. A root
    left unset is not swept (and says so on the Health page's Disk and clones panel).

    `durable_volume` is the deployment's data volume (the parent of the clones base in the seed):
    a root inside it is deleted from only in production and staging, because anywhere else the
    connected database does not describe that volume and every live directory on it would read as
    an orphan. A root relocated clear of it is sweepable in any environment (seed 003 "Only the
    deployment that owns the volume")."""

    model_config = SettingsConfigDict(env_prefix="ZIMMER_SWEEPER_", extra="ignore")

    clones_dir: str | None = None
    transcripts_dir: str | None = None
    scratch_dir: str | None = None
    attachments_dir: str | None = None
    artifacts_dir: str | None = None
    trash_dir: str | None = None
    durable_volume: str = "~/.zimmer"
    # The free-space monitor (kubelet-style): below `free_low_bytes` free on the clones volume it
    # reclaims until `free_high_bytes` are free, and pages when it cannot get there.
    free_low_bytes: int = Field(default=5 * 1024**3, ge=0)
    free_high_bytes: int = Field(default=10 * 1024**3, ge=0)
    free_check_seconds: float = Field(default=60.0, ge=1, le=3600)

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> DiskSettings:
        if self.free_low_bytes > self.free_high_bytes:
            raise ValueError("ZIMMER_SWEEPER_FREE_LOW_BYTES must not exceed ZIMMER_SWEEPER_FREE_HIGH_BYTES")
        return self
