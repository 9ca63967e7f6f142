"""Idempotency keys: a retried request gets its first answer back, and nothing is done twice.

A keyed request `claim`s its key in the transaction that does its work and `record`s its
answer in that same transaction, so the answer exists if and only if the work committed. A
retry with the same key (and the same request) finds the answer and returns it; the same key
with a different request is refused (`conflict`, naming `idempotency_key`). A concurrent
duplicate waits on the key's row until the first commits, then finds its answer. Errors the
work decided (not found, refused) are answers too; `unavailable` and `busy` are not, because
they roll back.

Keys are scoped to the caller (the gateway's credential realm, and the session a connection
speaks for) and remembered for `KEEP` (pruned with the outbox).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common import deadline
from zimmer_common.errors import ErrorCode, ZimmerError

KEEP = timedelta(hours=24)
SERVICE_SCOPE = "service"


@dataclass(frozen=True)
class KeyRef:
    """One keyed request: who asked, what, with which key, and a digest of the request."""

    scope: str
    op: str
    key: str
    request_hash: str


def ref_for(op: str, request: BaseModel, key: str | None = None) -> KeyRef | None:
    """The key of `request` (its `idempotency_key` unless given), scoped to the current caller;
    None for an unkeyed request. Call it where the request arrives: the caller is a context value."""
    key = key if key is not None else getattr(request, "idempotency_key", None)
    if not key:
        return None
    body = request.model_dump_json(exclude={"idempotency_key"})
    return KeyRef(deadline.current_caller() or SERVICE_SCOPE, op, key, hashlib.sha256(body.encode()).hexdigest())


@dataclass(frozen=True)
class Claim:
    fresh: bool  # this transaction owns the key: do the work, then `record`
    response: dict[str, Any] | None = None  # the first answer, when there is one
    progress: dict[str, Any] | None = None  # what a multi-step first attempt committed


async def claim(conn: AsyncConnection, schema: str, ref: KeyRef) -> Claim:
    """Own `ref`'s key in this transaction (`fresh`), or find its first answer; `conflict` when
    the key was used for a different request."""
    claimed = (await claim_many(conn, schema, [ref]))[0]
    if isinstance(claimed, ZimmerError):
        raise claimed
    return claimed


async def claim_many(conn: AsyncConnection, schema: str, refs: list[KeyRef]) -> list[Claim | ZimmerError]:
    """`claim` for distinct keys at once, in two round trips at most whatever their number: a
    batch claims under its lock, where every round trip delays each batch waiting behind it.
    Keys are taken in one order, so two batches cannot deadlock on them.

    The keys that exist already are read in a second statement, not in the INSERT's: a key a
    concurrent transaction inserted and committed while the INSERT waited on it is outside the
    INSERT's snapshot, and inside the next statement's."""
    if not refs:
        return []
    fresh = {tuple(row) for row in await conn.execute(text(
        f'INSERT INTO "{schema}".idempotency_keys (scope, op, key, request_hash) '
        f"SELECT s, o, k, h FROM {_unnest('s', 'o', 'k', 'h')} ORDER BY s, o, k "
        "ON CONFLICT DO NOTHING RETURNING scope, op, key"), {**_keys(refs), "h": [r.request_hash for r in refs]})}
    taken = [r for r in refs if (r.scope, r.op, r.key) not in fresh]
    found: dict[tuple[str, str, str], Any] = {}
    if taken:
        rows = await conn.execute(text(
            f'SELECT scope, op, key, request_hash, response, progress FROM "{schema}".idempotency_keys '
            f"WHERE (scope, op, key) IN (SELECT s, o, k FROM {_unnest('s', 'o', 'k')}) "
            "ORDER BY scope, op, key FOR UPDATE"), _keys(taken))
        found = {(row.scope, row.op, row.key): row for row in rows}
    claims: list[Claim | ZimmerError] = []
    for ref in refs:
        ident = (ref.scope, ref.op, ref.key)
        if ident in fresh:
            claims.append(Claim(fresh=True))
            continue
        row = found[ident]
        if row.request_hash != ref.request_hash:
            claims.append(_reused(ref))
        else:
            claims.append(Claim(fresh=False, response=row.response, progress=row.progress))
    return claims


def _reused(ref: KeyRef) -> ZimmerError:
    return ZimmerError(ErrorCode.CONFLICT, f"idempotency key {ref.key!r} was already used for a different {ref.op} "
                       "request; use a new key for a new request", {"field": "idempotency_key"})


def _keys(refs: list[KeyRef]) -> dict[str, list[str]]:
    """The keys of `refs` as the parameters `_unnest('s', 'o', 'k', …)` reads."""
    return {"s": [r.scope for r in refs], "o": [r.op for r in refs], "k": [r.key for r in refs]}


def _unnest(*names: str) -> str:
    """The text[] parameters `names` as the rows of `t`, one column each."""
    arrays = ", ".join(f"CAST(:{name} AS text[])" for name in names)
    return f"unnest({arrays}) AS t({', '.join(names)})"


async def record(conn: AsyncConnection, schema: str, ref: KeyRef, answer: BaseModel | ZimmerError) -> None:
    """Store the first answer (a result, or an error the work decided) in the work's transaction."""
    await record_many(conn, schema, [(ref, answer)])


async def record_many(conn: AsyncConnection, schema: str, answers: list[tuple[KeyRef, BaseModel | ZimmerError]]) -> None:
    """`record` for several keys in one statement."""
    if not answers:
        return
    await conn.execute(text(
        f'UPDATE "{schema}".idempotency_keys AS keys SET response = CAST(t.r AS jsonb), updated_at = now() '
        f"FROM {_unnest('s', 'o', 'k', 'r')} WHERE keys.scope = t.s AND keys.op = t.o AND keys.key = t.k"),
        {**_keys([ref for ref, _ in answers]), "r": [json.dumps(_answer_body(answer)) for _, answer in answers]})


def _answer_body(answer: BaseModel | ZimmerError) -> dict[str, Any]:
    return {"error": answer.to_dict()} if isinstance(answer, ZimmerError) else {"result": answer.model_dump(mode="json")}


async def note_progress(conn: AsyncConnection, schema: str, ref: KeyRef, progress: dict[str, Any]) -> None:
    await conn.execute(text(
        f'UPDATE "{schema}".idempotency_keys SET progress = CAST(:p AS jsonb), updated_at = now() '
        "WHERE scope = :s AND op = :o AND key = :k"),
        {"p": json.dumps(progress), "s": ref.scope, "o": ref.op, "k": ref.key})


def replay(response: dict[str, Any], result_type: type[BaseModel]) -> Any:
    """The stored first answer: the result, or the same error raised again."""
    if "error" in response:
        err = response["error"]
        raise ZimmerError(err.get("code", "internal"), err.get("message", ""), err.get("details") or {})
    return result_type.model_validate(response["result"])


def replayed(response: dict[str, Any], result_type: type[BaseModel]) -> Any:
    """`replay` for batch code that hands errors back rather than raising them."""
    try:
        return replay(response, result_type)
    except ZimmerError as exc:
        return exc


async def prune(conn: AsyncConnection, schema: str, keep: timedelta = KEEP) -> int:
    result = await conn.execute(text(f'DELETE FROM "{schema}".idempotency_keys '
                                     "WHERE created_at < now() - CAST(:keep AS interval)"), {"keep": keep})
    return int(result.rowcount or 0)


async def keyed_batch(conn: AsyncConnection, schema: str, refs: list[KeyRef | None],
                      run: Callable[[list[int]], Awaitable[list[Any]]], result_type: type[BaseModel]) -> list[Any]:
    """Run a batch of requests of which some are keyed, in the caller's transaction.

    `refs[i]` is request i's key (or None). Keys already answered get their first answer back
    without running; a key repeated inside the batch runs once and both get its answer; `run`
    gets the indices that must run and returns their outcomes (a result, a `ZimmerError`, or
    None), which are recorded against their keys in the same transaction.
    """
    outcomes: list[Any] = [None] * len(refs)
    todo: list[int] = []
    first: dict[tuple[str, str, str], tuple[int, KeyRef]] = {}
    repeats: dict[int, int] = {}
    for i, ref in enumerate(refs):
        if ref is None:
            todo.append(i)
            continue
        ident = (ref.scope, ref.op, ref.key)
        if ident in first:
            j, earlier = first[ident]
            if earlier.request_hash != ref.request_hash:
                outcomes[i] = _reused(ref)
            else:
                repeats[i] = j
            continue
        first[ident] = (i, ref)
    claims = await claim_many(conn, schema, [ref for _, ref in first.values()])
    for (i, ref), claimed in zip(first.values(), claims, strict=True):
        if isinstance(claimed, ZimmerError):
            outcomes[i] = claimed
        elif claimed.fresh:
            todo.append(i)
        elif claimed.response is not None:
            outcomes[i] = replayed(claimed.response, result_type)
        else:  # only a multi-step operation leaves a key without an answer; batches are one step
            outcomes[i] = ZimmerError(ErrorCode.CONFLICT, f"a {ref.op} request with idempotency key {ref.key!r} "
                                      "did not finish; use a new key", {"field": "idempotency_key"})
    todo.sort()  # the batch runs in arrival order, keyed or not
    results = await run(todo) if todo else []
    keyed_answers: list[tuple[KeyRef, Any]] = []
    for i, out in zip(todo, results, strict=True):
        outcomes[i] = out
        ref = refs[i]
        if ref is not None and out is not None:
            keyed_answers.append((ref, out))
    await record_many(conn, schema, keyed_answers)
    for i, j in repeats.items():
        outcomes[i] = outcomes[j]
    return outcomes
