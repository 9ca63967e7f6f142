"""Database plumbing: an async SQLAlchemy engine over asyncpg, and a per-schema migrator.

Migrator choice: ordered SQL files, not alembic. Each service owns exactly one schema and
its migrations are plain DDL; alembic would add an env.py, a version table per schema and
autogenerate machinery per service for no gain. This migrator is one transaction under an
advisory lock (replicas starting together apply each file once), keeps its version table in
the service's own schema, and refuses to start if an applied file was edited afterwards.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from zimmer_common import deadline
from zimmer_common.outage import DATABASE, Outages

log = logging.getLogger("zimmer.db")

COMMON_MIGRATIONS = "zimmer_common.migrations"


def sqlalchemy_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    if scheme in ("postgres", "postgresql", "postgresql+asyncpg"):
        return f"postgresql+asyncpg://{rest}"
    raise ValueError(f"ZIMMER_DATABASE_URL must be a postgresql:// URL, got scheme {scheme!r}")


def asyncpg_dsn(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"postgresql://{rest}" if scheme.startswith("postgres") else url


# Refuse to start a commit this close to the deadline: the COMMIT round trip and the reply must
# still reach the requester before it gives up.
COMMIT_MARGIN = 0.05


def create_engine(url: str, *, pool_size: int = 5, max_overflow: int = 5, app_name: str = "zimmer",
                  outages: Outages | None = None) -> AsyncEngine:
    """Create (but do not connect) the engine; called from start-up wiring, never at import.

    Every transaction committed on behalf of a request commits before that request's deadline
    or not at all (`refuse_late_commit`): so an `unavailable` answer means nothing changed.
    """
    engine = create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_timeout=10,  # a pool wait is a wait too: bounded
        connect_args={"server_settings": {"application_name": app_name}, "command_timeout": 60, "timeout": 10},
    )
    event.listen(engine.sync_engine, "commit", refuse_late_commit)
    ping_when_idle(engine)
    if outages is not None:
        # A fresh connection is the database answering again: the outage, if any, is over.
        event.listen(engine.sync_engine, "connect", lambda _dbapi, _record: outages.of(DATABASE).recovered())
    return engine


# A pooled connection that sat idle this long is pinged before it is handed out, so a database
# restarted behind the pool is found at checkout, not by a request. Not every checkout, as
# pool_pre_ping does: the asyncpg dialect's ping is three round trips (BEGIN, ";", ROLLBACK), on
# a busy service asked of a connection that answered a moment ago, before every transaction (4 %
# of spot-gate's CPU under the admissions benchmark: bench/README.md).
PING_AFTER_IDLE_SECONDS = 1.0
_IDLE_SINCE = "zimmer_idle_since"


def ping_when_idle(engine: AsyncEngine) -> None:
    dialect = engine.dialect

    def fresh(_dbapi: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()  # just connected: nothing to find out

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get(_IDLE_SINCE, 0.0) > PING_AFTER_IDLE_SECONDS:
            try:
                dialect.do_ping(dbapi_connection)
            except Exception as exc:  # noqa: BLE001 - any failure: the pool drops it and connects anew
                raise DisconnectionError("a pooled connection did not answer its ping") from exc

    event.listen(engine.sync_engine.pool, "connect", fresh)
    event.listen(engine.sync_engine.pool, "checkout", checkout)
    event.listen(engine.sync_engine.pool, "checkin", fresh)


def refuse_late_commit(_conn: object) -> None:
    """SQLAlchemy `commit` event (it runs before the COMMIT is sent): past the deadline of the
    request being served, raise instead, and the transaction rolls back. SQLAlchemy runs it in
    a greenlet that shares the caller's context, so it sees the caller's deadline."""
    if deadline.passed(COMMIT_MARGIN):
        raise deadline.DeadlinePassed()


@dataclass(frozen=True)
class Migration:
    version: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


class MigrationError(RuntimeError):
    pass


def load_migrations(package: str, *, prefix: str, schema: str) -> list[Migration]:
    files = sorted((f for f in resources.files(package).iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [Migration(f"{prefix}/{f.name.removesuffix('.sql')}", f.read_text().replace("{schema}", schema))
            for f in files]


async def migrate(database_url: str, schema: str, package: str | None) -> list[str]:
    """Bring `schema` up to date: the shared plumbing tables first, then the service's own.

    Returns the versions applied by this call (empty when already current).
    """
    migrations = load_migrations(COMMON_MIGRATIONS, prefix="common", schema=schema)
    if package:
        migrations += load_migrations(package, prefix="service", schema=schema)
    conn = await asyncpg.connect(asyncpg_dsn(database_url), timeout=10)
    applied_now: list[str] = []
    try:
        async with conn.transaction():
            # Replicas starting at once queue here; the loser sees the winner's rows.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"zimmer.migrate.{schema}")
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            await conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{schema}".schema_migrations ('
                " version text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
            done = {r["version"]: r["checksum"] for r in
                    await conn.fetch(f'SELECT version, checksum FROM "{schema}".schema_migrations')}
            for m in migrations:
                if m.version in done:
                    if done[m.version] != m.checksum:
                        raise MigrationError(
                            f"migration {m.version} in schema {schema} was edited after it was applied; "
                            "add a new migration instead")
                    continue
                await conn.execute(m.sql)
                await conn.execute(f'INSERT INTO "{schema}".schema_migrations (version, checksum) VALUES ($1, $2)',
                                   m.version, m.checksum)
                applied_now.append(m.version)
    finally:
        await conn.close()
    if applied_now:
        log.info("migrated", extra={"fields": {"schema": schema, "applied": applied_now}})
    return applied_now


def with_database(url: str, name: str) -> str:
    """The same server's URL for another database (query such as `?host=/socket/dir` kept)."""
    head, sep, query = url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}{sep}{query}"
