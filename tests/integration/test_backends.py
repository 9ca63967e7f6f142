"""The fixtures give real servers: a JetStream-enabled NATS and a PostgreSQL with its own database."""

import asyncpg
import nats


async def test_database_is_real_and_fresh(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        assert (await conn.fetchval("SELECT current_database()")).startswith("t_")
        assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = 'backlog'") == 0
    finally:
        await conn.close()


async def test_nats_has_jetstream(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().account_info()
        assert info.streams == 0
    finally:
        await nc.close()
