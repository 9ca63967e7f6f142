"""How a runtime reaches the control plane: NATS servers, the credential, and the client's bounds.

Pure data: nothing here opens a connection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_PREFIX = "ZIMMER_RUNTIME_"


@dataclass(frozen=True, repr=False)
class FleetCredential:
    """The fleet's credential on the bus. NATS accepts one of: a token, a user and password, or a
    credentials file (JWT + NKey seed, decentralized auth). None of them: an open server (the
    embedded development and test stacks). Kept out of repr so it never reaches a log."""

    token: str | None = None
    user: str | None = None
    password: str | None = None
    creds_file: str | None = None

    def __post_init__(self) -> None:
        given = [name for name, value in (("token", self.token), ("user", self.user), ("creds_file", self.creds_file))
                 if value]
        if len(given) > 1:
            raise ValueError(f"give one NATS credential, not {' and '.join(given)}")
        if bool(self.user) != bool(self.password):
            raise ValueError("a NATS user goes with a password")

    def __repr__(self) -> str:
        return f"FleetCredential({self.kind})"

    @property
    def kind(self) -> str:
        if self.token:
            return "token"
        if self.user:
            return "user_password"
        if self.creds_file:
            return "creds_file"
        return "none"

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments nats-py's `connect` takes for this credential."""
        if self.token:
            return {"token": self.token}
        if self.user:
            return {"user": self.user, "password": self.password}
        if self.creds_file:
            return {"user_credentials": self.creds_file}
        return {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FleetCredential:
        """`ZIMMER_RUNTIME_NATS_TOKEN`, or `ZIMMER_RUNTIME_NATS_USER` + `ZIMMER_RUNTIME_NATS_PASSWORD`,
        or `ZIMMER_RUNTIME_NATS_CREDS` (a path); none set: no credential."""
        env = os.environ if environ is None else environ
        return cls(token=env.get(f"{ENV_PREFIX}NATS_TOKEN") or None, user=env.get(f"{ENV_PREFIX}NATS_USER") or None,
                   password=env.get(f"{ENV_PREFIX}NATS_PASSWORD") or None,
                   creds_file=env.get(f"{ENV_PREFIX}NATS_CREDS") or None)


@dataclass(frozen=True)
class RuntimeConfig:
    servers: list[str]
    # This runtime instance's name: the NATS connection name and the prefix of every report key
    # it makes, so two runtimes never make the same key.
    name: str = "zimmer-runtime"
    credential: FleetCredential = field(default_factory=FleetCredential)
    # Reports held while they wait for JetStream's ack (all of them while disconnected); past
    # this the oldest is dropped and counted.
    buffer_size: int = 10_000
    rpc_timeout: float = 5.0  # request_turn and every other request/reply
    publish_timeout: float = 5.0  # one report's wait for JetStream's ack
    connect_timeout: float = 5.0
    connect_attempts: int = 10  # at the first connect; once connected, reconnects never stop
    # The durable pull consumer on ZIMMER_RUNTIME, shared by every instance of this runtime (a
    # work queue: each command goes to one of them).
    command_consumer: str = "zimmer_runtime"
    command_ack_wait: float = 30.0  # a command not acked within this is redelivered
    command_max_ack_pending: int = 256
    # Command ids remembered as handled: a redelivery of one of them is acked, not run again.
    handled_commands_remembered: int = 10_000

    def __post_init__(self) -> None:
        if not self.servers:
            raise ValueError("give at least one NATS server URL")
        if self.buffer_size < 1:
            raise ValueError("buffer_size must be at least 1")
        for name in ("rpc_timeout", "publish_timeout", "connect_timeout", "command_ack_wait"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RuntimeConfig:
        """`ZIMMER_RUNTIME_NATS_URL` (comma-separated; default `ZIMMER_NATS_URL`, then
        nats://127.0.0.1:4222), `ZIMMER_RUNTIME_NAME`, `ZIMMER_RUNTIME_BUFFER_SIZE`, and the
        credential's variables (`FleetCredential.from_env`)."""
        env = os.environ if environ is None else environ
        urls = env.get(f"{ENV_PREFIX}NATS_URL") or env.get("ZIMMER_NATS_URL") or "nats://127.0.0.1:4222"
        values: dict[str, Any] = {"servers": [u.strip() for u in urls.split(",") if u.strip()],
                                  "credential": FleetCredential.from_env(env)}
        if env.get(f"{ENV_PREFIX}NAME"):
            values["name"] = env[f"{ENV_PREFIX}NAME"]
        if env.get(f"{ENV_PREFIX}BUFFER_SIZE"):
            values["buffer_size"] = int(env[f"{ENV_PREFIX}BUFFER_SIZE"])
        values.update(overrides)
        return cls(**values)
