"""The trash pipeline's configuration: its git binary and the bound on each git command."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from zimmer_sweeper.trash.domain import GIT_TIMEOUT_SECONDS


class TrashSettings(BaseSettings):
    """The trash pipeline's git: which binary, and the bound on each command (seed 003
    GIT_TIMEOUT_SECONDS, 120 s). The bound is a setting so an operator can lengthen it for a
    volume known to be slow, and so a test can wedge git without waiting two minutes."""

    model_config = SettingsConfigDict(env_prefix="ZIMMER_TRASH_", extra="ignore")

    git_binary: str = "git"
    git_timeout_seconds: float = Field(default=GIT_TIMEOUT_SECONDS, gt=0, le=3600)
