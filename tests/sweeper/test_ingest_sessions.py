"""Log lines for a session that never existed are refused at ingest (issue 26 #10): in the seed a
log row belonged to its session by foreign key; here spot-gate, which owns the sessions, is asked,
once per new session. Its silence is not "no such session": the batch waits and is written when
it answers. Real PostgreSQL, NATS, spot-gate and sweeper."""

from __future__ import annotations

import json

from sweeping import KNOWN_SESSIONS, T0, eventually, publish_lines  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_common.contracts.logs import INGEST_LOGS
from zimmer_common.contracts.subjects import Stream
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.logs.ingest import DURABLE

NEVER = KNOWN_SESSIONS + 4242


async def _settled(sweeper) -> bool:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    info = await sweeper.bus.js.consumer_info(Stream.INGEST.value, DURABLE)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def test_a_line_for_a_session_that_never_existed_is_refused_and_paged_and_its_batch_kept(
        sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    line = {"session_id": 5, "level": "info", "at": T0.isoformat()}
    batch = {"id": "mixed", "type": "log_lines", "version": 1, "source": "runtime", "occurred_at": T0.isoformat(),
             "data": {"lines": [{**line, "message_id": "real-1", "message": "kept"},
                                {**line, "message_id": "ghost-1", "session_id": NEVER, "message": "nobody's"},
                                {**line, "message_id": "ghost-2", "session_id": NEVER, "message": "nobody's"},
                                {**line, "message_id": "real-2", "message": "kept too"}]}}
    await sweeper.bus.publish_many([(INGEST_LOGS, json.dumps(batch).encode(), "mixed")])

    async def written() -> bool:
        return await _settled(sweeper) and len(await sql("SELECT 1 FROM sweeper.logs")) == 2

    await eventually(written, "the real session's two lines")
    assert {r["message_id"] for r in await sql("SELECT message_id FROM sweeper.logs")} == {"real-1", "real-2"}
    assert not await sql("SELECT 1 FROM sweeper.logs WHERE session_id = $1", NEVER)
    assert sweeper.app.metrics.lines.labels("refused")._value.get() == 2
    refused = await sql("SELECT payload::jsonb->'data' AS page FROM sweeper.outbox WHERE event_type = 'page' "
                        "AND payload::jsonb->'data'->>'title' = 'Log lines refused'")
    assert len(refused) == 1
    assert f"session {NEVER} does not exist: 2 line(s)" in refused[0]["page"]


async def test_a_known_session_is_asked_about_once(sweeper, sql) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    known = sweeper.app.ingest.sessions
    for round_no in range(5):
        await publish_lines(sweeper.bus, [(f"r{round_no}-{i}", 7, "info", f"line {i}") for i in range(20)])

        async def written(n: int = (round_no + 1) * 20) -> bool:
            return len(await sql("SELECT 1 FROM sweeper.logs")) == n

        await eventually(written, f"round {round_no}")
    assert known.asked == 1


async def test_spot_gate_silent_holds_the_batch_until_it_answers(sweeper, spot, sql, settings_factory,
                                                                 clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """No answer is not "no such session": nothing is refused, nothing is lost, the batch waits in
    JetStream and is written once spot-gate is back."""
    sweeper.app.ingest.sessions.timeout = 0.5
    await spot.stop()
    await publish_lines(sweeper.bus, [(f"held-{i}", 12, "warning", f"line {i}") for i in range(30)])

    async def tried() -> bool:
        return sweeper.app.ingest._failures >= 1  # noqa: SLF001 - the loop's own count of failed batches

    await eventually(tried, "a batch tried while spot-gate is down")
    assert not await sql("SELECT 1 FROM sweeper.logs")
    assert sweeper.app.metrics.lines.labels("refused")._value.get() == 0
    back = build_spot(settings_factory(), clock=clock)
    await back.start()
    try:
        async def written() -> bool:
            return len(await sql("SELECT 1 FROM sweeper.logs")) == 30

        await eventually(written, "every held line once spot-gate answers", within=60)
        assert sweeper.app.metrics.lines.labels("refused")._value.get() == 0
    finally:
        await back.stop()
