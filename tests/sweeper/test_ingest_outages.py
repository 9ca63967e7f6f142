"""The log ingest across a NATS kill -9: lines published before the kill and after the restart
are all stored, each once. (A PostgreSQL that fails every write is in test_ingest_robustness.py;
the sweeper's own kill -9 in test_ingest_crash.py.)"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from sweeping import T0, eventually, publish_lines, seed_sessions  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path

from zimmer_cli.embedded import free_port, start_nats
from zimmer_common.clock import FrozenClock
from zimmer_common.errors import ZimmerError
from zimmer_spot_gate.service import build as build_spot
from zimmer_sweeper.service import build


async def test_nats_killed_mid_ingest_loses_nothing_and_doubles_nothing(settings_factory, sql, tmp_path: Path,
                                                                        database_url: str) -> None:
    port, store = free_port(), tmp_path / "killable-nats"
    server = await asyncio.to_thread(start_nats, store, port=port)
    spot = build_spot(settings_factory(nats_url=server.url), clock=FrozenClock(T0))  # says which sessions exist
    await spot.start()
    await seed_sessions(database_url)
    svc = build(settings_factory(nats_url=server.url), clock=FrozenClock(T0))
    await svc.start()
    try:
        await publish_lines(svc.bus, [(f"a-{i}", 1 + i % 13, "info", f"before {i}") for i in range(5_000)])

        async def started() -> bool:
            return (await sql("SELECT count(*) AS n FROM sweeper.logs"))[0]["n"] > 0

        await eventually(started, "the first lines")
        server.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(server.process.wait)
        await asyncio.sleep(2)  # the ingest loop keeps trying while NATS is gone
        server = await asyncio.to_thread(start_nats, store, port=port)
        for _attempt in range(100):  # the runtime retries its publish until the bus takes it again
            try:
                await publish_lines(svc.bus, [(f"b-{i}", 1 + i % 13, "warning", f"after {i}") for i in range(5_000)])
                break
            except ZimmerError:
                await asyncio.sleep(0.2)
        else:
            raise AssertionError("the restarted NATS never took a publish")

        async def all_stored() -> bool:
            return (await sql("SELECT count(*) AS n FROM sweeper.logs"))[0]["n"] >= 10_000

        await eventually(all_stored, "every line from both sides of the kill", within=90)
        await asyncio.sleep(2)
        rows = await sql("SELECT count(*) AS n, count(DISTINCT message_id) AS ids FROM sweeper.logs")
        assert (rows[0]["n"], rows[0]["ids"]) == (10_000, 10_000)
    finally:
        await svc.stop()
        await spot.stop()
        await asyncio.to_thread(server.stop)
