"""Structured logging: one JSON object per line on stderr.

Every record carries service, instance and level, so an exporter can ship WARN and above
without parsing prose. Extra fields go through `log.info("msg", extra={"fields": {...}})`
or the `kv()` helper.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Any

_service = "zimmer"
_instance = "-"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": _service,
            "instance": _instance,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            doc.update({k: v for k, v in fields.items() if k not in doc})
        if record.exc_info:
            doc["exc"] = "".join(traceback.format_exception(*record.exc_info))[-8000:]
        return json.dumps(doc, default=str)


def configure_logging(service: str, instance: str, level: str = "INFO") -> None:
    global _service, _instance
    _service, _instance = service, instance
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Library chatter at INFO would drown the service's own lines.
    for noisy in ("nats", "asyncio", "uvicorn.access", "httpx", "httpcore", "mcp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def kv(**fields: Any) -> dict[str, Any]:
    """`log.info("sent", extra=kv(count=3))` attaches fields to the JSON line."""
    return {"fields": fields}
