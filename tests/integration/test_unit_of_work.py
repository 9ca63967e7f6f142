"""The unit of work (zimmer_common.unit_of_work), on real PostgreSQL: a change, its events and its
keyed answer commit together or not at all, and a commit wakes the outbox relay."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from zimmer_common.db import create_engine, migrate
from zimmer_common.idempotency import KeyRef
from zimmer_common.outbox import announced
from zimmer_common.unit_of_work import UnitsOfWork

SCHEMA = "uow"


class Answer(BaseModel):
    n: int


@dataclass
class Relay:
    kicks: int = 0

    def kick(self) -> None:
        self.kicks += 1


@dataclass
class Database:
    engine: Any = None
    relay: Any = field(default_factory=Relay)


@pytest.fixture
async def db(database_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    await migrate(database_url, SCHEMA, None)
    database = Database(create_engine(database_url))
    yield database
    await database.engine.dispose()


async def _counts(units: UnitsOfWork) -> tuple[int, int]:
    async with units.read() as conn:
        events = (await conn.execute(text(f'SELECT count(*) FROM "{SCHEMA}".outbox'))).scalar_one()
        keys = (await conn.execute(text(f'SELECT count(*) FROM "{SCHEMA}".idempotency_keys'))).scalar_one()
    return events, keys


async def test_events_and_keyed_answer_commit_together_then_the_relay_is_woken(db) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    units = UnitsOfWork(db, SCHEMA)
    key = KeyRef("fleet", "op", "k1", "h")
    async with units.begin() as uow:
        assert (await uow.claim(key)).fresh
        await uow.emit("zimmer.test.evt.one", "one", {"n": 1})
        await uow.emit_many([("zimmer.test.evt.two", "two", {"n": 2}), ("zimmer.test.evt.three", "three", {"n": 3})])
        await uow.record(key, Answer(n=1))
        assert db.relay.kicks == 0  # not before the commit
    assert db.relay.kicks == 1
    assert await _counts(units) == (3, 1)
    async with units.begin() as uow:
        again = await uow.claim(key)
    assert not again.fresh and again.response == {"result": {"n": 1}}


async def test_a_unit_of_work_that_announced_nothing_wakes_nobody(db) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A write without events (a job's bookkeeping, a history point) costs the relay no pass; one
    whose events a single statement writes (`events_from`, as an append's) says so and wakes it."""
    units = UnitsOfWork(db, SCHEMA)
    with pytest.raises(RuntimeError):  # its events rolled back: no flag of it outlives it on the pooled connection
        async with units.begin() as uow:
            await uow.emit("zimmer.test.evt.one", "one", {"n": 1})
            raise RuntimeError("refused")
    async with units.begin() as uow:
        await uow.claim(KeyRef("fleet", "op", "k3", "h"))
    assert db.relay.kicks == 0
    async with units.begin() as uow:
        await uow.conn.execute(text(f'INSERT INTO "{SCHEMA}".outbox (subject, event_type, payload) '
                                    """VALUES ('zimmer.test.evt.one', 'one', '{"data": {}}')"""))
        announced(uow.conn)
    assert db.relay.kicks == 1


async def test_a_unit_of_work_that_raises_leaves_nothing_and_wakes_nobody(db) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    units = UnitsOfWork(db, SCHEMA)
    with pytest.raises(RuntimeError, match="refused"):
        async with units.begin() as uow:
            await uow.claim(KeyRef("fleet", "op", "k2", "h"))
            await uow.emit("zimmer.test.evt.one", "one", {"n": 1})
            raise RuntimeError("refused")
    assert db.relay.kicks == 0
    assert await _counts(units) == (0, 0)


async def test_joined_work_commits_with_its_owner(db) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    units = UnitsOfWork(db, SCHEMA)
    async with db.engine.begin() as conn:
        await units.join(conn).emit("zimmer.test.evt.one", "one", {"n": 1})
    assert db.relay.kicks == 0  # the owner of the transaction decides what follows its commit
    assert await _counts(units) == (1, 0)


async def test_no_engine_before_the_service_starts() -> None:
    units = UnitsOfWork(Database(), SCHEMA)
    with pytest.raises(RuntimeError, match="before the service started"):
        async with units.begin():
            pass


async def test_an_after_commit_effect_runs_once_committed_and_never_after_a_rollback(db) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """What is outside the database (a metric) waits for the commit: a rolled-back change is not
    counted, and nothing runs while the transaction is still open."""
    units = UnitsOfWork(db, SCHEMA)
    ran: list[str] = []
    async with units.begin() as uow:
        await uow.emit("zimmer.test.evt.one", "one", {"n": 1})
        uow.after_commit(lambda: ran.append("committed"))
        assert ran == []  # not while the transaction is open
    assert ran == ["committed"]
    with pytest.raises(RuntimeError):
        async with units.begin() as uow:
            uow.after_commit(lambda: ran.append("rolled back"))
            raise RuntimeError("the change fails")
    assert ran == ["committed"]
    assert await _counts(units) == (1, 0)


async def test_a_snapshot_reads_one_moment_and_writes_nothing(db) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The costs answer read its five-hour total and its models seen in two queries: a spend that
    committed between them showed three models beside a total of two (a CI run). A snapshot's
    queries all see what committed before its first; `read`'s each see what committed before them."""
    units = UnitsOfWork(db, SCHEMA)
    count = text(f'SELECT count(*) FROM "{SCHEMA}".outbox')

    async def commit_one() -> None:
        async with units.begin() as uow:
            await uow.emit("zimmer.test.evt.one", "one", {"n": 1})

    async with units.snapshot() as conn:
        first = (await conn.execute(count)).scalar_one()
        await commit_one()
        assert (await conn.execute(count)).scalar_one() == first
        with pytest.raises(DBAPIError, match="read-only transaction"):
            await conn.execute(text(f'DELETE FROM "{SCHEMA}".outbox'))
    async with units.read() as conn:
        first = (await conn.execute(count)).scalar_one()
        await commit_one()
        assert (await conn.execute(count)).scalar_one() == first + 1
    # The pool's connections come back as they were lent: the next reads and writes are read
    # committed and may write, whichever connection they get.
    pid = text("SELECT pg_backend_pid()")
    lent, reused = set(), set()
    for _ in range(3):
        async with units.snapshot() as conn:
            lent.add((await conn.execute(pid)).scalar_one())
        async with units.begin() as uow:
            modes = (await uow.conn.execute(text("SELECT pg_backend_pid(), current_setting('transaction_isolation'), "
                                                 "current_setting('transaction_read_only')"))).one()
            assert tuple(modes)[1:] == ("read committed", "off")
            reused.add(modes[0])
            await uow.emit("zimmer.test.evt.one", "one", {"n": 1})
        async with units.read() as conn:
            assert (await conn.execute(text("SELECT current_setting('transaction_isolation')"))).scalar_one() == \
                "read committed"
    assert lent & reused, "no connection a snapshot used was lent again: the check above proved nothing"
