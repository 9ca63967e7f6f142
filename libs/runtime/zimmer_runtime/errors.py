"""What a request to the control plane can answer besides its result."""

from __future__ import annotations

from typing import Any


class RuntimeRequestError(Exception):
    """The control plane refused a request, or it could not be asked. `code` is one of the bus's
    closed set (`not_found`, `conflict`, `invalid`, `refused`, `unavailable`, `busy`, ...).

    `unavailable` with `details["sent"] is False`: nothing left this process, retrying is safe.
    With `sent` true the request may have taken effect just before its answer was lost: repeat it
    with the same idempotency key (`details["idempotency_key"]` when the client made one) to learn
    which."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}

    @property
    def retry_safe(self) -> bool:
        return self.code in ("unavailable", "busy")


class ReportTooLarge(ValueError):
    """A report whose envelope is larger than a bus message: refused before it is buffered."""
