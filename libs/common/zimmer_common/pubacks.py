"""JetStream's acknowledgements of `Bus.publish_many`, read on one wildcard inbox per connection.

A JetStream publish is a core NATS publish with a reply subject; the stream answers there once
the message is stored. nats-py's `publish_async` wraps each one in more work than the publish
itself (a semaphore wait, a token read from the operating system's random source, a done
callback, an ack dataclass): 57–96 µs of CPU a message on the 2-core benchmark box against
30–45 µs this way (bench/README.md, *Profile of the admission path*). Each message gets a
token of its own under the connection's inbox; the ack resolves the token's future with the
stream sequence, or with the reason it was not stored.
"""

from __future__ import annotations

import asyncio
import itertools
import json

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

NO_RESPONDERS = "503"  # the status of a reply nobody sent: no stream leader took the message


class NoStreamAnswered(RuntimeError):
    """Nobody stored the message: its stream has no leader (an election, or a lost quorum), or no
    stream takes its subject."""


class PublishAcks:
    def __init__(self, prefix: str):
        self.prefix = prefix  # "<inbox>.": a message's token follows it
        self._waiting: dict[str, asyncio.Future[int]] = {}
        self._tokens = itertools.count()

    @classmethod
    async def subscribe(cls, nc: NatsClient) -> PublishAcks:
        acks = cls(nc.new_inbox() + ".")
        await nc.subscribe(acks.prefix + "*", cb=acks.on_ack)
        return acks

    def expect(self) -> tuple[str, asyncio.Future[int]]:
        """A fresh token, and the future its ack resolves."""
        token = str(next(self._tokens))
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        return token, future

    def forget(self, token: str) -> None:
        """Stop waiting for a token's ack (its batch failed or timed out)."""
        self._waiting.pop(token, None)

    async def on_ack(self, msg: Msg) -> None:
        future = self._waiting.pop(msg.subject[len(self.prefix):], None)
        if future is None or future.done():
            return  # nobody waits for it any more
        if msg.headers and msg.headers.get("Status") == NO_RESPONDERS:
            future.set_exception(NoStreamAnswered("no stream leader answered"))
            return
        try:
            ack = json.loads(msg.data)
        except ValueError:
            future.set_exception(RuntimeError(f"unreadable ack {msg.data[:200]!r}"))
            return
        if "error" in ack:
            future.set_exception(RuntimeError(f"not stored: {ack['error']}"))
        else:
            future.set_result(int(ack["seq"]))
