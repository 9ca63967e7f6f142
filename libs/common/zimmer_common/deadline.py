"""Deadlines that travel with a request (DESIGN §5 "Deadlines travel with the request").

A deadline is an absolute wall-clock time (seconds since the epoch), because it crosses process
boundaries in an RPC header; hosts are assumed to keep their clocks within `INNER_RESERVE` of
each other (NTP does far better). The deadline of the request being served lives in a context
variable, so everything done on its behalf sees it without passing it around:

- an inner RPC is budgeted from what is left, minus a reserve for the caller to finish its own
  work and answer (`inner_deadline`), so an outer answer never races inner work;
- a database transaction refuses to commit once the deadline has passed (`zimmer_common.db`
  installs the guard), so a request answered `unavailable` can never take effect later;
- a handler that receives a request already past its deadline drops it unanswered.

The requester waits `REPLY_GRACE` past the deadline for an answer sent just before it.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from typing import Any

from zimmer_common.contracts.wire import CALLER_HEADER, DEADLINE_HEADER, REPLY_GRACE  # noqa: F401 - read as deadline.<name>
from zimmer_common.errors import ErrorCode, ZimmerError

# What an inner call leaves its caller to finish and answer: the larger of these.
INNER_RESERVE = 0.5
INNER_RESERVE_FRACTION = 0.1
# Below this budget a call is not attempted: it could not finish.
MIN_BUDGET = 0.05

_deadline: ContextVar[float | None] = ContextVar("zimmer_deadline", default=None)
_caller: ContextVar[str | None] = ContextVar("zimmer_caller", default=None)


def now() -> float:
    return time.time()


def current() -> float | None:
    """The absolute deadline of the request being served, or None outside one."""
    return _deadline.get()


def remaining(at: float | None = None) -> float | None:
    d = _deadline.get()
    return None if d is None else d - (now() if at is None else at)


def passed(margin: float = 0.0) -> bool:
    d = _deadline.get()
    return d is not None and now() >= d - margin


def inner_deadline(timeout: float) -> float:
    """The deadline for a call made now with its own bound `timeout`, inside whatever request
    is being served: never later than the outer deadline minus the caller's reserve."""
    t = now()
    own = t + timeout
    outer = _deadline.get()
    if outer is None:
        return own
    left = outer - t
    return min(own, outer - max(INNER_RESERVE, left * INNER_RESERVE_FRACTION))


class _Setting:
    """`with`: the context variable holds the value inside, and what it held before after. A
    class rather than a generator: every request served enters two of these."""

    __slots__ = ("_var", "_value", "_token")

    def __init__(self, var: ContextVar[Any], value: Any):
        self._var, self._value = var, value

    def __enter__(self) -> None:
        self._token = self._var.set(self._value)

    def __exit__(self, *_exc: object) -> None:
        self._var.reset(self._token)


def use(deadline: float | None) -> contextlib.AbstractContextManager[None]:
    """Serve the code inside under `deadline` (None: no deadline)."""
    return _Setting(_deadline, deadline)


def adopt(deadline: float | None) -> None:
    """Serve the rest of the running task under `deadline`: for a batch that learns its callers'
    deadlines only once it holds its lock (`batching.LockedBatcher`). The task's own context: it
    started with no deadline, and nothing outside it sees the change."""
    _deadline.set(deadline)


def current_caller() -> str | None:
    """Who the request being served came from, as the gateway authenticated it (scopes
    idempotency keys); None for a service's own work."""
    return _caller.get()


def as_caller(caller: str | None) -> contextlib.AbstractContextManager[None]:
    return _Setting(_caller, caller)


def parse_header(value: str | None) -> float | None:
    if not value:
        return None
    try:
        d = float(value)
    except ValueError:
        return None
    return d if d == d and d > 0 else None  # NaN or nonsense: no deadline rather than a crash


class DeadlinePassed(ZimmerError):
    """The request's deadline passed before its work could commit: nothing was changed."""

    def __init__(self, what: str = "the request's deadline passed before its work could commit; nothing was changed"):
        super().__init__(ErrorCode.UNAVAILABLE, what, {"retry_safe": True})
