"""The closed set of error codes that cross service boundaries (DESIGN §3).

A reply carries `{ok: false, error: {code, message, details}}`; the gateway maps each code
to one HTTP status and an RFC 9457 problem document. A request that times out is
`unavailable`, never a guess at what the other side would have said.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    INVALID = "invalid"
    FORBIDDEN = "forbidden"
    UNAUTHORIZED = "unauthorized"
    UNAVAILABLE = "unavailable"  # a dependency is down or did not answer in time; nothing was done
    BUSY = "busy"  # the service is at its bound of work in flight; nothing was done, retry
    TOO_LARGE = "too_large"  # the request cannot fit (a body, a string, a bus message)
    BAND_FULL = "band_full"
    REFUSED = "refused"
    INTERNAL = "internal"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.INVALID: 422,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.BUSY: 503,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.BAND_FULL: 409,
    ErrorCode.REFUSED: 409,
    ErrorCode.INTERNAL: 500,
}


class ZimmerError(Exception):
    """An error with a code from the closed set; safe to send to another service."""

    def __init__(self, code: ErrorCode | str, message: str, details: dict[str, Any] | None = None):
        try:
            self.code = ErrorCode(code)
        except ValueError:
            # An unknown code from a newer peer is still an error, never a success.
            self.code = ErrorCode.INTERNAL
            message = f"[{code}] {message}"
        self.message = message
        self.details = details or {}
        super().__init__(f"{self.code.value}: {message}")

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "message": self.message, "details": self.details}

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    @property
    def retry_safe(self) -> bool:
        """Nothing was done: the same request may be sent again."""
        return self.code in RETRY_SAFE


# Codes that promise nothing happened: a deadline or a bound refused the request before (or
# instead of) any commit, so a client may send it again.
RETRY_SAFE = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.BUSY})


def unavailable(dependency: str, message: str | None = None, *, sent: bool | None = None) -> ZimmerError:
    """`unavailable` naming the dependency that is down ("database", "message bus", a service).

    `sent` (for a request over the bus): False when it never left, so nothing happened; True when
    it left and no answer came, so it will not take effect from now on (deadlines), though it may
    have just before its answer was lost (a retry with its idempotency key returns that answer)."""
    details: dict[str, object] = {"dependency": dependency, "retry_safe": True}
    if sent is not None:
        details["sent"] = sent
    return ZimmerError(ErrorCode.UNAVAILABLE, message or f"{dependency} unavailable", details)
