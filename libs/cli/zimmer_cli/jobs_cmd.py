"""`zimmer jobs`: the hosts that run per-host jobs (the sweeper's disk sweeps, one sweeper per
runtime host), and retiring one. A host's per-host schedules stay installed after its sweeper is
gone, so cron freshness keeps judging it (a host whose sweeps went silent must be noticed); a host
that is retired on purpose is forgotten here, which removes its schedules and its lane consumers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from zimmer_common.contracts.subjects import CONTEXTS, SCHEDULE_PREFIX, Stream, host_ctx
from zimmer_common.settings import HOST_PATTERN

if TYPE_CHECKING:
    from zimmer_common.bus import Bus

jobs_app = typer.Typer(help="Background jobs: run one now; per-host schedules.", no_args_is_help=True)
NatsUrl = Annotated[str, typer.Option(envvar="ZIMMER_NATS_URL", help="NATS server(s), comma-separated")]
Service = Annotated[str, typer.Option(help="The service whose per-host jobs these are")]
T = TypeVar("T")


@jobs_app.command("run")
def run(key: Annotated[str, typer.Argument(help="service.job, as the Health page's cron rows name it "
                                           "(e.g. spot-gate.ceiling_sweep)")],
        nats_url: NatsUrl = "nats://127.0.0.1:4222",
        host: Annotated[str | None, typer.Option(help="For a per-host job: whose disk (default: every host "
                                                 "must be named)")] = None) -> None:
    """Ask for a run of a job now, outside its schedule (it coalesces with a tick already waiting, and
    runs under the job's usual singleton lock)."""
    seq = _answer(run_job(nats_url, key, host))
    typer.echo(f"{key} enqueued (stream sequence {seq})")


def job_tick(key: str, host: str | None = None) -> tuple[str, bytes]:
    """The subject and body of a tick of `key` (service.job); BadParameter when it is not a job."""
    import json

    from zimmer_common.contracts.subjects import job_subject
    from zimmer_common.schedule import SCHEDULE

    entry = next((e for e in SCHEDULE if e.key == key), None)
    if entry is None:
        raise typer.BadParameter(f"no job {key!r}; one of: {', '.join(sorted(e.key for e in SCHEDULE))}")
    ctx = CONTEXTS[entry.service]
    if entry.per_host:
        if host is None:
            raise typer.BadParameter(f"{key} runs on every host's disk: name the host with --host")
        ctx = host_ctx(ctx, host)
    elif host is not None:
        raise typer.BadParameter(f"{key} is not a per-host job (one run serves every host): leave out --host")
    return job_subject(ctx, entry.lane, entry.job), json.dumps({"job": entry.job}).encode()


async def run_job(nats_url: str, key: str, host: str | None = None) -> int:
    """Enqueue a tick of `key`. A per-host job's host must be one with its service's per-host
    schedules installed: a tick for any other host would wait in ZIMMER_JOBS for a sweeper that
    does not exist (`invalid`, naming the hosts there are)."""
    from zimmer_common.errors import ErrorCode, ZimmerError

    subject, body = job_tick(key, host)
    service = key.split(".", 1)[0]
    bus = await _connect(nats_url)
    try:
        if host is not None:
            known = await _installed_hosts(bus, service)
            if host not in known:
                there = f"the hosts with them: {', '.join(sorted(known))}" if known else "no host has them"
                raise ZimmerError(ErrorCode.INVALID, f"no {service} on host {host!r} has per-host schedules "
                                  f"installed ({there}); a tick for it would wait forever")
        return await bus.publish(subject, body)
    finally:
        await bus.close()


@jobs_app.command("hosts")
def hosts(nats_url: NatsUrl = "nats://127.0.0.1:4222", service: Service = "sweeper") -> None:
    """List the hosts with per-host schedules installed, and their jobs."""
    found = _answer(_hosts(nats_url, service))
    if not found:
        typer.echo(f"no host has per-host schedules of {service}")
    for host, jobs in sorted(found.items()):
        typer.echo(f"{host}: {', '.join(sorted(jobs))}")


@jobs_app.command("forget-host")
def forget_host(host: Annotated[str, typer.Argument(help="The retired host")],
                nats_url: NatsUrl = "nats://127.0.0.1:4222", service: Service = "sweeper") -> None:
    """Remove a retired host's per-host schedules and lane consumers, so cron freshness stops
    judging it. A host still running will install them again at its next start."""
    import re

    if not re.match(HOST_PATTERN, host):
        raise typer.BadParameter(f"{host!r} is not a host name (lower case letters, digits, '-' and '_')")
    removed, consumers = _answer(_forget(nats_url, service, host))
    typer.echo(f"forgot {host}: {removed} schedule(s), {consumers} lane consumer(s) removed")


def _answer(call: Coroutine[Any, Any, T]) -> T:
    """Run `call`; a refusal (NATS unreachable, JetStream not answering) is one line and exit 1."""
    from zimmer_common.errors import ZimmerError

    try:
        return asyncio.run(call)
    except ZimmerError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None


async def _connect(nats_url: str):  # type: ignore[no-untyped-def]  # returns a Bus, imported lazily
    from zimmer_common.bus import Bus

    return await Bus.connect([u for u in nats_url.split(",") if u], service="cli", instance_id=str(os.getpid()),
                             rpc_timeout=10.0)


async def _hosts(nats_url: str, service: str) -> dict[str, set[str]]:
    bus = await _connect(nats_url)
    try:
        return await _installed_hosts(bus, service)
    finally:
        await bus.close()


async def _installed_hosts(bus: Bus, service: str) -> dict[str, set[str]]:
    """Per host, the jobs of `service` whose per-host schedules are installed."""
    info = await bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}", {"subjects_filter": f"{SCHEDULE_PREFIX}.>"})
    prefix = f"{SCHEDULE_PREFIX}.{CONTEXTS[service]}-"
    found: dict[str, set[str]] = {}
    for subject in (info.get("state") or {}).get("subjects") or {}:
        if subject.startswith(prefix):
            host, _, job = subject[len(prefix):].rpartition(".")
            found.setdefault(host, set()).add(job)
    return found


async def _forget(nats_url: str, service: str, host: str) -> tuple[int, int]:
    ctx = host_ctx(CONTEXTS[service], host)
    bus = await _connect(nats_url)
    try:
        info = await bus.js_api(f"STREAM.INFO.{Stream.JOBS.value}",
                                {"subjects_filter": f"{SCHEDULE_PREFIX}.{ctx}.>"})
        schedules = len((info.get("state") or {}).get("subjects") or {})
        await bus.js_api(f"STREAM.PURGE.{Stream.JOBS.value}", {"filter": f"{SCHEDULE_PREFIX}.{ctx}.>"})
        await bus.js_api(f"STREAM.PURGE.{Stream.JOBS.value}", {"filter": f"zimmer.jobs.{ctx}.>"})  # waiting ticks
        names = (await bus.js_api(f"CONSUMER.NAMES.{Stream.JOBS.value}", {})).get("consumers") or []
        mine = [n for n in names if n.startswith(f"jobs_{ctx}_")]
        for name in mine:
            await bus.js_api(f"CONSUMER.DELETE.{Stream.JOBS.value}.{name}", {})
    finally:
        await bus.close()
    return schedules, len(mine)
