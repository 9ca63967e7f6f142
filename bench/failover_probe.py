"""What the failover benchmark measures on the NATS cluster itself, through the surviving nodes:

- election: from the SIGKILL of a stream leader's node until a JetStream publish to that stream is
  acknowledged again (write availability, which is what a service waits for; a probe subject in
  ZIMMER_EVENTS that no consumer reads);
- catch-up: from the killed node answering its monitoring port again until every replica of every
  stream is current (none offline, none lagging).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import httpx
import nats
from nats.aio.client import Client

from zimmer_common.contracts.subjects import Stream

PROBE_SUBJECT = "zimmer.ops.evt.bench_failover_probe"  # in ZIMMER_EVENTS; no consumer's filter takes it
PROBE_TIMEOUT = 0.5


@dataclass(frozen=True)
class StreamReading:
    stream: str
    leader: str | None
    lagging: list[str]  # replicas offline, not current, or with lag


async def connect(urls: list[str]) -> Client:
    async def quiet(_exc: Exception) -> None:  # a killed node resets the connection: expected here
        return None

    return await nats.connect(servers=urls, connect_timeout=3, max_reconnect_attempts=-1, reconnect_time_wait=0.2,
                              error_cb=quiet)


async def stream_leader(nc: Client, stream: str = Stream.EVENTS.value) -> str | None:
    reading = await read_stream(nc, stream)
    return reading.leader if reading else None


async def read_stream(nc: Client, stream: str) -> StreamReading | None:
    try:
        reply = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=1.0)
    except Exception:  # noqa: BLE001 - no answer while electing: the caller polls
        return None
    info = json.loads(reply.data)
    cluster = info.get("cluster") or {}
    lagging = [r["name"] for r in cluster.get("replicas") or []
               if r.get("offline") or not r.get("current") or r.get("lag", 0)]
    return StreamReading(stream, cluster.get("leader"), lagging)


async def publish_acked(nc: Client) -> bool:
    try:
        reply = await nc.request(PROBE_SUBJECT, b"{}", timeout=PROBE_TIMEOUT)
    except Exception:  # noqa: BLE001 - no leader yet: the caller polls
        return False
    return "error" not in json.loads(reply.data or b"{}")


async def time_to_write(nc: Client, killed_at: float, deadline: float = 120.0) -> float | None:
    """Seconds from `killed_at` (time.monotonic) until the stream acknowledges a publish."""
    while time.monotonic() - killed_at < deadline:
        if await publish_acked(nc):
            return round(time.monotonic() - killed_at, 3)
        await asyncio.sleep(0.05)
    return None


def node_answers(monitor_url: str) -> bool:
    try:
        return httpx.get(f"{monitor_url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


async def time_until_answers(monitor_url: str, killed_at: float, deadline: float = 120.0) -> float | None:
    """Seconds from the kill until the node answers its monitoring port again (the supervisor's
    restart); polled beside `time_to_write`, so neither figure waits for the other."""
    while time.monotonic() - killed_at < deadline:
        if await asyncio.to_thread(node_answers, monitor_url):
            return round(time.monotonic() - killed_at, 3)
        await asyncio.sleep(0.05)
    return None


async def time_to_catch_up(nc: Client, back_at: float, deadline: float = 180.0) -> float | None:
    """Seconds from `back_at` (the node answering again) until every replica of every stream is
    current: none offline, none lagging."""
    while time.monotonic() - back_at < deadline:
        readings = [await read_stream(nc, s.value) for s in Stream]
        if all(r is not None and r.leader and not r.lagging for r in readings):
            return round(time.monotonic() - back_at, 3)
        await asyncio.sleep(0.1)
    return None
