"""`zimmer`: run a service, or the whole system on embedded servers, and look at it."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from zimmer_cli.asyncapi_cmd import asyncapi
from zimmer_cli.backlog_cmd import backlog_app
from zimmer_cli.jobs_cmd import jobs_app
from zimmer_cli.common import DataDir, _data_dir, _embedded_postgres, _load_factory, _settings
from zimmer_cli.registry import SERVICES, START_ORDER
from zimmer_cli.sim_cmd import sim

app = typer.Typer(help="Zimmer control plane: backlog, spot gate, sweeper, alerts and gateway.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

READY_TIMEOUT = 120.0


@app.command()
def serve(name: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICES)}")]) -> None:
    """Run one service in the foreground until SIGTERM/SIGINT (what containers run)."""
    import uvloop  # libuv's event loop: a service is mostly socket I/O, and uvloop does it faster

    factory = _load_factory(name)
    service = factory(_settings())
    service.on_start(_tune_collector)
    try:
        uvloop.run(service.run_until_signalled())
    except KeyboardInterrupt:
        pass


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


def _credentials(data_dir: Path) -> tuple[dict[str, str], str]:
    """Each credential from its environment variable when set; otherwise from the development
    credentials kept (0600) in the data directory, generated the first time. Returns them and
    a phrase saying where they came from (for the "Zimmer is up" line)."""
    api_key, token = os.environ.get("ZIMMER_API_KEY"), os.environ.get("ZIMMER_OPERATOR_TOKEN")
    if api_key and token:
        return {"api_key": api_key, "operator_token": token}, "credentials from ZIMMER_API_KEY / ZIMMER_OPERATOR_TOKEN"
    path = data_dir / "credentials.json"
    if path.exists():
        stored = json.loads(path.read_text())
    else:
        stored = {"api_key": secrets.token_urlsafe(24), "operator_token": secrets.token_urlsafe(24)}
        path.write_text(json.dumps(stored, indent=2))
        path.chmod(0o600)
    creds = {"api_key": api_key or stored["api_key"], "operator_token": token or stored["operator_token"]}
    if api_key:
        return creds, f"API key from ZIMMER_API_KEY, operator token in {path}"
    if token:
        return creds, f"API key in {path}, operator token from ZIMMER_OPERATOR_TOKEN"
    return creds, f"credentials in {path}"


def _other_supervisor(root: Path) -> int | None:
    """The pid of a live `zimmer up` already running on this data directory, if any."""
    import psutil

    try:
        pid = int(json.loads((root / "runtime.json").read_text())["supervisor_pid"])
        proc = psutil.Process(pid)
        if pid != os.getpid() and proc.status() != psutil.STATUS_ZOMBIE and \
                any("zimmer" in arg for arg in proc.cmdline()):
            return pid
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        pass
    return None


@app.command()
def up(data_dir: DataDir = None,
       port: Annotated[int, typer.Option("--port", help="Gateway HTTP port")] = 8000,
       host: Annotated[str, typer.Option("--host", help="Gateway HTTP bind address")] = "127.0.0.1",
       no_sim: Annotated[bool, typer.Option("--no-sim", help="Attach no simulated fleet (a real runtime will "
                                            "connect); also ZIMMER_SIM=off")] = False) -> None:
    """Start the whole system: embedded PostgreSQL and NATS (unless ZIMMER_DATABASE_URL / ZIMMER_NATS_URL
    are set), migrations, and the five services as supervised processes. A server or service that dies
    is restarted with backoff. In development a simulated fleet (`zimmer sim`) is attached, with a fake
    GitHub the backlog reads, so the pages show the system at work. Ctrl-C stops everything."""
    from zimmer_cli.embedded import (
        PG_START_TIMEOUT,
        become_subreaper,
        ensure_database,
        free_port,
        nats_url as embedded_nats_url,
        port_open,
        prepare_pgdata,
        running_postmaster,
    )
    from zimmer_cli.servers import NATS, POSTGRES, nats_child, postgres_child
    from zimmer_cli.supervisor import Child, Supervisor, say
    from zimmer_common.db import migrate as run_migrations

    root = _data_dir(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    other = _other_supervisor(root)
    if other:
        typer.secho(f"zimmer up is already running on {root} (pid {other})", fg="red", err=True)
        raise typer.Exit(2)
    if port_open(host if host != "0.0.0.0" else "127.0.0.1", port):
        typer.secho(f"port {port} is already in use; pass --port to choose another", fg="red", err=True)
        raise typer.Exit(2)
    stopping = {"flag": False}

    def request_stop(_sig: int, _frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    runtime_file = root / "runtime.json"
    gateway_url = f"http://{host}:{port}"
    state: dict[str, Any] = {"nats_url": os.environ.get("ZIMMER_NATS_URL"), "pg": None}

    def write_runtime() -> None:
        staged = runtime_file.with_suffix(".tmp")  # rename: readers never see half a file
        servers: dict[str, Any] = {}
        for c in supervisor.children:
            if c.name == NATS:
                servers[c.name] = {**c.info(), "url": state["nats_url"], "store": str(root / "nats")}
            elif c.name == POSTGRES:
                servers[c.name] = {**c.info(), "pgdata": str(state["pg"].pgdata),
                                   "socket_dir": str(state["pg"].socket_dir)}
        staged.write_text(json.dumps({
            "supervisor_pid": os.getpid(),
            "gateway_url": gateway_url,
            "nats_url": state["nats_url"],
            "embedded_postgres": state["pg"] is not None,
            "servers": servers,
            "services": {c.name: {**c.info(), "metrics_port": (c.env or {}).get("ZIMMER_METRICS_PORT")}
                         for c in supervisor.children if c.kind == "service"},
            "fleet": {c.name: c.info() for c in supervisor.children if c.kind == "fleet"},
        }, indent=2))
        staged.replace(runtime_file)

    supervisor = Supervisor(on_change=write_runtime, reap_orphans=become_subreaper())
    try:
        servers: list[Child] = []
        db_url = os.environ.get("ZIMMER_DATABASE_URL")
        if not db_url:
            say("INFO", "preparing embedded PostgreSQL", pgdata=str(root / "pg"))
            layout = prepare_pgdata(root / "pg")
            deadline = time.monotonic() + PG_START_TIMEOUT
            while (stranger := running_postmaster(layout.pgdata)) is not None and not stopping["flag"]:
                if time.monotonic() > deadline:  # not ours to stop: a `zimmer migrate`, an older zimmer up, ...
                    typer.secho(f"another PostgreSQL (pid {stranger.pid}) is running on {layout.pgdata} and did "
                                f"not stop within {PG_START_TIMEOUT:g}s; stop it (kill -INT {stranger.pid}) and "
                                "start again", fg="red", err=True)
                    raise typer.Exit(2)
                time.sleep(0.5)
            state["pg"] = layout
            servers.append(postgres_child(layout, logs / "postgres.log"))
            db_url = layout.url("zimmer")
        if not state["nats_url"]:
            nats_port = free_port()  # kept for the life of this supervisor: restarts reuse it
            servers.append(nats_child(root / "nats", nats_port, logs / "nats-server.log"))
            state["nats_url"] = embedded_nats_url(nats_port)
        if stopping["flag"]:
            return  # a stop during start-up: the finally below tears down what exists
        if servers:
            supervisor.start(servers)
            if not supervisor.wait_ready(servers, READY_TIMEOUT, lambda: stopping["flag"]):
                if stopping["flag"]:
                    return
                say("ERROR", "embedded servers not ready in time; see the logs", timeout_seconds=READY_TIMEOUT,
                    logs=str(logs), **{c.name: {"ready": c.ready, "restarts": c.restarts} for c in servers})
                raise typer.Exit(1)
        if state["pg"] is not None:
            ensure_database(state["pg"].url("postgres"), "zimmer")
            say("INFO", "embedded PostgreSQL ready", pgdata=str(state["pg"].pgdata),
                socket_dir=str(state["pg"].socket_dir), pid=supervisor.child(POSTGRES).pid)
        if any(c.name == NATS for c in servers):
            say("INFO", "embedded NATS ready", url=state["nats_url"], store=str(root / "nats"),
                pid=supervisor.child(NATS).pid)
        creds, creds_from = _credentials(root)
        env = dict(os.environ, ZIMMER_DATABASE_URL=db_url, ZIMMER_NATS_URL=state["nats_url"],
                   ZIMMER_DATA_DIR=str(root), ZIMMER_API_KEY=creds["api_key"],
                   ZIMMER_OPERATOR_TOKEN=creds["operator_token"])
        if stopping["flag"]:
            return
        settings = _settings(database_url=db_url)
        fleet = _simulated_fleet(no_sim, settings)
        if fleet is not None:
            env.update(fleet)  # the backlog reads the simulated fleet's fake GitHub
        for name in START_ORDER:
            service = _load_factory(name)(settings)
            if service.schema:
                asyncio.run(run_migrations(db_url, service.schema, service.migrations))
        say("INFO", "schemas migrated")

        children = []
        for name in START_ORDER:
            child_env = dict(env, ZIMMER_INSTANCE_ID=f"{name}-1")
            if name == "gateway":
                child_env.update(ZIMMER_HTTP_HOST=host, ZIMMER_HTTP_PORT=str(port))
            else:
                if name == "sweeper":
                    child_env.update(_embedded_disk_roots(root, child_env))
                child_env.update(ZIMMER_METRICS_HOST="127.0.0.1", ZIMMER_METRICS_PORT=str(free_port()))
            children.append(Child(name, [sys.executable, "-m", "zimmer_cli", "serve", name], child_env,
                                  logs / f"{name}.log"))
        if fleet is not None:
            children.append(Child(SIM, [sys.executable, "-m", "zimmer_cli", "sim", "--quiet", "--name", "zimmer-sim"],
                                  dict(env, ZIMMER_HOST=settings.host, **_embedded_disk_roots(root, env)),
                                  logs / "sim.log", kind="fleet"))
        if stopping["flag"]:
            return
        supervisor.start(children)
        url = f"http://{host if host != '0.0.0.0' else '127.0.0.1'}:{port}"
        deadline = time.monotonic() + READY_TIMEOUT
        ready = False
        while not stopping["flag"]:
            supervisor.poll()
            if not ready:
                ready = _is_ready(url)
                if ready:
                    token = ("ZIMMER_OPERATOR_TOKEN" if os.environ.get("ZIMMER_OPERATOR_TOKEN")
                             else creds["operator_token"])  # the generated development token: shown to sign in with
                    typer.echo(f"Zimmer is up: {url}  (operator pages: {url}/signin with operator token {token}; "
                               f"API docs {url}/docs; {creds_from}; logs in {logs})")
                    typer.echo(SIM_BANNER if fleet is not None else "No simulated fleet attached: waiting for a "
                               "runtime to connect (docs/runtime.md).")
                    sys.stdout.flush()
                elif time.monotonic() > deadline:
                    say("ERROR", "not ready in time; see the logs", timeout_seconds=READY_TIMEOUT, logs=str(logs))
                    raise typer.Exit(1)
            time.sleep(0.25)
    finally:
        supervisor.stop_all()
        runtime_file.unlink(missing_ok=True)
        say("INFO", "stopped")


SIM = "sim"
SIM_BANNER = ("A simulated fleet is attached (zimmer sim: sessions, spend, quota windows and a fake GitHub; it "
              "spends no money and pages nobody); `zimmer up --no-sim` or ZIMMER_SIM=off for a real runtime.")


def _simulated_fleet(no_sim: bool, settings: Any) -> dict[str, str] | None:
    """The environment the backlog needs to read the simulated fleet's fake GitHub, or None when no
    fleet is attached: asked not to, outside development, or with a real GitHub configured."""
    if no_sim or os.environ.get("ZIMMER_SIM", "on").strip().lower() in ("off", "0", "false", "no"):
        return None
    if settings.env.value != "development" or os.environ.get("ZIMMER_GITHUB_API_URL"):
        return None
    from zimmer_cli.embedded import free_port

    port = free_port()
    return {"ZIMMER_SIM_GITHUB_PORT": str(port), "ZIMMER_GITHUB_API_URL": f"http://127.0.0.1:{port}",
            "ZIMMER_GITHUB_TOKEN": "sim-github-token"}


def _is_ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


@app.command()
def status(data_dir: DataDir = None,
           timeout: Annotated[float, typer.Option(help="Seconds to wait for each ping")] = 2.0) -> None:
    """What `zimmer up` is running (embedded servers and services: pid, restarts), and each service's
    answer to a ping over NATS. Exit 1 if a server is down or a service did not answer."""
    import psutil

    runtime_file = _data_dir(data_dir) / "runtime.json"
    runtime = json.loads(runtime_file.read_text()) if runtime_file.exists() else None
    nats_url = os.environ.get("ZIMMER_NATS_URL") or (runtime or {}).get("nats_url")
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
    for name in START_ORDER:
        proc = (runtime or {}).get("services", {}).get(name, {})
        pid = proc.get("pid")
        alive = bool(pid) and psutil.pid_exists(pid)
        answer = answers.get(name)
        line = f"{name:11s} pid {pid or '-':>7}  {'alive' if alive else 'gone ' if runtime else '     '}  "
        if runtime:
            line += f"restarts {proc.get('restarts', 0)}  "
        if isinstance(answer, dict):
            line += f"ping ok  v{answer['version']}  {answer['instance_id']}  up {answer['uptime_seconds']:.0f}s"
        else:
            healthy = False
            line += f"ping FAILED: {answer}"
        typer.echo(line)
    raise typer.Exit(0 if healthy else 1)


def _embedded_disk_roots(root: Path, env: dict[str, str]) -> dict[str, str]:
    """The sweeper's roots for this machine's runtime, under the data directory unless configured
    (ZIMMER_SWEEPER_<ROOT>_DIR): created, so the Health page's Disk and clones panel reads them."""
    from zimmer_common.contracts.disk import ROOT_NAMES

    roots = {}
    for name in ROOT_NAMES:
        var = f"ZIMMER_SWEEPER_{name.upper()}_DIR"
        path = Path(env.get(var) or root / "runtime" / name)
        path.mkdir(parents=True, exist_ok=True)
        roots[var] = str(path)
    return roots


async def _ping_all(nats_url: str, timeout: float) -> dict[str, Any]:
    from zimmer_common.bus import Bus
    from zimmer_common.contracts.ops import PingRequest, ping_rpc
    from zimmer_common.contracts.subjects import CONTEXTS
    from zimmer_common.errors import ZimmerError

    try:
        bus = await Bus.connect([u for u in nats_url.split(",") if u], service="cli", instance_id=str(os.getpid()),
                                rpc_timeout=timeout)
    except ZimmerError as exc:
        return {name: exc.message for name in START_ORDER}
    out: dict[str, Any] = {}
    try:
        for name in START_ORDER:
            try:
                out[name] = (await bus.request(ping_rpc(CONTEXTS[name]), PingRequest())).model_dump(mode="json")
            except ZimmerError as exc:
                out[name] = exc.message
    finally:
        await bus.close()
    return out


app.add_typer(backlog_app, name="backlog")
app.add_typer(jobs_app, name="jobs")
app.command("asyncapi")(asyncapi)
app.command("sim")(sim)


if __name__ == "__main__":
    app()
