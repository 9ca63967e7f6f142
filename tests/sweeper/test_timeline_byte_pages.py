"""A session's timeline pages by bytes as well as by count (issue 27 #13, found in the sweeper's
log lists): 80 lines of 16,000 characters are 1.3 MB, more than one bus message, and asking for
1,000 of them used to be a `too_large` answer. Now a page carries the lines that fit and a cursor,
and following it reads every line exactly once. Real NATS, PostgreSQL and the sweeper."""

from __future__ import annotations

import json

from sweeping import T0, eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts import logs as c

LINES = 80
LONG = 16_000


def line(n: int) -> bytes:
    data = {"session_id": 3, "level": "info", "at": T0.isoformat(), "message": f"{n:03d}" + "m" * LONG}
    return json.dumps({"id": f"big-{n}", "type": "log_line", "version": 1, "source": "runtime",
                       "occurred_at": T0.isoformat(), "data": data}).encode()


async def test_a_timeline_too_large_for_one_message_pages_by_bytes(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await sweeper.bus.publish_many([(c.INGEST_LOGS, line(n), f"big-{n}") for n in range(LINES)])

    async def written() -> bool:
        return len(await sql("SELECT 1 FROM sweeper.logs WHERE session_id = 3")) == LINES

    await eventually(written, "the long lines", within=30)
    seen: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        page = await sweeper.bus.request(c.GET_SESSION_LOGS, c.LogQuery(session_id=3, limit=1000, cursor=cursor))
        pages += 1
        seen += [entry.message[:3] for entry in page.lines]
        if page.next_cursor is None:
            break
        assert page.lines, "a page that carried nothing"
        cursor = page.next_cursor
        assert pages <= LINES
    assert seen == [f"{n:03d}" for n in range(LINES)] and pages > 1
