"""Issue 27 #13: the import meets the payload bound an append meets (64 KB as compact JSON), on
the payload the row would store (the source's payload with its unknown fields folded in); a
larger one is skipped as `invalid`, naming the limit. Real PostgreSQL, a real file."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text

from zimmer_backlog.importer import FileSource, import_backlog
from zimmer_common.contracts.fields import PAYLOAD_MAX_BYTES
from zimmer_common.settings import Environment


def entry(n: int, **extra: object) -> dict[str, object]:
    return {"id": f"p{n}", "key": f"zimmer#{n}", "issue_url": f"https://github.com/acme/zimmer/issues/{n}",
            "estimated_cost": "small", "precedence": 6000 - n, **extra}


async def test_an_item_whose_payload_passes_64_kb_is_skipped_as_invalid(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    source = tmp_path / "backlog.json"
    source.write_text(json.dumps([
        entry(1, payload={"note": "x" * 1000}),
        entry(2, payload={"note": "x" * 600_000}),
        entry(3, notes="x" * 40_000, payload={"more": "y" * 40_000}),  # over only once folded together
    ]))
    report = await import_backlog(engine, source=FileSource(source), env=Environment.TEST)
    assert report.inserted == 1 and report.error is None
    assert [(s.id, s.reason) for s in report.skipped] == [("p2", "invalid"), ("p3", "invalid")]
    assert all(f"{PAYLOAD_MAX_BYTES:,}" in s.detail and "payload" in s.detail for s in report.skipped)
    async with engine.connect() as conn:
        keys = (await conn.execute(text("SELECT key FROM backlog.work_backlog_items ORDER BY id"))).scalars().all()
    assert keys == ["zimmer#1"]
