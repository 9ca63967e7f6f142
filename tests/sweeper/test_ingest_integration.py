"""Log lines arrive over `zimmer.ingest.logs` and are written once each, into the day partition of
the time they were written; the timeline reads them back."""

from __future__ import annotations

from sweeping import eventually, publish_lines  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts.logs import GET_SESSION_LOGS, LogQuery


async def test_lines_are_written_once_and_read_back_in_order(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await publish_lines(sweeper.bus, [(f"m-{i}", 7, "verbose" if i % 3 == 0 else "info", f"line {i}")
                                      for i in range(30)])
    await publish_lines(sweeper.bus, [("m-0", 7, "verbose", "line 0 again")])  # a re-publish: same id

    async def written() -> bool:
        return (await sql("SELECT count(*) AS n FROM sweeper.logs"))[0]["n"] == 30

    await eventually(written, "30 rows")
    parts = {r["tableoid"] for r in await sql("SELECT tableoid::regclass::text FROM sweeper.logs")}
    assert parts == {"sweeper.logs_verbose_p20261201", "sweeper.logs_other_p20261201"}
    page = await sweeper.bus.request(GET_SESSION_LOGS, LogQuery(session_id=7, limit=5))
    assert [line.message for line in page.lines] == ["line 1", "line 2", "line 4", "line 5", "line 7"]
    seen = []
    cursor = None
    while True:
        page = await sweeper.bus.request(GET_SESSION_LOGS, LogQuery(session_id=7, limit=7, cursor=cursor,
                                                                    levels=["verbose", "info"]))
        seen += [line.message for line in page.lines]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"line {i}" for i in range(30)]
