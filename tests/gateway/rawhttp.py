"""A raw HTTP/1.1 client for the body-limit tests: it streams a body while it reads the answer,
so a server that answers before reading the body can be seen doing so (httpx sends the whole
body before it reads a byte of the response)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

CHUNK = b"x" * 65536


@dataclass
class Sent:
    status: int
    headers: dict[str, str]
    body: bytes
    bytes_sent: int


async def stream_body(url: str, path: str, *, headers: dict[str, str], total: int | None, chunked: bool = False,
                      limit: int = 400 * 1024 * 1024, timeout: float = 60.0) -> Sent:
    """POST `path`, declaring Content-Length `total` (or chunked), and keep sending body bytes
    until the server answers, or `limit` bytes have gone."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    sent = 0

    async def feed() -> None:
        nonlocal sent
        with contextlib.suppress(ConnectionError, OSError):
            while sent < limit:
                writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK) if chunked else CHUNK)
                sent += len(CHUNK)
                await writer.drain()

    feeder = asyncio.create_task(feed())
    try:
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        answer_headers: dict[str, str] = {}
        while True:
            line = (await asyncio.wait_for(reader.readline(), timeout)).decode().strip()
            if not line:
                break
            name, _, value = line.partition(":")
            answer_headers[name.strip().lower()] = value.strip()
        body = await asyncio.wait_for(reader.readexactly(int(answer_headers.get("content-length", "0"))), timeout)
    finally:
        feeder.cancel()
        with contextlib.suppress(BaseException):
            await feeder
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return Sent(int(status_line.split()[1]), answer_headers, body, sent)
