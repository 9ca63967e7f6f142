"""One unit of work: a transaction of the service's schema, the events it announces (the outbox)
and the idempotency keys it answers, committed together or not at all (DESIGN §5 "Nothing lost").

A handler gets its unit of work from `UnitsOfWork`, the factory the service's bootstrap builds
once; it never holds an engine:

    async with units.begin() as uow:
        claimed = await uow.claim(ref)           # a keyed request: its first answer, or the key is ours
        ...                                      # the state change, on uow.conn
        await uow.emit(SUBJECT, "event", data)  # the event exists if and only if the change commits
        await uow.record(ref, answer)
    # committed: the outbox relay is woken to publish at once (it polls anyway)

`read()` is a connection for reads (no transaction kept), and `join(conn)` a unit of work over a
transaction someone else commits: a durable consumer's, which also records the message as
processed (`zimmer_common.consumer`). The engine is the started service's (`Database`): created at
start, after the migrations, and disposed at stop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from zimmer_common import idempotency, outbox
from zimmer_common.contracts.envelope import Payload
from zimmer_common.errors import ZimmerError
from zimmer_common.idempotency import Claim, KeyRef
from zimmer_common.outbox import OutboxRelay


class Database(Protocol):
    """Where the engine and the outbox relay are once the service has started
    (`zimmer_common.service.Service` is one)."""

    engine: AsyncEngine | None
    relay: OutboxRelay | None


class UnitOfWork:
    """One transaction of `schema`: its statements run on `conn`; its events and keyed answers are
    written in it, so they commit with the change or not at all."""

    def __init__(self, conn: AsyncConnection, schema: str):
        self.conn = conn
        self.schema = schema
        self._after_commit: list[Callable[[], None]] = []

    def after_commit(self, effect: Callable[[], None]) -> None:
        """Run `effect` once this unit has committed, never if it rolls back: for what is outside
        the database (a metric observed) and must not count a change that did not happen. A unit
        joined to a caller's transaction (`UnitsOfWork.join`) commits with it: that caller calls
        `committed()` after its commit."""
        self._after_commit.append(effect)

    def committed(self) -> None:
        """The transaction committed: run what waited for it."""
        effects, self._after_commit = self._after_commit, []
        for effect in effects:
            effect()

    async def emit(self, subject: str, event_type: str, data: Payload | dict[str, Any]) -> int:
        """Announce an event of this transaction; returns its outbox row id."""
        return await outbox.emit(self.conn, self.schema, subject, event_type, data)

    async def emit_many(self, events: list[tuple[str, str, Any]]) -> None:
        """Announce `(subject, event_type, data)` events of this transaction, in order."""
        await outbox.emit_many(self.conn, self.schema, events)

    async def claim(self, ref: KeyRef) -> Claim:
        """Own a request's idempotency key in this transaction, or find its first answer."""
        return await idempotency.claim(self.conn, self.schema, ref)

    async def record(self, ref: KeyRef, answer: BaseModel | ZimmerError) -> None:
        """Keep the first answer of a keyed request: it commits with the work it answers for."""
        await idempotency.record(self.conn, self.schema, ref, answer)

    async def keyed_batch(self, refs: list[KeyRef | None], run: Callable[[list[int]], Awaitable[list[Any]]],
                          result_type: type[BaseModel]) -> list[Any]:
        """A batch of requests of which some are keyed, in this transaction (`idempotency.keyed_batch`)."""
        return await idempotency.keyed_batch(self.conn, self.schema, refs, run, result_type)


class UnitsOfWork:
    """The factory of a service's units of work, built once by its bootstrap."""

    def __init__(self, database: Database, schema: str):
        self._database = database
        self.schema = schema

    @property
    def engine(self) -> AsyncEngine:
        engine = self._database.engine
        if engine is None:
            raise RuntimeError(f"the {self.schema} database is used before the service started")
        return engine

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[UnitOfWork]:
        """A unit of work: committed when the block ends, rolled back when it raises (nothing of it
        then exists, its events and keyed answers included). A commit that wrote events wakes the
        outbox relay; one that wrote none costs the relay no pass."""
        async with outbox.transaction(self.engine, self.kick) as conn:
            unit = UnitOfWork(conn, self.schema)
            yield unit
        unit.committed()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads: whatever it began is rolled back when the block ends."""
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[AsyncConnection]:
        """A read-only connection whose queries all see one snapshot (REPEATABLE READ): for an answer
        built from several queries whose figures must agree (a total and the rows it sums), where
        each query of `read` sees what committed before it, not before the first."""
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            yield conn

    def join(self, conn: AsyncConnection) -> UnitOfWork:
        """A unit of work over a transaction the caller owns and commits (a durable consumer's)."""
        return UnitOfWork(conn, self.schema)

    def kick(self) -> None:
        """Wake the outbox relay (a hint: it polls on its own)."""
        relay = self._database.relay
        if relay is not None:
            relay.kick()
