"""The fixtures give real servers: a JetStream-enabled NATS and a PostgreSQL with its own database,
every service's schema migrated and no row but what the migrations insert (tests/conftest.py)."""

import asyncpg
import nats

from zimmer_common.db import asyncpg_dsn, with_database


async def _facts(url: str) -> tuple[str, set[str], int]:
    """(database name, schemas holding a migrations table, rows in the backlog's queue or -1)."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        schemas = {r[0] for r in await conn.fetch(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'schema_migrations'")}
        rows = (await conn.fetchval("SELECT count(*) FROM backlog.work_backlog_items") if "backlog" in schemas else -1)
        return await conn.fetchval("SELECT current_database()"), schemas, rows
    finally:
        await conn.close()


async def test_database_is_real_migrated_and_fresh(database_url: str) -> None:
    name, schemas, rows = await _facts(database_url)
    assert name.startswith("t_")
    assert schemas == {"backlog", "spot_gate", "sweeper", "alerts"} and rows == 0


async def test_a_written_row_stays_in_its_tests_database(database_url: str, empty_database_url: str) -> None:
    """Writing in one test's copy leaves the template, and so the next test's copy, unchanged."""
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await conn.execute("CREATE TABLE backlog.scratch (id int); INSERT INTO backlog.scratch VALUES (1)")
    finally:
        await conn.close()
    template = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        source = await template.fetchval("SELECT datname FROM pg_database WHERE datname LIKE 'zimmer_template_%'")
    finally:
        await template.close()
    assert source is not None
    copy = await asyncpg.connect(asyncpg_dsn(with_database(database_url, source)))
    try:
        assert await copy.fetchval("SELECT to_regclass('backlog.scratch')") is None
    finally:
        await copy.close()
    name, schemas, rows = await _facts(empty_database_url)
    assert name.startswith("t_") and name not in database_url and schemas == set() and rows == -1


async def test_nats_has_jetstream(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().account_info()
        assert info.streams == 0
    finally:
        await nc.close()
