"""Idempotency keys in a batch (zimmer_common.idempotency), on real PostgreSQL: each request of a
batch is answered as if it had come alone, and the batch claims and records its keys in a fixed
number of statements whatever its size (it does so under the ranking lock, where every round
trip is one for each batch waiting behind it)."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from sqlalchemy import event, text

from zimmer_common.db import create_engine, migrate
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.idempotency import KeyRef, claim, claim_many, keyed_batch, record

SCHEMA = "idem"


class Answer(BaseModel):
    n: int


def ref(key: str, request_hash: str = "h") -> KeyRef:
    return KeyRef("fleet", "op", key, request_hash)


async def _engine(database_url: str) -> Any:
    await migrate(database_url, SCHEMA, None)
    return create_engine(database_url)


async def test_each_request_of_a_batch_is_answered_as_if_alone(database_url: str) -> None:
    engine = await _engine(database_url)
    try:
        async with engine.begin() as conn:
            assert (await claim(conn, SCHEMA, ref("answered"))).fresh
            await record(conn, SCHEMA, ref("answered"), Answer(n=-1))
            assert (await claim(conn, SCHEMA, ref("refused"))).fresh
            await record(conn, SCHEMA, ref("refused"), ZimmerError(ErrorCode.CONFLICT, "no", {"field": "key"}))
        refs = [None, ref("answered"), ref("new"), ref("new"), ref("answered", "other"), ref("refused"),
                ref("new", "other"), ref("second"), None]
        ran: list[int] = []

        async def run(indices: list[int]) -> list[Any]:
            ran.extend(indices)
            return [Answer(n=i) for i in indices]

        async with engine.begin() as conn:
            out = await keyed_batch(conn, SCHEMA, refs, run, Answer)
        assert ran == [0, 2, 7, 8]  # in arrival order, a repeated key once, answered keys not at all
        assert out[0] == Answer(n=0) and out[8] == Answer(n=8)
        assert out[1] == Answer(n=-1)  # the first answer back
        assert out[2] == out[3] == Answer(n=2)  # the repeat inside the batch gets the first's answer
        assert isinstance(out[4], ZimmerError) and out[4].code is ErrorCode.CONFLICT  # another request, same key
        assert isinstance(out[5], ZimmerError) and out[5].details == {"field": "key"}  # a refusal is an answer
        assert isinstance(out[6], ZimmerError) and "different op request" in out[6].message
        assert out[7] == Answer(n=7)
        async with engine.connect() as conn:
            stored = dict((await conn.execute(text(
                f"SELECT key, response FROM {SCHEMA}.idempotency_keys ORDER BY key"))).all())
        assert stored["new"] == {"result": {"n": 2}} and stored["second"] == {"result": {"n": 7}}
        assert stored["answered"] == {"result": {"n": -1}}  # untouched by the replay
    finally:
        await engine.dispose()


async def test_a_batch_claims_and_records_in_three_statements_whatever_its_size(database_url: str) -> None:
    engine = await _engine(database_url)
    statements: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute",
                 lambda _c, _cur, sql, *_args: statements.append(sql) if "idempotency_keys" in sql else None)

    async def run(indices: list[int]) -> list[Any]:
        return [Answer(n=i) for i in indices]

    try:
        counts = []
        for size in (1, 60):
            async with engine.begin() as conn:
                # One key of each batch already exists: the second statement (reading the taken) runs.
                await conn.execute(text(f"INSERT INTO {SCHEMA}.idempotency_keys (scope, op, key, request_hash, "
                                        f"response) VALUES ('fleet', 'op', 'seen-{size}', 'h', "
                                        "'{\"result\": {\"n\": 0}}')"))
                statements.clear()
                out = await keyed_batch(conn, SCHEMA, [ref(f"seen-{size}")] + [ref(f"k{size}-{i}") for i in range(size)],
                                        run, Answer)
                counts.append(len(statements))
            assert out[0] == Answer(n=0) and out[1:] == [Answer(n=i) for i in range(1, size + 1)]
        assert counts == [3, 3], counts  # INSERT … ON CONFLICT, SELECT … FOR UPDATE of the taken, one UPDATE
    finally:
        await engine.dispose()


async def test_a_key_a_concurrent_transaction_commits_is_found_with_its_answer(database_url: str) -> None:
    """The INSERT waits on the first transaction's row; the statement after it sees its commit."""
    engine = await _engine(database_url)
    try:
        async with engine.connect() as first, engine.connect() as second:
            await first.begin()
            assert (await claim(first, SCHEMA, ref("k"))).fresh
            await second.begin()
            racing = asyncio.create_task(claim_many(second, SCHEMA, [ref("j"), ref("k")]))
            await asyncio.sleep(0.3)
            assert not racing.done()  # waiting on the first transaction's key
            await record(first, SCHEMA, ref("k"), Answer(n=1))
            await first.commit()
            claimed_j, claimed_k = await asyncio.wait_for(racing, 10)
            assert not isinstance(claimed_j, ZimmerError) and claimed_j.fresh
            assert not isinstance(claimed_k, ZimmerError) and not claimed_k.fresh
            assert claimed_k.response == {"result": {"n": 1}}
            await second.rollback()
    finally:
        await engine.dispose()
