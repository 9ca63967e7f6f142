"""Request/reply over the bus: typed, bounded, with the closed error set."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator

import pytest

from zimmer_cli.embedded import free_port, nats_server_binary, port_open
from zimmer_common.bus import Bus, connect_nats
from zimmer_common.contracts.envelope import Payload, RpcSpec
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.outage import MESSAGE_BUS
from zimmer_common.streams import UnsupportedServer, check_server


class Echo(Payload):
    text: str
    times: int = 1


class Echoed(Payload):
    text: str


ECHO = RpcSpec("testctx", "echo", Echo, Echoed)

pytestmark = pytest.mark.network  # nats-servers, and TCP servers standing in for them


@pytest.fixture
async def bus(nats_url: str):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    b = await Bus.connect([nats_url], service="test", instance_id="t1", rpc_timeout=2.0)
    yield b
    await b.close()


async def test_typed_round_trip(bus: Bus) -> None:
    async def handle(req: Echo) -> Echoed:
        return Echoed(text=req.text * req.times)

    await bus.serve(ECHO, handle)
    assert (await bus.request(ECHO, Echo(text="ab", times=2))).text == "abab"


async def test_handler_error_keeps_its_code(bus: Bus) -> None:
    async def handle(req: Echo) -> Echoed:
        raise ZimmerError(ErrorCode.CONFLICT, "already there", {"key": req.text})

    await bus.serve(ECHO, handle)
    with pytest.raises(ZimmerError) as info:
        await bus.request(ECHO, Echo(text="k"))
    assert info.value.code is ErrorCode.CONFLICT and info.value.details == {"key": "k"}


async def test_unexpected_exception_is_internal_not_a_hang(bus: Bus) -> None:
    async def handle(req: Echo) -> Echoed:
        raise RuntimeError("boom")

    await bus.serve(ECHO, handle)
    with pytest.raises(ZimmerError) as info:
        await bus.request(ECHO, Echo(text="k"))
    assert info.value.code is ErrorCode.INTERNAL and "boom" not in info.value.message


async def test_request_not_matching_the_contract_is_invalid(bus: Bus) -> None:
    async def handle(req: Echo) -> Echoed:
        return Echoed(text=req.text)

    await bus.serve(ECHO, handle)
    reply = await bus.nc.request(ECHO.subject, b'{"times": "many"}', timeout=2)
    assert b'"invalid"' in reply.data


async def test_service_that_is_down_is_unavailable_within_the_bound(bus: Bus) -> None:
    started = time.monotonic()
    with pytest.raises(ZimmerError) as info:
        await bus.request(ECHO, Echo(text="x"), timeout=1.0)
    assert info.value.code is ErrorCode.UNAVAILABLE
    assert time.monotonic() - started < 5  # upper bound only: the bound fired


async def test_no_responders_in_a_bus_outages_aftermath_names_the_bus(bus: Bus) -> None:
    """Just after the bus came back, a service not yet reconnected has no responders: that is the
    bus's outage still (a load test saw appends named `backlog` there); later it is the service."""
    bus.outages.of(MESSAGE_BUS).failed("disconnected from NATS", where="test")
    bus.outages.of(MESSAGE_BUS).recovered()
    with pytest.raises(ZimmerError) as info:
        await bus.request(ECHO, Echo(text="x"), timeout=1.0)
    assert (info.value.details["dependency"], info.value.details["sent"]) == ("message bus", False)
    bus.outages.of(MESSAGE_BUS).recovered_at = time.monotonic() - 60  # long past the aftermath
    with pytest.raises(ZimmerError) as info:
        await bus.request(ECHO, Echo(text="x"), timeout=1.0)
    assert (info.value.details["dependency"], info.value.details["sent"]) == ("testctx", False), info.value.details


async def test_service_that_hangs_is_unavailable_when_the_bound_fires(bus: Bus) -> None:
    release = asyncio.Event()

    async def handle(req: Echo) -> Echoed:
        await release.wait()
        return Echoed(text=req.text)

    await bus.serve(ECHO, handle)
    started = time.monotonic()
    with pytest.raises(ZimmerError) as info:
        await bus.request(ECHO, Echo(text="x"), timeout=0.5)
    release.set()
    assert info.value.code is ErrorCode.UNAVAILABLE and "within 0.5s" in info.value.message
    assert time.monotonic() - started < 5


async def test_queue_group_shares_requests_between_replicas(nats_url: str) -> None:
    served: list[str] = []
    buses = [await Bus.connect([nats_url], service="test", instance_id=f"r{i}", rpc_timeout=2) for i in range(2)]
    try:
        for i, b in enumerate(buses):
            async def handle(req: Echo, i: int = i) -> Echoed:
                served.append(f"r{i}")
                return Echoed(text=req.text)

            await b.serve(ECHO, handle)
        for n in range(40):
            await buses[0].request(ECHO, Echo(text=str(n)))
        assert len(served) == 40  # each request answered exactly once
        assert set(served) == {"r0", "r1"}
    finally:
        for b in buses:
            await b.close()


@contextlib.asynccontextmanager
async def lone_nats() -> AsyncIterator[tuple[int, subprocess.Popen[bytes]]]:
    """A nats-server of its own, without JetStream: its port once it listens, and its process."""
    port = free_port()
    proc = subprocess.Popen([nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if port_open("127.0.0.1", port):
                break
            await asyncio.sleep(0.05)
        yield port, proc
    finally:
        proc.kill()
        proc.wait()


async def test_server_without_jetstream_is_refused() -> None:
    async with lone_nats() as (port, _proc):
        b = await Bus.connect([f"nats://127.0.0.1:{port}"], service="test", instance_id="t", rpc_timeout=2)
        try:
            with pytest.raises((UnsupportedServer, ZimmerError)) as info:
                await check_server(b)
            assert "JetStream" in str(info.value) and "2.12" in str(info.value)
        finally:
            await b.close()


async def test_a_batch_reads_every_ack_and_names_the_stream_that_did_not_answer(bus: Bus) -> None:
    # A stream-leader election answers 503 to every publish of a batch: the first refusal used to
    # end the wait with the other acks unread, each an ERROR "Future exception was never
    # retrieved" when collected (641 after one election), and the cause read "no stream takes
    # the subject".
    import gc

    from zimmer_common.streams import provision_streams

    await provision_streams(bus)
    unretrieved: list[dict] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    try:
        batch = [("zimmer.ops.evt.batch_test", b"{}", "batch-ok-1"),
                 *[(f"zimmer.ingest_nowhere.{i}", b"{}", f"batch-lost-{i}") for i in range(20)],
                 ("zimmer.ops.evt.batch_test", b"{}", "batch-ok-2")]
        with pytest.raises(ZimmerError) as info:
            await bus.publish_many(batch)
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert "stored 2 of a batch of 22" in info.value.message
        assert "stream ZIMMER_EVENTS has no leader (or takes no zimmer.ingest_nowhere.0)" in info.value.message
        gc.collect()
        await asyncio.sleep(0)
        assert not unretrieved, unretrieved
    finally:
        loop.set_exception_handler(None)


async def test_a_request_whose_bus_dies_under_it_names_the_bus_not_the_service() -> None:
    # kill -9 of nats-server with appends in flight: they were answered 503 `dependency: backlog`.
    async with lone_nats() as (port, proc):
        server = await Bus.connect([f"nats://127.0.0.1:{port}"], service="test", instance_id="s", rpc_timeout=2)
        client = await Bus.connect([f"nats://127.0.0.1:{port}"], service="test", instance_id="c", rpc_timeout=2)
        arrived = asyncio.Event()

        async def handle(req: Echo) -> Echoed:
            arrived.set()
            await asyncio.sleep(30)
            return Echoed(text=req.text)

        await server.serve(ECHO, handle)
        asking = asyncio.create_task(client.request(ECHO, Echo(text="x"), timeout=2.0))
        await asyncio.wait_for(arrived.wait(), 5)
        proc.kill()
        with pytest.raises(ZimmerError) as info:
            await asking
        assert info.value.code is ErrorCode.UNAVAILABLE
        assert info.value.details["dependency"] == "message bus" and info.value.details["sent"] is True


@contextlib.asynccontextmanager
async def refusing_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server that closes every connection at once (no NATS INFO): its URL, and one entry per
    connection it took."""
    taken: list[int] = []

    async def close(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        taken.append(1)
        writer.close()

    server = await asyncio.start_server(close, "127.0.0.1", 0)
    try:
        yield f"nats://127.0.0.1:{server.sockets[0].getsockname()[1]}", taken
    finally:
        server.close()
        await server.wait_closed()


async def test_a_first_connect_that_keeps_failing_is_retried_then_unavailable_naming_the_bus() -> None:
    tried: dict[int, int] = {}
    for attempts in (1, 3):
        async with refusing_server() as (url, taken):
            with pytest.raises(ZimmerError) as refused:
                await connect_nats([url], "test", attempts=attempts)
            tried[attempts] = len(taken)
        assert refused.value.code is ErrorCode.UNAVAILABLE and refused.value.details["dependency"] == MESSAGE_BUS
        assert f"cannot connect to NATS at ['{url}']" in str(refused.value)
    assert tried[1] >= 1 and tried[3] == 3 * tried[1]  # each attempt connects as the first did
