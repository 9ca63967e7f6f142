"""HTTP clients for the benchmarks: a lean keep-alive client, aiohttp, and wrk.

The benchmarks run their client on the same cores as the services they measure. aiohttp costs
0.28–0.36 ms of CPU per REST append there (a fifth to a quarter of what the whole append costs,
every service and PostgreSQL included), CPU the services would have had with their clients on
other machines, as in production. `KeepAliveClient` speaks just enough HTTP/1.1 for a benchmark
(one keep-alive connection per caller, `Content-Length` bodies) for 0.08–0.10 ms an append. The
REST figures use it; aiohttp's figure on the same appends is reported beside them, and wrk (C, when
on PATH) checks the client on a trivial route. See bench/README.md, *HTTP clients*.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from dataclasses import dataclass
from typing import Any

# uvicorn closes a keep-alive connection after 5 s idle (its `timeout_keep_alive` default). The
# clients close their own idle connections sooner, so neither sends a request on a connection
# the server is closing at that moment (neither retries a POST on one).
HTTP_CLIENT_KEEPALIVE_SECONDS = 2.0
HTTP_TIMEOUT_SECONDS = 60.0
MAX_HEAD_BYTES = 64 * 1024  # status line and headers of one response


class HttpClientError(RuntimeError):
    """The server's answer was not one this client can read (or did not come in time)."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.used_at = time.monotonic()

    def reusable(self) -> bool:
        return (not self.reader.at_eof() and not self.writer.is_closing()
                and time.monotonic() - self.used_at < HTTP_CLIENT_KEEPALIVE_SECONDS)

    def close(self) -> None:
        self.writer.close()


class KeepAliveClient:
    """HTTP/1.1 with one keep-alive connection per caller (`caller` 0…n-1), each caller waiting
    for its answer before its next request, as a benchmark's callers do.

    Enough HTTP for a benchmark and no more: responses must carry `Content-Length` (a chunked
    one is refused, naming it); `Connection: close` or an idle connection opens a new one for
    the next request; every request is bounded by `timeout`. Requests are never retried."""

    def __init__(self, host: str, port: int, headers: dict[str, str] | None = None,
                 timeout: float = HTTP_TIMEOUT_SECONDS):
        self.host, self.port, self.timeout = host, port, timeout
        self._head = "".join(f"{name}: {value}\r\n" for name, value in
                             {"Host": f"{host}:{port}", **(headers or {})}.items()).encode("latin-1")
        self._connections: dict[int, _Connection] = {}

    async def request(self, caller: int, method: str, path: str, body: bytes = b"",
                      content_type: str = "application/json") -> tuple[int, bytes]:
        """(status, body) of one request on `caller`'s connection."""
        try:
            async with asyncio.timeout(self.timeout):
                conn = await self._connection(caller)
                head = b"%s %s HTTP/1.1\r\n%s" % (method.encode("ascii"), path.encode("ascii"), self._head)
                if body or method in ("POST", "PUT", "PATCH"):
                    head += b"Content-Type: %s\r\nContent-Length: %d\r\n" % (content_type.encode("ascii"), len(body))
                conn.writer.write(head + b"\r\n" + body)
                await conn.writer.drain()
                status, answer, keep = await _response(conn.reader)
        except BaseException:
            self._drop(caller)  # its state is unknown: the next request opens a new one
            raise
        conn.used_at = time.monotonic()
        if not keep:
            self._drop(caller)
        return status, answer

    async def post(self, caller: int, path: str, body: bytes) -> tuple[int, bytes]:
        return await self.request(caller, "POST", path, body)

    async def get(self, caller: int, path: str) -> tuple[int, bytes]:
        return await self.request(caller, "GET", path)

    async def _connection(self, caller: int) -> _Connection:
        conn = self._connections.get(caller)
        if conn is not None and conn.reusable():
            return conn
        self._drop(caller)
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD_BYTES)
        conn = self._connections[caller] = _Connection(reader, writer)
        return conn

    def _drop(self, caller: int) -> None:
        conn = self._connections.pop(caller, None)
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        for caller in list(self._connections):
            self._drop(caller)


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})[^\r\n]*")


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise HttpClientError(f"the server closed the connection before answering "
                              f"({len(exc.partial)} bytes of a response)") from None
    except asyncio.LimitOverrunError:
        raise HttpClientError(f"response headers longer than {MAX_HEAD_BYTES} bytes") from None
    lines = head[:-4].split(b"\r\n")
    status = _STATUS_LINE.fullmatch(lines[0])
    if status is None:
        raise HttpClientError(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise HttpClientError(f"malformed header line: {line[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    if b"transfer-encoding" in headers:
        raise HttpClientError(f"a {headers[b'transfer-encoding'].decode(errors='replace')} response: this client "
                              "reads Content-Length bodies only")
    length = headers.get(b"content-length")
    if length is None or not length.isdigit():
        raise HttpClientError(f"a response without a usable Content-Length ({length!r})")
    try:
        body = await reader.readexactly(int(length))
    except asyncio.IncompleteReadError as exc:
        raise HttpClientError(f"the server closed the connection {len(exc.partial)} bytes into a "
                              f"{int(length)}-byte body") from None
    keep = headers.get(b"connection", b"").lower() != b"close" and lines[0].startswith(b"HTTP/1.1")
    return int(status.group(1)), body, keep


async def get_rate(client: KeepAliveClient, path: str, n: int, concurrency: int) -> float:
    """`n` GETs of `path` by `concurrency` callers, each waiting for its answer before the next;
    requests per second over the wall time. Any status but 200 fails the benchmark."""

    async def caller(worker: int) -> None:
        for _ in range(worker, n, concurrency):
            status, body = await client.get(worker, path)
            if status != 200:
                raise RuntimeError(f"GET {path} answered {status}: {body[:200]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(caller(w) for w in range(concurrency)))
    return n / (time.perf_counter() - started)


def http_session(concurrency: int, base_url: str, headers: dict[str, str] | None = None) -> Any:
    """An aiohttp session with one pooled keep-alive connection per concurrent caller.

    aiohttp drops pooled connections the server has closed and opens new ones itself, so a
    server closing an idle connection between rounds costs a reconnect, not the run."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=HTTP_CLIENT_KEEPALIVE_SECONDS)
    return aiohttp.ClientSession(base_url=base_url, connector=connector, headers=headers,
                                 timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_SECONDS))


@dataclass
class WrkResult:
    requests_per_second: float
    requests: int
    errors: str | None  # wrk's "Socket errors" / "Non-2xx" lines, if any


def wrk_binary() -> str | None:
    return shutil.which("wrk")


async def run_wrk(url: str, seconds: int, connections: int, threads: int) -> WrkResult:
    """`wrk -t{threads} -c{connections} -d{seconds}s URL` and its requests/s."""
    binary = wrk_binary()
    if binary is None:
        raise RuntimeError("wrk is not on PATH")
    proc = await asyncio.create_subprocess_exec(
        binary, f"-t{threads}", f"-c{connections}", f"-d{seconds}s", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=seconds + 30)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    text = out.decode(errors="replace")
    rate = re.search(r"^Requests/sec:\s*([\d.]+)", text, re.MULTILINE)
    total = re.search(r"^\s*(\d+) requests in", text, re.MULTILINE)
    if proc.returncode != 0 or rate is None or total is None:
        raise RuntimeError(f"wrk exited {proc.returncode}: {text.strip()[-300:]}")
    errors = [line.strip() for line in text.splitlines() if line.strip().startswith(("Socket errors", "Non-2xx"))]
    return WrkResult(float(rate.group(1)), int(total.group(1)), "; ".join(errors) or None)
