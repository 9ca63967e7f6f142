"""`zimmer`: run a service, or the whole system on embedded servers, and look at it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
from typing import Annotated, Any

import typer

from zimmer_cli.asyncapi_cmd import asyncapi
from zimmer_cli.common import DataDir, _data_dir, _embedded_postgres, _load_factory, _settings
from zimmer_cli.jobs_cmd import jobs_app
from zimmer_cli.registry import SERVICES, START_ORDER, commands
from zimmer_cli.sim_cmd import sim
from zimmer_cli.up_cmd import _credentials, up  # noqa: F401 - _credentials: tests import it from here

app = typer.Typer(help="Zimmer control plane: backlog, spot gate, sweeper, alerts and gateway.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

@app.command()
def serve(name: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICES)}")]) -> None:
    """Run one service in the foreground until SIGTERM/SIGINT (what containers run)."""
    import uvloop  # libuv's event loop: a service is mostly socket I/O, and uvloop does it faster

    factory = _load_factory(name)
    service = factory(_settings())
    service.on_start(_tune_collector)
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(service.run_until_signalled())


# A batch of admissions allocates and frees a few thousand container objects at once: with
# Python's default of 700 the young generation was collected about three times an admission,
# each time walking whatever the batch still held. Above a batch's worth, it is collected rarely.
YOUNG_GENERATION_THRESHOLD = 10_000


async def _tune_collector(_service: Any) -> None:
    """Once started: leave what start-up built (modules, models, compiled statements, about
    120,000 objects that live as long as the process) out of the collector's full passes, which
    walked all of it, and collect the young generation less often. Together they were 13 % of
    spot-gate's CPU under the admissions benchmark, and are now below 1 % (bench/README.md,
    *Profile of the admission path*)."""
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])


@app.command()
def migrate(data_dir: DataDir = None) -> None:
    """Apply every service's schema migrations (embedded PostgreSQL unless ZIMMER_DATABASE_URL is set;
    a running `zimmer up` on the same data directory is used as it is, never stopped)."""
    from zimmer_common.db import migrate as run_migrations

    pg = None
    url = os.environ.get("ZIMMER_DATABASE_URL")
    try:
        if not url:
            pg = _embedded_postgres(data_dir)
            url = pg.ensure_database("zimmer")
        for name in START_ORDER:
            service = _load_factory(name)(_settings(database_url=url))
            if service.schema:
                applied = asyncio.run(run_migrations(url, service.schema, service.migrations))
                typer.echo(f"{name:10s} schema {service.schema:10s} "
                           f"{'applied ' + ', '.join(applied) if applied else 'up to date'}")
    finally:
        if pg:
            pg.stop()


@app.command()
def status(data_dir: DataDir = None,
           timeout: Annotated[float, typer.Option(help="Seconds to wait for each ping")] = 2.0,
           service: Annotated[str | None, typer.Option(
               "--service", help=f"Ping only this service ({', '.join(START_ORDER)}) and exit 0 only if it "
               "answered ready with its database answering (a container's healthcheck)")] = None) -> None:
    """What `zimmer up` is running (embedded servers and services: pid, restarts), and each service's
    answer to a ping over NATS. Exit 1 if a server is down or a service did not answer."""
    import psutil

    runtime_file = _data_dir(data_dir) / "runtime.json"
    runtime = json.loads(runtime_file.read_text()) if runtime_file.exists() else None
    nats_url = os.environ.get("ZIMMER_NATS_URL") or (runtime or {}).get("nats_url")
    if service is not None:
        _status_of(service, nats_url, timeout)
    if runtime:
        typer.echo(f"supervisor pid {runtime['supervisor_pid']}  gateway {runtime['gateway_url']}  nats {nats_url}")
    elif not nats_url:
        typer.echo("not running (no runtime.json in the data directory and ZIMMER_NATS_URL is not set)")
        raise typer.Exit(1)
    answers = asyncio.run(_ping_all(nats_url, timeout)) if nats_url else {}
    healthy = True
    for name, server in ((runtime or {}).get("servers") or {}).items():
        pid = server.get("pid")
        alive = bool(pid) and psutil.pid_exists(pid)
        healthy &= alive and bool(server.get("ready"))
        where = server.get("url") or server.get("pgdata") or ""
        if server.get("route_port"):  # a node of the --cluster NATS
            where += f"  routes {server['route_port']}  monitoring {server['monitor_url']}"
        line = (f"{name:11s} pid {pid or '-':>7}  {'alive' if alive else 'gone '}  "
                f"{'ready   ' if server.get('ready') else 'starting' if alive else 'down    '}  "
                f"restarts {server.get('restarts', 0)}  {where}")
        if server.get("last_exit"):
            line += f"  (last exit: {', '.join(f'{k} {v}' for k, v in server['last_exit'].items())})"
        typer.echo(line)
    for name, proc in ((runtime or {}).get("fleet") or {}).items():  # the simulated fleet: no ping, no health
        alive = bool(proc.get("pid")) and psutil.pid_exists(proc["pid"])
        typer.echo(f"{name:11s} pid {proc.get('pid') or '-':>7}  {'alive' if alive else 'gone '}  "
                   f"restarts {proc.get('restarts', 0)}  (simulated fleet)")
    processes = (runtime or {}).get("services", {})
    for name in START_ORDER:
        answer = answers.get(name)
        if isinstance(answer, dict):
            pinged = f"ping ok  v{answer['version']}  {answer['instance_id']}  up {answer['uptime_seconds']:.0f}s"
        else:
            healthy = False
            pinged = f"ping FAILED: {answer}"
        if (runtime or {}).get("cluster"):  # each replica's process, then the service's answer (any replica's)
            for child, proc in processes.items():
                if proc.get("service") == name:
                    typer.echo(f"{child:15s} pid {proc.get('pid') or '-':>7}  {_liveness(proc)}  restarts "
                               f"{proc.get('restarts', 0)}" + (f"  host {proc['host']}" if proc.get("host") else "")
                               + (f"  :{proc['http_port']}" if proc.get("http_port") else ""))
            typer.echo(f"{name:15s} {pinged}")
            continue
        proc = processes.get(name, {})
        line = f"{name:11s} pid {proc.get('pid') or '-':>7}  {_liveness(proc) if runtime else '     '}  "
        if runtime:
            line += f"restarts {proc.get('restarts', 0)}  "
        typer.echo(line + pinged)
    raise typer.Exit(0 if healthy else 1)


def _status_of(service: str, nats_url: str | None, timeout: float) -> None:
    """`zimmer status --service NAME`: the service's own ping over NATS (ZIMMER_NATS_URL, else the
    running `zimmer up`'s), answered by any of its instances. Healthy means it answered, it has
    started, and its database answered the ping's `SELECT 1` (a service without one: not asked).
    Exit 0 if healthy, 1 otherwise (2 for a name that is no service)."""
    if service not in START_ORDER:
        typer.echo(f"no service {service!r}: one of {', '.join(START_ORDER)}", err=True)
        raise typer.Exit(2)
    if not nats_url:
        typer.echo(f"{service}: ZIMMER_NATS_URL is not set and no `zimmer up` is running")
        raise typer.Exit(1)
    bound = 2 * timeout  # connecting and the ping; an unreachable NATS is retried for longer than that

    async def ping() -> Any:
        try:
            async with asyncio.timeout(bound):
                return (await _ping_all(nats_url, timeout, only=[service]))[service]
        except TimeoutError:
            return f"no answer within {bound:g}s (is NATS reachable at {nats_url}?)"

    answer = asyncio.run(ping())
    if not isinstance(answer, dict):
        typer.echo(f"{service}: ping FAILED: {answer}")
        raise typer.Exit(1)
    database = {True: "database ok", False: "database DOWN", None: "no database"}[answer.get("database")]
    healthy = bool(answer.get("ready")) and answer.get("database") is not False
    typer.echo(f"{service}: {'healthy' if healthy else 'UNHEALTHY'}  {'ready' if answer.get('ready') else 'not ready'}"
               f"  {database}  v{answer['version']}  {answer['instance_id']}  up {answer['uptime_seconds']:.0f}s")
    raise typer.Exit(0 if healthy else 1)


def _liveness(proc: dict[str, Any]) -> str:
    import psutil

    return "alive" if proc.get("pid") and psutil.pid_exists(proc["pid"]) else "gone "


async def _ping_all(nats_url: str, timeout: float, only: list[str] | None = None) -> dict[str, Any]:
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.ops import PingRequest, ping_rpc
    from zimmer_common.contracts.subjects import CONTEXTS
    from zimmer_common.errors import ZimmerError

    try:
        bus = await Bus.connect([u for u in nats_url.split(",") if u], service="cli", instance_id=str(os.getpid()),
                                rpc_timeout=timeout)
    except ZimmerError as exc:
        return {name: exc.message for name in only or START_ORDER}
    out: dict[str, Any] = {}
    try:
        for name in only or START_ORDER:
            try:
                out[name] = (await bus.request(ping_rpc(CONTEXTS[name]), PingRequest())).model_dump(mode="json")
            except ZimmerError as exc:
                out[name] = exc.message
    finally:
        await bus.close()
    return out


for _name, _commands in commands():  # a service's own subcommands (`zimmer backlog import`), by entry point
    app.add_typer(_commands, name=_name)
app.add_typer(jobs_app, name="jobs")
app.command("asyncapi")(asyncapi)
app.command("sim")(sim)
app.command("up")(up)


if __name__ == "__main__":
    app()
