"""Outages are answers, not crashes (DESIGN §5).

`classify(exc)` names the dependency an exception says is down ("database", "message bus"),
or None for an ordinary error. Callers turn an outage into `unavailable` naming it, and report
it to that dependency's `Outage`, which logs one ERROR when the outage starts, a WARNING
summary at most every `SUMMARY_SECONDS` while it lasts, and one INFO when it ends, instead of
a traceback per request. Each outage is also a gauge (`zimmer_dependency_up`) and a counter of
what it refused (`zimmer_dependency_failures_total`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from zimmer_common.errors import ZimmerError
from zimmer_common.logs import kv

log = logging.getLogger("zimmer.outage")

DATABASE = "database"
MESSAGE_BUS = "message bus"
SUMMARY_SECONDS = 30.0
# How long after an outage ends a refusal that names nothing is still taken as its doing: a
# request's deadline is a few seconds (`rpc_timeout_seconds`, 5 by default), so one refused just
# after the database came back spent its time waiting on it while it was away.
AFTERMATH_SECONDS = 10.0
# A failure this soon after the dependency came back is the same outage flapping, not a new one.
REOPEN_SECONDS = SUMMARY_SECONDS


def classify(exc: BaseException) -> str | None:
    """The dependency `exc` says is unreachable, or None when it is not an outage."""
    import sqlalchemy.exc as sa
    from nats import errors as nats_errors
    from nats.js import errors as js_errors

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:  # look through wrappers and causes
        seen.add(id(current))
        if isinstance(current, ZimmerError):  # already an answer; an outage if it names one
            dependency = current.details.get("dependency")
            return dependency if dependency in (DATABASE, MESSAGE_BUS) else None
        if isinstance(current, sa.TimeoutError):  # the pool waited its bound for a connection
            return DATABASE
        if isinstance(current, sa.DBAPIError) and (current.connection_invalidated or
                                                    isinstance(current, (sa.OperationalError, sa.InterfaceError))):
            return DATABASE
        if _is_asyncpg_connection_error(current):
            return DATABASE
        if isinstance(current, (nats_errors.ConnectionClosedError, nats_errors.OutboundBufferLimitError,
                                nats_errors.NoServersError, nats_errors.ConnectionReconnectingError,
                                nats_errors.StaleConnectionError, nats_errors.ConnectionDrainingError,
                                nats_errors.NoRespondersError, js_errors.NoStreamResponseError)):
            return MESSAGE_BUS
        if isinstance(current, js_errors.APIError) and _jetstream_unavailable(current):
            return MESSAGE_BUS
        if isinstance(current, ConnectionError) or (isinstance(current, OSError) and ".s.PGSQL." in str(current)):
            # A socket that refused or dropped (or a PostgreSQL unix socket that is gone): the
            # only sockets a handler opens are the database's; the bus is classified above.
            return DATABASE
        current = current.__cause__ or current.__context__
    return None


def _jetstream_unavailable(exc: Any) -> bool:
    """JetStream's own refusals while a leader is being elected or a quorum is lost: 503 (no
    leader answered, or 'JetStream system temporarily unavailable'), and a pull request's 409
    'Leadership Change'. Each one classified as the bus's outage is one ERROR and a summary every
    30 s, not a WARNING per fetch a second per consumer (105 lines in 6 s of one election)."""
    from nats.js import errors as js_errors

    description = str(exc.description or "").lower()
    return isinstance(exc, js_errors.ServiceUnavailableError) or exc.code == 503 or "leadership change" in description


def _is_asyncpg_connection_error(exc: BaseException) -> bool:
    import asyncpg

    if isinstance(exc, asyncpg.InterfaceError):  # also raised for misuse; only a closed connection is an outage
        return "closed" in str(exc)
    return isinstance(exc, (asyncpg.PostgresConnectionError, asyncpg.ConnectionDoesNotExistError,
                            asyncpg.CannotConnectNowError, asyncpg.TooManyConnectionsError,
                            asyncpg.AdminShutdownError, asyncpg.CrashShutdownError))


class Outage:
    """The state of one dependency as this process sees it."""

    def __init__(self, dependency: str, *, summary_seconds: float = SUMMARY_SECONDS, metrics: Any = None):
        self.dependency = dependency
        self.summary_seconds = summary_seconds
        self.metrics = metrics
        self.down_since: float | None = None
        self.recovered_at: float | None = None  # when the last outage ended
        self.failures = 0
        self._summarised_at = 0.0
        self._summarised_failures = 0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, exc: BaseException | str, *, where: str = "") -> None:
        now = time.monotonic()
        self.failures += 1
        if self.metrics is not None:
            self.metrics.dependency_failures.labels(self.dependency).inc()
            self.metrics.dependency_up.labels(self.dependency).set(0)
        if self.down_since is None and self.recovered_at is not None and now - self.recovered_at < REOPEN_SECONDS:
            # Back for a moment, then down again: the same outage flapping (during an election
            # one stream answers while another's leader is still being chosen). Its ERROR was
            # logged; the summaries carry on.
            self.down_since, self._summarised_at, self._summarised_failures, self.failures = now, now, 0, 1
            return
        if self.down_since is None:
            self.down_since = now
            self._summarised_at = now
            self._summarised_failures = 0
            self.failures = 1
            # ERROR without a page: ZimmerDependencyDown (Prometheus, on `zimmer_dependency_up`) is this
            # outage's page, from outside: the pager's own path may be exactly what is down.
            log.error("%s unavailable", self.dependency, extra=kv(dependency=self.dependency, where=where,
                                                                  error=_short(exc)))
            return
        if now - self._summarised_at >= self.summary_seconds:
            log.warning("%s still unavailable", self.dependency, extra=kv(
                dependency=self.dependency, down_seconds=round(now - self.down_since, 1),
                failures_since_last_summary=self.failures - self._summarised_failures, failures=self.failures,
                last_error=_short(exc)))
            self._summarised_at = now
            self._summarised_failures = self.failures

    def recovered(self) -> None:
        if self.metrics is not None:
            self.metrics.dependency_up.labels(self.dependency).set(1)
        if self.down_since is None:
            return
        lasted = time.monotonic() - self.down_since
        log.info("%s available again", self.dependency, extra=kv(dependency=self.dependency,
                                                                 down_seconds=round(lasted, 1), failures=self.failures))
        self.down_since = None
        self.recovered_at = time.monotonic()
        self.failures = 0

    def lately(self, within: float = AFTERMATH_SECONDS) -> bool:
        """Down now, or back for less than `within` seconds."""
        return self.down or (self.recovered_at is not None and time.monotonic() - self.recovered_at < within)


class Outages:
    """One `Outage` per dependency for a process; `report` classifies and records in one call."""

    def __init__(self, metrics: Any = None):
        self.metrics = metrics
        self._by_name: dict[str, Outage] = {}

    def of(self, dependency: str) -> Outage:
        if dependency not in self._by_name:
            self._by_name[dependency] = Outage(dependency, metrics=self.metrics)
        return self._by_name[dependency]

    def report(self, exc: BaseException, *, where: str = "") -> str | None:
        """Record `exc` against its dependency when it is an outage; returns the dependency."""
        dependency = classify(exc)
        if dependency is not None:
            self.of(dependency).failed(exc, where=where)
        return dependency

    def answered(self, dependency: str) -> None:
        """A request to `dependency` was answered. Ends an outage the connection's callbacks never
        see end: JetStream refusing while it elects a leader, over a connection that stayed up."""
        found = self._by_name.get(dependency)
        if found is not None and found.down:
            found.recovered()

    def down(self) -> list[str]:
        return sorted(name for name, o in self._by_name.items() if o.down)

    def naming(self, details: dict[str, Any]) -> dict[str, Any]:
        """The details of a `busy` or `unavailable` answer that names no dependency (a deadline
        that passed, a bound that was full) while one of ours is down, or only just came back
        (`AFTERMATH_SECONDS`): that outage caused it, so the answer names it, as every outage
        answer does (DESIGN §5). One that is down now comes before one that is back."""
        if "dependency" in details:
            return details
        down = self.down()
        lately = down or sorted(name for name, o in self._by_name.items() if o.lately())
        return {**details, "dependency": lately[0]} if lately else details


def _short(exc: BaseException | str) -> str:
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return text.splitlines()[0][:300] if text else ""

