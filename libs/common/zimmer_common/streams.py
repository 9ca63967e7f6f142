"""JetStream streams, provisioned idempotently at every start (DESIGN §3, §4).

The raw `$JS.API.STREAM.*` requests are used because nats-py's StreamConfig has no field for
`allow_msg_schedules`. Start-up refuses a server without JetStream, or one older than the
message-schedule release, with an error naming the version required.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from zimmer_common.bus import Bus
from zimmer_common.contracts.subjects import CONTEXTS, Stream
from zimmer_common.errors import ZimmerError, unavailable
from zimmer_common.outage import MESSAGE_BUS

log = logging.getLogger("zimmer.streams")

MIN_SERVER_VERSION = (2, 12, 0)
NS_PER_S = 1_000_000_000
DAY = 86_400


JETSTREAM_WAIT_SECONDS = 60.0  # a meta leader election takes seconds; a rejoining node's, a little more


class UnsupportedServer(RuntimeError):
    pass


def event_subjects() -> list[str]:
    """Each context's events, listed one by one: a wildcard context (`zimmer.*.evt.>`) would
    overlap the ingest and jobs streams' subjects and the server refuses overlapping streams."""
    contexts = sorted(set(CONTEXTS.values()) | {"ops"})
    return [f"zimmer.{ctx}.evt.>" for ctx in contexts] + ["zimmer.alerts.cmd.>"]


def stream_configs(replicas: int = 1) -> dict[Stream, dict[str, Any]]:
    common = {"storage": "file", "num_replicas": replicas, "duplicate_window": 10 * 60 * NS_PER_S}
    return {
        # Domain events, operations events and pages. Limits retention: several services may
        # consume the same event, each with its own durable consumer.
        Stream.EVENTS: {**common, "subjects": event_subjects(),
                        "retention": "limits", "max_age": 7 * DAY * NS_PER_S, "discard": "old"},
        Stream.RUNTIME: {**common, "subjects": ["zimmer.runtime.cmd.>"], "retention": "workqueue",
                         "max_age": 1 * DAY * NS_PER_S, "discard": "old"},
        Stream.INGEST: {**common, "subjects": ["zimmer.ingest.>"], "retention": "limits",
                        "max_age": 3 * DAY * NS_PER_S, "discard": "old"},
        # One waiting tick per job subject: a tick arriving while one waits replaces it.
        # Schedules refuse discard=new, so discard=old is required, not a preference.
        Stream.JOBS: {**common, "subjects": ["zimmer.jobs.>"], "retention": "workqueue",
                      "max_msgs_per_subject": 1, "discard": "old", "allow_msg_schedules": True,
                      "duplicate_window": 2 * 60 * NS_PER_S},
    }


def parse_version(text: str) -> tuple[int, int, int]:
    core = text.lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = [int(p) for p in core.split(".")[:3] if p.isdigit()]
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


async def check_server(bus: Bus) -> str:
    version = str(bus.nc._server_info.get("version", "0.0.0"))  # noqa: SLF001 - nats-py exposes no accessor
    need = ".".join(map(str, MIN_SERVER_VERSION))
    if parse_version(version) < MIN_SERVER_VERSION:
        raise UnsupportedServer(
            f"NATS server {version} is too old: Zimmer needs nats-server >= {need} for JetStream message schedules")
    disabled = f"NATS server {version} has JetStream disabled; start it with -js (Zimmer needs nats-server >= {need})"
    if not bus.nc._server_info.get("jetstream"):  # noqa: SLF001 - nats-py exposes no accessor
        raise UnsupportedServer(disabled)
    # JetStream is on (the server says so): a silence or a 503 is a cluster still electing its
    # meta leader (a node rejoining, a cluster starting), not a server without it. Waited out,
    # bounded; past the bound it is the bus's outage, never "JetStream disabled".
    deadline = asyncio.get_running_loop().time() + JETSTREAM_WAIT_SECONDS
    while True:
        try:
            info = await bus.js_api("INFO", timeout=bus.admin_timeout)
            error = info.get("error")
            why = None if not error else f"{error.get('description')} (code {error.get('code')})"
            if error and error.get("code") != 503:
                raise UnsupportedServer(f"{disabled} ({error.get('description')})")
        except ZimmerError as exc:
            why = exc.message
        if why is None:
            return version
        if asyncio.get_running_loop().time() >= deadline:
            raise unavailable(MESSAGE_BUS, f"JetStream on NATS server {version} did not answer within "
                                           f"{JETSTREAM_WAIT_SECONDS:g}s: {why}")
        log.info("waiting for JetStream to answer", extra={"fields": {"why": why}})
        await asyncio.sleep(1.0)


async def provision_streams(bus: Bus, replicas: int = 1) -> None:
    """Create each stream, or update it to the wanted config; safe to run from every replica."""
    await check_server(bus)
    timeout = bus.admin_timeout
    for stream, cfg in stream_configs(replicas).items():
        body = {"name": stream.value, **cfg}
        info = await bus.js_api(f"STREAM.INFO.{stream.value}", timeout=timeout)
        if "error" in info:
            resp = await bus.js_api(f"STREAM.CREATE.{stream.value}", body, timeout=timeout)
            if "error" in resp and resp["error"].get("err_code") != 10058:  # 10058: created by a peer meanwhile
                raise RuntimeError(f"cannot create stream {stream.value}: {resp['error']}")
            continue
        current = info.get("config", {})
        if any(current.get(k) != v for k, v in body.items()):
            resp = await bus.js_api(f"STREAM.UPDATE.{stream.value}", {**current, **body}, timeout=timeout)
            if "error" in resp:
                raise RuntimeError(f"cannot update stream {stream.value}: {resp['error']}")
            log.info("stream updated", extra={"fields": {"stream": stream.value}})
