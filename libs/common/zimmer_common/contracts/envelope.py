"""Wire envelopes: RPC replies and JetStream event envelopes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from zimmer_common.contracts.subjects import rpc_subject


class Payload(BaseModel):
    """Base of every payload; `VERSION` is the payload's contract version."""

    model_config = ConfigDict(extra="ignore")
    VERSION: ClassVar[int] = 1


class RpcErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class RpcReply(BaseModel):
    ok: bool
    data: dict[str, Any] | list[Any] | None = None
    error: RpcErrorBody | None = None


class EventEnvelope(BaseModel):
    """What every event on ZIMMER_EVENTS looks like; `id` doubles as the Nats-Msg-Id."""

    id: str
    type: str
    version: int
    source: str
    occurred_at: datetime
    data: dict[str, Any]


Req = TypeVar("Req", bound=Payload)
Resp = TypeVar("Resp", bound=Payload)


@dataclass(frozen=True)
class RpcSpec(Generic[Req, Resp]):
    """One request/reply operation: where it lives and what goes each way."""

    ctx: str
    op: str
    request: type[Req]
    response: type[Resp]

    @property
    def subject(self) -> str:
        return rpc_subject(self.ctx, self.op)
