"""Transactional outbox: nothing lost, nothing doubled (DESIGN §5)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig
from sqlalchemy import text

from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import EventEnvelope, Payload
from zimmer_common.contracts.subjects import Stream, event_subject
from zimmer_common.db import create_engine, migrate, with_database
from zimmer_common.outbox import RELAY_BATCH, OutboxRelay, claim_message, emit, prune_outbox
from zimmer_common.streams import provision_streams

SCHEMA = "backlog"
SUBJECT = event_subject("backlog", "thing_happened")


class ThingHappened(Payload):
    thing: str


@pytest.fixture
async def env(database_url: str, nats_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    await migrate(database_url, SCHEMA, None)
    engine = create_engine(database_url)
    bus = await Bus.connect([nats_url], service="backlog", instance_id="t", rpc_timeout=2)
    await provision_streams(bus)
    yield engine, bus
    await bus.close()
    await engine.dispose()


async def deliveries(bus: Bus, durable: str = "probe") -> list[EventEnvelope]:
    """Everything a fresh durable consumer of SUBJECT is delivered, acked as it goes."""
    await bus.js.add_consumer(Stream.EVENTS.value, ConsumerConfig(durable_name=durable, filter_subject=SUBJECT,
                                                                  ack_policy=AckPolicy.EXPLICIT))
    sub = await bus.js.pull_subscribe_bind(durable, stream=Stream.EVENTS.value)
    got: list[EventEnvelope] = []
    try:
        while True:
            try:
                msgs = await sub.fetch(10, timeout=0.5)
            except (TimeoutError, NatsTimeout):
                return got
            for m in msgs:
                got.append(EventEnvelope.model_validate_json(m.data))
                await m.ack()
    finally:
        await sub.unsubscribe()


async def test_committed_event_is_relayed_once_with_its_id(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    async with engine.begin() as conn:
        row_id = await emit(conn, SCHEMA, SUBJECT, "thing_happened", ThingHappened(thing="a"))
    relay = OutboxRelay(engine, bus, schema=SCHEMA, source="backlog")
    assert await relay.relay_once() == 1
    assert await relay.relay_once() == 0
    got = await deliveries(bus)
    async with engine.connect() as conn:
        event_id = (await conn.execute(text("SELECT event_id FROM backlog.outbox WHERE id = :i"), {"i": row_id})).scalar_one()
    assert [(e.id, e.type, e.version, e.data) for e in got] == [
        (f"backlog.{event_id}", "thing_happened", 1, {"thing": "a"})]
    assert await relay.pending() == 0


async def test_rolled_back_change_announces_nothing(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    with contextlib.suppress(RuntimeError):
        async with engine.begin() as conn:
            await emit(conn, SCHEMA, SUBJECT, "thing_happened", ThingHappened(thing="never"))
            raise RuntimeError("the state change failed")
    relay = OutboxRelay(engine, bus, schema=SCHEMA, source="backlog")
    assert await relay.relay_once() == 0
    assert await deliveries(bus) == []


async def test_crash_between_publish_and_mark_delivers_exactly_once(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    async with engine.begin() as conn:
        for thing in ("a", "b", "c"):
            await emit(conn, SCHEMA, SUBJECT, "thing_happened", ThingHappened(thing=thing))

    crashing = OutboxRelay(engine, bus, schema=SCHEMA, source="backlog")
    published: list[int] = []

    async def crash_after_second(row_id: int) -> None:
        published.append(row_id)
        if len(published) == 2:
            raise ConnectionResetError("process died before marking the rows sent")

    crashing.after_publish = crash_after_second
    with pytest.raises(ConnectionResetError):
        await crashing.relay_once()
    # Two events reached JetStream, none is marked: the next relay must send all three again.
    assert await crashing.pending() == 3

    recovered = OutboxRelay(engine, bus, schema=SCHEMA, source="backlog")
    assert await recovered.relay_once() == 3
    assert await recovered.pending() == 0
    got = await deliveries(bus)
    assert [e.data["thing"] for e in got] == ["a", "b", "c"]  # once each, in order
    info = await bus.js_api(f"STREAM.INFO.{Stream.EVENTS.value}", {"subjects_filter": SUBJECT})
    assert info["state"]["subjects"][SUBJECT] == 3


async def test_only_the_relays_own_mark_skips_the_wal_flush(env, database_url: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The relay commits its marks without waiting for the flush (a lost mark is a republish under
    the same id, above); the connection goes back to the pool with synchronous commits, so the
    state changes and events committed on it next are durable when their commit returns."""
    _, bus = env
    engine = create_engine(database_url, pool_size=1, max_overflow=0)  # the relay's connection is the next caller's
    try:
        async with engine.begin() as conn:
            await emit(conn, SCHEMA, SUBJECT, "thing_happened", ThingHappened(thing="a"))
        relay = OutboxRelay(engine, bus, schema=SCHEMA, source="backlog")
        assert await relay.relay_once() == 1
        async with engine.begin() as conn:
            after = (await conn.execute(text("SHOW synchronous_commit"))).scalar_one()
        assert after == "on"
    finally:
        await engine.dispose()


async def test_run_loop_relays_after_a_kick(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    relay = OutboxRelay(engine, bus, schema=SCHEMA, source="backlog", poll_interval=30)
    task = asyncio.create_task(relay.run())
    try:
        await asyncio.sleep(0.2)
        async with engine.begin() as conn:
            await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "kicked"})
        relay.kick()  # the poll interval is 30 s: only the kick can get it out in time
        for _ in range(50):
            if await relay.pending() == 0:
                break
            await asyncio.sleep(0.1)
        assert await relay.pending() == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_idempotent_consumer_claims_once_and_rollback_releases(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, _bus = env
    async with engine.begin() as conn:
        assert await claim_message(conn, SCHEMA, "counts", "backlog.outbox.1") is True
        assert await claim_message(conn, SCHEMA, "counts", "backlog.outbox.1") is False
        assert await claim_message(conn, SCHEMA, "other-consumer", "backlog.outbox.1") is True
    with contextlib.suppress(RuntimeError):
        async with engine.begin() as conn:
            assert await claim_message(conn, SCHEMA, "counts", "backlog.outbox.2") is True
            raise RuntimeError("handler failed; its effects and its claim roll back together")
    async with engine.begin() as conn:
        assert await claim_message(conn, SCHEMA, "counts", "backlog.outbox.2") is True


async def test_prune_removes_only_old_sent_rows(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    async with engine.begin() as conn:
        await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "old"})
        await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "unsent"})
        await conn.execute(text(f"UPDATE {SCHEMA}.outbox SET sent_at = now() - interval '8 days' "
                                "WHERE payload->'data'->>'thing' = 'old'"))
    assert await prune_outbox(engine, SCHEMA) == 1
    async with engine.connect() as conn:
        left = (await conn.execute(text(f"SELECT payload FROM {SCHEMA}.outbox"))).scalars().all()
    assert [p["data"]["thing"] for p in (json.loads(x) if isinstance(x, str) else x for x in left)] == ["unsent"]


async def test_a_rebuilt_database_is_not_mistaken_for_the_old_one(env, pg_base_url: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Row ids restart in a new database; the event ids JetStream dedupes on must not."""
    import uuid

    import asyncpg

    engine, bus = env
    async with engine.begin() as conn:
        await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "old"})
    await OutboxRelay(engine, bus, schema=SCHEMA, source="backlog").relay_once()
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(pg_base_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    rebuilt_url = with_database(pg_base_url, name)
    await migrate(rebuilt_url, SCHEMA, None)
    rebuilt = create_engine(rebuilt_url)
    try:
        async with rebuilt.begin() as conn:
            assert await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "new"}) == 1  # same row id
        await OutboxRelay(rebuilt, bus, schema=SCHEMA, source="backlog").relay_once()
        assert [e.data["thing"] for e in await deliveries(bus)] == ["old", "new"]
    finally:
        await rebuilt.dispose()
        admin = await asyncpg.connect(pg_base_url)
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


class Step(Payload):
    aggregate: str
    n: int


async def test_two_relays_keep_each_aggregates_order(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Two replicas' relays on one outbox, a thousand events on five aggregates written while they
    run: every event arrives once, and each aggregate's events arrive in the order they were written."""
    engine, bus = env
    relays = [OutboxRelay(engine, bus, schema=SCHEMA, source="backlog", poll_interval=0.01) for _ in range(2)]
    running = [asyncio.create_task(r.run()) for r in relays]

    async def writer(aggregate: str) -> None:  # one writer per aggregate, as an aggregate's row lock makes it
        for n in range(200):
            async with engine.begin() as conn:
                await emit(conn, SCHEMA, SUBJECT, "step", Step(aggregate=aggregate, n=n))
            relays[n % 2].kick()

    await asyncio.gather(*(writer(a) for a in "abcde"))
    for _ in range(300):
        async with engine.connect() as conn:
            if not (await conn.execute(text(f"SELECT count(*) FROM {SCHEMA}.outbox WHERE sent_at IS NULL"))).scalar_one():
                break
        await asyncio.sleep(0.05)
    for r in relays:
        r.stop()
    await asyncio.gather(*running)
    got = await deliveries(bus)
    assert len(got) == 1000 and len({e.id for e in got}) == 1000
    for aggregate in "abcde":
        ns = [e.data["n"] for e in got if e.data["aggregate"] == aggregate]
        assert ns == list(range(200)), f"aggregate {aggregate} out of order"


class CountedRelay(OutboxRelay):
    """The relay, recording how many rows each of its passes published."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        super().__init__(*args, **kwargs)
        self.passes: list[int] = []

    async def relay_once(self, limit: int = RELAY_BATCH) -> int:
        moved = await super().relay_once(limit)
        self.passes.append(moved)
        return moved


async def _committed(engine, relay: OutboxRelay, thing: str) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with engine.begin() as conn:
        await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": thing})
    relay.kick()


async def _until_sent(relay: OutboxRelay, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await relay.pending() == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"still unsent after {seconds} s")


async def test_commits_during_the_gathering_leave_in_one_pass_on_their_kicks(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """After a pass that published, the commits that follow gather for one pass; their kicks are
    kept through the gathering (the poll is 30 s: only a kept kick gets them out in time)."""
    engine, bus = env
    relay = CountedRelay(engine, bus, schema=SCHEMA, source="backlog", poll_interval=30, gather_seconds=0.5)
    task = asyncio.create_task(relay.run())
    try:
        await asyncio.sleep(0.1)
        await _committed(engine, relay, "first")
        await _until_sent(relay)
        await _committed(engine, relay, "second")  # inside the half second after the first's pass
        await _committed(engine, relay, "third")
        await _until_sent(relay)
        assert [moved for moved in relay.passes if moved] == [1, 2]
        assert [e.data["thing"] for e in await deliveries(bus)] == ["first", "second", "third"]
    finally:
        relay.stop()
        await asyncio.wait_for(task, timeout=5)


async def test_a_quiet_relay_goes_at_once_and_stop_ends_a_gathering(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    engine, bus = env
    relay = CountedRelay(engine, bus, schema=SCHEMA, source="backlog", poll_interval=30, gather_seconds=30)
    task = asyncio.create_task(relay.run())
    try:
        await asyncio.sleep(0.1)  # its first pass found nothing: no gathering follows it
        await _committed(engine, relay, "alone")
        await _until_sent(relay)  # well inside the 30 s gathering: the kick went at once
        await _committed(engine, relay, "later")
        await asyncio.sleep(0.3)
        assert await relay.pending() == 1  # gathering after the pass that sent "alone"
        relay.stop()
        await asyncio.wait_for(task, timeout=5)  # not the 30 s
        assert relay.passes == [0, 1]
        assert await relay.relay_once() == 1  # nothing lost: the next relay's pass sends it
    finally:
        relay.stop()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_failed_pass_is_retried_after_a_poll_not_a_gathering(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A pass that fails after publishing leaves its rows unsent; the relay backs off one poll
    (0.2 s here) and retries, without a kick and without waiting out the 30 s gathering."""
    engine, bus = env
    relay = CountedRelay(engine, bus, schema=SCHEMA, source="backlog", poll_interval=0.2, gather_seconds=30)
    failures = [RuntimeError("the mark's connection went away")]

    async def fail_once(_row_id: int) -> None:
        if failures:
            raise failures.pop()

    relay.after_publish = fail_once
    async with engine.begin() as conn:
        await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "retried"})
    task = asyncio.create_task(relay.run())
    try:
        await _until_sent(relay)
        assert not failures and relay.passes[-1] == 1
        assert [e.data["thing"] for e in await deliveries(bus)] == ["retried"]  # the copy was dropped by its id
    finally:
        relay.stop()
        await asyncio.wait_for(task, timeout=5)


async def test_an_idle_poll_asks_without_a_pass_and_a_row_nobody_kicked_for_still_goes(env) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A poll nobody kicked asks whether anything is unsent (one statement, no transaction) and
    runs a pass only when something is: a row another process committed, whose kick this relay
    never hears, still leaves within a poll."""
    engine, bus = env
    relay = CountedRelay(engine, bus, schema=SCHEMA, source="backlog", poll_interval=0.05, gather_seconds=0)
    task = asyncio.create_task(relay.run())
    try:
        await asyncio.sleep(0.5)  # about ten polls of an empty outbox
        assert relay.passes == [0]  # the pass at start only
        async with engine.begin() as conn:  # as another process would: no kick
            await emit(conn, SCHEMA, SUBJECT, "thing_happened", {"thing": "unkicked"})
        await _until_sent(relay)
        assert relay.passes[1:] == [1]
        assert [e.data["thing"] for e in await deliveries(bus)] == ["unkicked"]
    finally:
        relay.stop()
        await asyncio.wait_for(task, timeout=5)
