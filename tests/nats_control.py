"""A NATS server a test may kill -9, or stop, and start again on the same port and store: the
runtime client's reconnect tests and the live pages' "Live updates paused" tests. Beside the root
conftest, so any test directory imports it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from zimmer_cli.embedded import EmbeddedNats, free_port, start_nats


@dataclass
class KillableNats:
    store: Path
    port: int
    server: EmbeddedNats

    @property
    def url(self) -> str:
        return self.server.url

    async def kill(self) -> None:
        self.server.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.server.process.wait, 5)

    async def stop(self) -> None:
        """A graceful stop (the server flushes its store)."""
        await asyncio.to_thread(self.server.stop)

    async def start(self) -> None:
        self.server = await asyncio.to_thread(start_nats, self.store, port=self.port)


@asynccontextmanager
async def killable_server(tmp_path: Path) -> AsyncIterator[KillableNats]:
    """A NATS server the test may kill or stop and start again on the same port and store (the
    `killable_nats` fixtures of tests/runtime and the live pages' tests)."""
    port, store = free_port(), tmp_path / "killable-nats"
    nats = KillableNats(store, port, await asyncio.to_thread(start_nats, store, port=port))
    try:
        yield nats
    finally:
        await asyncio.to_thread(nats.server.stop)
