"""Idempotent durable consumers: once per event id, retried on failure, terminated when unreadable."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.bus import Bus
from zimmer_common.consumer import ConsumerSpec, DurableConsumer
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.subjects import Stream, event_subject
from zimmer_common.db import create_engine, migrate
from zimmer_common.streams import provision_streams

SUBJECT = event_subject("spot", "session_status_changed")


@pytest.fixture
async def env(database_url: str, nats_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    await migrate(database_url, "backlog", None)
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE backlog.seen (id text, n int)"))
    bus = await Bus.connect([nats_url], service="backlog", instance_id="t", rpc_timeout=2)
    await provision_streams(bus)
    yield engine, bus
    await bus.close()
    await engine.dispose()


def envelope(event_id: str, version: int = 1, n: int = 1) -> bytes:
    return EventEnvelope(id=event_id, type="session_status_changed", version=version, source="spot-gate",
                         occurred_at=datetime.now(UTC), data={"n": n}).model_dump_json().encode()


async def seen(engine) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(text("SELECT id, n FROM backlog.seen ORDER BY id"))).all()]


async def wait_for(predicate, within: float = 15.0) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    deadline = asyncio.get_running_loop().time() + within
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_each_event_id_is_handled_once_and_failures_are_retried(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    failures = {"left": 1}

    async def handle(conn: AsyncConnection, event: EventEnvelope) -> None:
        await conn.execute(text("INSERT INTO backlog.seen VALUES (:i, :n)"), {"i": event.id, "n": event.data["n"]})
        if event.id == "e2" and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("transient: the insert above must roll back with the claim")

    consumer = DurableConsumer(bus, engine, schema="backlog", handler=handle,
                               spec=ConsumerSpec("backlog_sessions", Stream.EVENTS, (SUBJECT,)))
    await consumer.start()
    try:
        await bus.publish(SUBJECT, envelope("e1"), msg_id="a")
        # The same event again under another stream id: past JetStream's dedupe, so only the
        # consumer's own record stops a second effect.
        await bus.publish(SUBJECT, envelope("e1"), msg_id="b")
        await bus.publish(SUBJECT, envelope("e2", n=2), msg_id="c")

        async def both_handled() -> bool:
            return await seen(engine) == [("e1", 1), ("e2", 2)]

        await wait_for(both_handled)
        await asyncio.sleep(0.5)
        assert await seen(engine) == [("e1", 1), ("e2", 2)]
    finally:
        await consumer.stop()


async def test_unreadable_and_newer_version_messages_are_terminated(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    handled: list[str] = []

    async def handle(conn: AsyncConnection, event: EventEnvelope) -> None:
        handled.append(event.id)

    consumer = DurableConsumer(bus, engine, schema="backlog", handler=handle,
                               spec=ConsumerSpec("backlog_sessions", Stream.EVENTS, (SUBJECT,)))
    await consumer.start()
    try:
        await bus.publish(SUBJECT, b"not json")
        await bus.publish(SUBJECT, envelope("future", version=2))
        await bus.publish(SUBJECT, envelope("fine"))

        async def fine_handled() -> bool:
            return handled == ["fine"]

        await wait_for(fine_handled)
        info = await bus.js.consumer_info(Stream.EVENTS.value, "backlog_sessions")
        assert info.num_pending == 0 and info.num_ack_pending == 0  # nothing left to redeliver
    finally:
        await consumer.stop()


async def test_a_burst_of_unreadable_messages_is_one_page_not_one_each(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A misbehaving publisher's garbage: every message terminated, one page for the burst (each
    was a page and an ERROR line before), and the window's next page counts what it left out."""
    engine, bus = env
    handled: list[str] = []
    pages: list[tuple[str, str, dict[str, object]]] = []

    async def handle(conn: AsyncConnection, event: EventEnvelope) -> None:
        handled.append(event.id)

    async def page(title: str, message: str, fingerprint: list[str], snippet: object,
                   context: dict[str, object]) -> None:
        pages.append((title, message, context))

    consumer = DurableConsumer(bus, engine, schema="backlog", handler=handle, page=page,
                               spec=ConsumerSpec("backlog_sessions", Stream.EVENTS, (SUBJECT,)))
    await consumer.start()
    try:
        for n in range(30):
            await bus.publish(SUBJECT, f"garbage {n}".encode())
        await bus.publish(SUBJECT, envelope("fine"))

        async def fine_handled() -> bool:
            return handled == ["fine"]

        await wait_for(fine_handled)
        info = await bus.js.consumer_info(Stream.EVENTS.value, "backlog_sessions")
        assert info.num_pending == 0 and info.num_ack_pending == 0
        assert [p[0] for p in pages] == ["Undecodable message terminated"]
        consumer._terminations.every = 0.0  # the window has passed
        await bus.publish(SUBJECT, b"garbage again")
        await wait_for(lambda: _true(len(pages) == 2))
        assert "(29 more terminated since the last page)" in pages[1][1] and pages[1][2]["more_since_last_page"] == 29
    finally:
        await consumer.stop()


async def _true(value: bool) -> bool:
    return value


async def test_after_commit_runs_once_the_effects_are_visible(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A cache invalidated from `after_commit` is refilled from the committed rows: the hook runs
    after the commit, when another connection already sees the effect, and once per new event."""
    engine, bus = env
    observed: list[list[tuple[str, int]]] = []
    pending: list[asyncio.Task[None]] = []

    async def look() -> None:
        observed.append(await seen(engine))

    async def handle(conn: AsyncConnection, event: EventEnvelope) -> None:
        await conn.execute(text("INSERT INTO backlog.seen VALUES (:i, :n)"), {"i": event.id, "n": event.data["n"]})

    spec = ConsumerSpec("after_commit_probe", Stream.EVENTS, (SUBJECT,),
                        after_commit=lambda: pending.append(asyncio.ensure_future(look())))
    consumer = DurableConsumer(bus, engine, schema="backlog", spec=spec, handler=handle)
    await consumer.start()
    try:
        await bus.publish(SUBJECT, envelope("a1"), msg_id="a1")
        await bus.publish(SUBJECT, envelope("a1"), msg_id="a1-again")  # a redelivered copy: no second hook

        async def one_hook() -> bool:
            return len(pending) == 1
        await wait_for(one_hook)
        await asyncio.gather(*pending)
        assert observed == [[("a1", 1)]]
        await asyncio.sleep(0.5)
        assert len(pending) == 1
    finally:
        await consumer.stop()


async def test_a_message_whose_transaction_wrote_events_wakes_the_relay_and_one_that_did_not_does_not(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A consumer's events leave when its transaction commits, not at the relay's next poll; a
    message that announced nothing (most ingest) costs the relay no pass."""
    from zimmer_common.outbox import emit

    engine, bus = env
    kicks: list[str] = []

    async def handle(conn: AsyncConnection, event: EventEnvelope) -> None:
        await conn.execute(text("INSERT INTO backlog.seen VALUES (:i, :n)"), {"i": event.id, "n": event.data["n"]})
        if event.data["n"] == 2:
            await emit(conn, "backlog", event_subject("backlog", "thing_happened"), "thing_happened", {"id": event.id})
        if event.data["n"] == 3:  # an event written, then the transaction rolls back: no kick for it
            await emit(conn, "backlog", event_subject("backlog", "thing_happened"), "thing_happened", {"id": event.id})
            raise ValueError("refused")

    consumer = DurableConsumer(bus, engine, schema="backlog", handler=handle, kick=lambda: kicks.append("kick"),
                               spec=ConsumerSpec("backlog_sessions", Stream.EVENTS, (SUBJECT,)))
    await consumer.start()
    try:
        await bus.publish(SUBJECT, envelope("quiet", n=1), msg_id="q")
        await bus.publish(SUBJECT, envelope("refused", n=3), msg_id="r")
        await bus.publish(SUBJECT, envelope("loud", n=2), msg_id="l")
        await bus.publish(SUBJECT, envelope("quiet-2", n=1), msg_id="q2")

        async def handled() -> bool:
            return [i for i, _ in await seen(engine)] == ["loud", "quiet", "quiet-2"]

        await wait_for(handled)
        assert kicks == ["kick"]
    finally:
        await consumer.stop()
