"""Migration 0007 (issue 27): a backlog that already holds one issue under several spellings ends
with one open row per issue, the best-ranked kept, the rest superseded, each change in the ledger;
and the database refuses a second open row for an issue from then on, whatever its key."""

from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path

import asyncpg
import pytest

from zimmer_common.db import asyncpg_dsn, migrate

BEFORE = "0007"
URL = "https://github.com/{}/issues/{}"


@pytest.fixture
def migrations_before_0007(tmp_path: Path):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """The backlog's migrations as they were before 0007, as a package of their own."""
    pkg = tmp_path / "backlog_before_0007"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for f in resources.files("zimmer_backlog.migrations").iterdir():
        if f.name.endswith(".sql") and f.name < BEFORE:
            shutil.copyfile(str(f), pkg / f.name)
    sys.path.insert(0, str(tmp_path))
    try:
        yield pkg.name
    finally:
        sys.path.remove(str(tmp_path))


async def insert(conn: asyncpg.Connection, key: str, issue_url: str | None, precedence: int, status: str = "queued",
                 **extra: object) -> int:
    columns = {"key": key, "issue_url": issue_url, "estimated_cost": "small", "added_via": "rest",
               "precedence": precedence, "status": status, **extra}
    if status == "removed":
        columns.setdefault("removal_reason", "issue_closed")
    names = ", ".join(columns)
    marks = ", ".join(f"${n}" for n in range(1, len(columns) + 1))
    return int(await conn.fetchval(
        f"INSERT INTO backlog.work_backlog_items ({names}) VALUES ({marks}) RETURNING id", *columns.values()))


async def test_duplicates_merge_into_the_best_ranked_row_and_the_database_keeps_it_so(
        empty_database_url: str, migrations_before_0007: str) -> None:
    await migrate(empty_database_url, "backlog", migrations_before_0007)
    conn = await asyncpg.connect(asyncpg_dsn(empty_database_url))
    try:
        # The four spellings the issue found, all queued for acme/zimmer#1; the third ranks best.
        plain = await insert(conn, "zimmer#1", URL.format("acme/zimmer", 1), 5990)
        owned = await insert(conn, "acme/zimmer#1", URL.format("acme/zimmer", 1), 5980)
        shouted = await insert(conn, "ZIMMER#1", URL.format("acme/zimmer", 1), 6000)
        cased = await insert(conn, "Zimmer#1", URL.format("ACME/Zimmer", 1), 5970)
        history = await insert(conn, "Zimmer#1", URL.format("acme/zimmer", 1), 5000, status="started")
        # Another owner's repository of the same name: a different issue, still open, keeps its row.
        elsewhere = await insert(conn, "other/zimmer#1", URL.format("other/zimmer", 1), 5960)
        issueless = await insert(conn, "manual-tidy", None, 5950, added_via="operator")
    finally:
        await conn.close()

    applied = await migrate(empty_database_url, "backlog", "zimmer_backlog.migrations")
    assert applied[0] == "service/0007_one_open_row_per_issue"

    conn = await asyncpg.connect(asyncpg_dsn(empty_database_url))
    try:
        rows = {r["id"]: r for r in await conn.fetch("SELECT * FROM backlog.work_backlog_items")}
        assert rows[shouted]["status"] == "queued" and rows[shouted]["key"] == "zimmer#1"
        for dup in (plain, owned, cased):
            assert rows[dup]["status"] == "removed"
            assert rows[dup]["removal_reason"] == "superseded" and rows[dup]["liveness_state"] == "superseded"
            assert rows[dup]["key"] == "zimmer#1"
        assert rows[history]["status"] == "started" and rows[history]["key"] == "zimmer#1"
        assert rows[elsewhere]["status"] == "queued" and rows[elsewhere]["key"] == "other/zimmer#1"
        assert rows[issueless]["key"] == "manual-tidy" and rows[issueless]["status"] == "queued"

        ledger = {(r["item_id"], r["action"]): r for r in await conn.fetch("SELECT * FROM backlog.key_merges")}
        assert set(ledger) == {(plain, "superseded"), (owned, "superseded"), (cased, "superseded"),
                               (shouted, "rekeyed"), (history, "rekeyed"), (elsewhere, "kept_spelling")}
        assert {ledger[(d, "superseded")]["kept_item_id"] for d in (plain, owned, cased)} == {shouted}
        assert ledger[(cased, "superseded")]["old_key"] == "Zimmer#1"

        # From now on the database holds one open row per issue, whatever the key is spelled.
        with pytest.raises(asyncpg.UniqueViolationError, match="one_open_row_per_issue"):
            await insert(conn, "odd-spelling#1", URL.format("Acme/ZIMMER", 1), 5000)
        # A started row beside the open one is history, as before.
        await insert(conn, "zimmer#1", URL.format("acme/zimmer", 1), 5000, status="started")
    finally:
        await conn.close()
