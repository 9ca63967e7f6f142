"""Each table is declared once, as a SQLModel table model, and the migrations build it: this checks
that the two agree, column by column (name, type, nullability, whether the database supplies a
default, primary key), and that every table a service's migrations create has its model. A
migration that adds a column without the model (or the reverse) fails here, not in production."""

from __future__ import annotations

import importlib
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql
from sqlmodel import SQLModel

from zimmer_common.db import asyncpg_dsn, migrate

SERVICES = [("backlog", "zimmer_backlog.migrations", "zimmer_backlog.store.tables"),
            ("alerts", "zimmer_alerts.migrations",
             "zimmer_alerts.store.tables,zimmer_alerts.store.health_tables,zimmer_alerts.store.history_tables"),
            ("spot_gate", "zimmer_spot_gate.migrations", "zimmer_spot_gate.store.tables,zimmer_spot_gate.store.history_tables"),
            ("sweeper", "zimmer_sweeper.migrations",
             "zimmer_sweeper.logs.tables,zimmer_sweeper.disk.tables,zimmer_sweeper.trash.tables,zimmer_sweeper.transcripts.tables")]


# The catalog names an array's element type by its internal name; SQLAlchemy compiles the SQL name.
UDT_NAMES = {"int8": "bigint", "int4": "integer", "int2": "smallint", "bool": "boolean"}


async def _columns(conn: Any, schema: str) -> dict[str, dict[str, tuple[str, bool, bool]]]:
    """table → column → (type, nullable, has a database default). A partition is its parent's
    table (sweeper.logs_verbose is sweeper.logs), so partitions are left out."""
    tables: dict[str, dict[str, tuple[str, bool, bool]]] = {}
    for r in await conn.fetch("SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default, "
                              "is_identity FROM information_schema.columns c WHERE table_schema = $1 AND NOT EXISTS ("
                              "SELECT 1 FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace "
                              "WHERE n.nspname = c.table_schema AND k.relname = c.table_name AND k.relispartition)",
                              schema):
        # An array's data_type is just ARRAY; its element type is the udt's name after the underscore.
        element = r["udt_name"].lstrip("_")
        kind = f"{UDT_NAMES.get(element, element)}[]" if r["data_type"] == "ARRAY" else r["data_type"]
        tables.setdefault(r["table_name"], {})[r["column_name"]] = (
            kind, r["is_nullable"] == "YES", r["column_default"] is not None or r["is_identity"] == "YES")
    return tables


async def _primary_keys(conn: Any, schema: str) -> dict[str, set[str]]:
    keys: dict[str, set[str]] = {}
    for r in await conn.fetch(
            "SELECT tc.table_name, kcu.column_name FROM information_schema.table_constraints tc "
            "JOIN information_schema.key_column_usage kcu USING (constraint_schema, constraint_name) "
            "WHERE tc.table_schema = $1 AND tc.constraint_type = 'PRIMARY KEY'", schema):
        keys.setdefault(r["table_name"], set()).add(r["column_name"])
    return keys


def _declared(table: Table) -> dict[str, tuple[str, bool, bool]]:
    dialect = postgresql.dialect()
    return {c.name: (c.type.compile(dialect=dialect).lower(), bool(c.nullable),
                     c.server_default is not None or c.identity is not None) for c in table.columns}


@pytest.mark.parametrize(("schema", "migrations", "tables_module"), SERVICES)
async def test_table_models_match_what_the_migrations_build(empty_database_url: str, schema: str, migrations: str,
                                                            tables_module: str) -> None:
    for module in tables_module.split(","):  # a service may declare its tables in several modules
        importlib.import_module(module)
    await migrate(empty_database_url, "plumbing_only", None)  # the shared plumbing tables have no models here
    await migrate(empty_database_url, schema, migrations)
    conn = await asyncpg.connect(asyncpg_dsn(empty_database_url))
    try:
        plumbing = set(await _columns(conn, "plumbing_only"))
        built = {t: cols for t, cols in (await _columns(conn, schema)).items() if t not in plumbing}
        primary = await _primary_keys(conn, schema)
    finally:
        await conn.close()
    models = {t.name: t for t in SQLModel.metadata.tables.values() if t.schema == schema}
    assert set(models) == set(built), f"tables without a model: {set(built) - set(models)}; " \
                                      f"models without a table: {set(models) - set(built)}"
    for name, table in models.items():
        assert _declared(table) == built[name], f"{schema}.{name} differs from its migrations"
        assert {c.name for c in table.primary_key.columns} == primary.get(name, set()), f"{schema}.{name} primary key"
