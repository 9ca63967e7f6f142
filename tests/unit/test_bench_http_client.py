"""The benchmarks' lean HTTP client (`bench.http_clients.KeepAliveClient`) against a real uvicorn:
it reads what the gateway's server sends, keeps one connection per caller, and says plainly
what it cannot read rather than misreading it (bench/README.md, *HTTP clients*)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import pytest
import uvicorn

from bench.http_clients import HttpClientError, KeepAliveClient

pytestmark = pytest.mark.network  # a real uvicorn on 127.0.0.1

KEEP_ALIVE_SECONDS = 1


async def app(scope, receive, send):  # type: ignore[no-untyped-def]  # a bare ASGI app: what uvicorn serves
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    client_port = str(scope["client"][1]).encode()
    if path == "/chunked":  # no Content-Length: uvicorn sends it chunked
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/slow":
        await asyncio.sleep(1)
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body) + len(client_port) + 1).encode())]
    if path == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 201 if scope["method"] == "POST" else 200,
                "headers": headers})
    await send({"type": "http.response.body", "body": client_port + b" " + body})


@pytest.fixture
async def server() -> AsyncIterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS, lifespan="off")
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve(sockets=[sock]))
    while not served.started:
        await asyncio.sleep(0.01)
    try:
        yield port
    finally:
        served.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        sock.close()


async def test_posts_and_gets_on_one_kept_connection_per_caller(server: int) -> None:
    client = KeepAliveClient("127.0.0.1", server, headers={"Authorization": "Bearer k"})
    try:
        status, body = await client.post(0, "/x", b'{"a":1}')
        port_a, _, echoed = body.partition(b" ")
        assert (status, echoed) == (201, b'{"a":1}')
        status, body = await client.get(0, "/x")
        assert status == 200 and body.partition(b" ")[0] == port_a  # the same connection again
        _, other = await client.get(1, "/x")
        assert other.partition(b" ")[0] != port_a  # another caller, its own connection
    finally:
        await client.close()


async def test_a_closing_answer_and_an_idle_connection_open_a_new_one(server: int) -> None:
    client = KeepAliveClient("127.0.0.1", server)
    try:
        _, first = await client.get(0, "/close")
        _, second = await client.get(0, "/x")
        assert first.partition(b" ")[0] != second.partition(b" ")[0]
        await asyncio.sleep(KEEP_ALIVE_SECONDS + 0.5)  # the server has closed the kept connection
        status, third = await client.post(0, "/x", b"after idle")
        assert status == 201 and third.endswith(b"after idle")
        assert third.partition(b" ")[0] != second.partition(b" ")[0]
    finally:
        await client.close()


async def test_a_chunked_answer_is_refused_by_name_and_the_next_request_still_works(server: int) -> None:
    client = KeepAliveClient("127.0.0.1", server)
    try:
        with pytest.raises(HttpClientError, match="chunked"):
            await client.get(0, "/chunked")
        assert (await client.get(0, "/x"))[0] == 200
    finally:
        await client.close()


async def test_every_request_is_bounded(server: int) -> None:
    client = KeepAliveClient("127.0.0.1", server, timeout=0.3)
    try:
        with pytest.raises(TimeoutError):
            await client.get(0, "/slow")
        assert (await client.get(0, "/x"))[0] == 200  # the abandoned connection is not reused
    finally:
        await client.close()


async def test_a_server_that_closes_without_answering_is_named(server: int) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        writer.close()

    rude = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    client = KeepAliveClient("127.0.0.1", rude.sockets[0].getsockname()[1])
    try:
        with pytest.raises(HttpClientError, match="3 bytes into a 10-byte body"):
            await client.get(0, "/x")
    finally:
        await client.close()
        rude.close()
        await rude.wait_closed()
