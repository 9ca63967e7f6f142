"""`core` tools about the control plane itself."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.app import ping_peers
from zimmer_gateway.mcp.registry import CORE, tool


class ServicePing(BaseModel):
    up: bool = Field(description="The service answered and reports itself ready")
    version: str | None = None
    instance_id: str | None = None
    uptime_seconds: float | None = None
    error: str | None = Field(None, description="Error code when the service did not answer")
    detail: str | None = None


class SystemPing(BaseModel):
    services: dict[str, ServicePing]


@tool(group=CORE, read_only=True, destructive=False, idempotent=True)
async def get_system_ping(
    service: Service,
    timeout_seconds: Annotated[float, Field(gt=0, le=10, description="Seconds to wait for each service")] = 2.0,
) -> SystemPing:
    """Ping every domain service of the control plane over NATS; per service whether it is up,
    its version, instance and uptime."""
    if service.bus is None:
        raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
    answers = await ping_peers(service, timeout_seconds)
    services = {}
    for name, answer in answers.items():
        if isinstance(answer, ZimmerError):
            services[name] = ServicePing(up=False, error=answer.code.value, detail=answer.message)
        else:
            services[name] = ServicePing(up=answer.ready, version=answer.version, instance_id=answer.instance_id,
                                         uptime_seconds=round(answer.uptime_seconds, 3))
    return SystemPing(services=services)
