"""The backlog service's own configuration: how it reaches GitHub, and which repositories it gates."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from zimmer_backlog.handlers.github import DEFAULT_API_URL, GithubClient


class GithubSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ZIMMER_", extra="ignore")

    github_api_url: str = DEFAULT_API_URL
    github_token: str = Field(default="", repr=False)
    # owner/name, comma separated: the repositories the Issues view lists; empty: those the
    # backlog's issue URLs name.
    gated_repos: str = ""
    github_timeout_seconds: float = Field(default=10.0, gt=0, le=120)  # per phase (connect, read, ...)
    github_call_seconds: float = Field(default=30.0, gt=0, le=600)  # the whole exchange

    def repos(self) -> list[str]:
        return [r.strip() for r in self.gated_repos.split(",") if r.strip()]

    def client(self, on_request: object = None) -> GithubClient:
        return GithubClient(self.github_api_url, self.github_token, timeout=self.github_timeout_seconds,
                            total_timeout=self.github_call_seconds, on_request=on_request)
