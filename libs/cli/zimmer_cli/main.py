"""`zimmer`: run a service, or the whole system on embedded servers, and look at it."""

from __future__ import annotations

import asyncio
import importlib
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

from zimmer_cli.registry import SERVICES, START_ORDER

app = typer.Typer(help="Zimmer control plane: backlog, spot gate, sweeper, alerts and gateway.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

READY_TIMEOUT = 120.0
DataDir = Annotated[Path | None, typer.Option("--data-dir", help="Where embedded servers keep their data "
                                               "(default: $ZIMMER_DATA_DIR or ./.zimmer)")]


def _load_factory(name: str) -> Any:
    if name not in SERVICES:
        raise typer.BadParameter(f"unknown service {name!r}; one of: {', '.join(SERVICES)}")
    module, attr = SERVICES[name].split(":")
    return getattr(importlib.import_module(module), attr)


def _settings(**overrides: Any) -> Any:
    from zimmer_common.settings import ConfigurationError, load_settings

    try:
        return load_settings(**overrides)
    except ConfigurationError as exc:
        typer.secho(f"configuration error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None


def _data_dir(option: Path | None) -> Path:
    return (option or Path(os.environ.get("ZIMMER_DATA_DIR", ".zimmer"))).resolve()


@app.command()
def serve(name: Annotated[str, typer.Argument(help=f"One of: {', '.join(SERVICES)}")]) -> None:
    """Run one service in the foreground until SIGTERM/SIGINT (what containers run)."""
    import uvloop  # libuv's event loop: a service is mostly socket I/O, and uvloop does it faster

    factory = _load_factory(name)
    service = factory(_settings())
    try:
        uvloop.run(service.run_until_signalled())
    except KeyboardInterrupt:
        pass


@app.command()
def migrate(data_dir: DataDir = None) -> None:
    """Apply every service's schema migrations (embedded PostgreSQL unless ZIMMER_DATABASE_URL is set)."""
    from zimmer_common.db import migrate as run_migrations

    pg = None
    url = os.environ.get("ZIMMER_DATABASE_URL")
    if not url:
        from zimmer_cli.embedded import EmbeddedPostgres

        pg = EmbeddedPostgres(_data_dir(data_dir) / "pg")
        url = pg.ensure_database("zimmer")
    try:
        for name in START_ORDER:
            service = _load_factory(name)(_settings(database_url=url))
            if service.schema:
                applied = asyncio.run(run_migrations(url, service.schema, service.migrations))
                typer.echo(f"{name:10s} schema {service.schema:10s} "
                           f"{'applied ' + ', '.join(applied) if applied else 'up to date'}")
    finally:
        if pg:
            pg.stop()


def _credentials(data_dir: Path) -> dict[str, str]:
    """Development credentials: generated once, kept (0600) in the data directory."""
    path = data_dir / "credentials.json"
    if path.exists():
        return json.loads(path.read_text())
    creds = {"api_key": secrets.token_urlsafe(24), "operator_token": secrets.token_urlsafe(24)}
    path.write_text(json.dumps(creds, indent=2))
    path.chmod(0o600)
    return creds


@app.command()
def up(data_dir: DataDir = None,
       port: Annotated[int, typer.Option("--port", help="Gateway HTTP port")] = 8000,
       host: Annotated[str, typer.Option("--host", help="Gateway HTTP bind address")] = "127.0.0.1") -> None:
    """Start the whole system: embedded PostgreSQL and NATS (unless ZIMMER_DATABASE_URL / ZIMMER_NATS_URL
    are set), migrations, and the five services as supervised processes. Ctrl-C stops everything."""
    from zimmer_cli.embedded import EmbeddedPostgres, free_port, port_open, start_nats
    from zimmer_cli.supervisor import Child, Supervisor, say
    from zimmer_common.db import migrate as run_migrations

    root = _data_dir(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    if port_open(host if host != "0.0.0.0" else "127.0.0.1", port):
        typer.secho(f"port {port} is already in use; pass --port to choose another", fg="red", err=True)
        raise typer.Exit(2)
    stopping = {"flag": False}

    def request_stop(_sig: int, _frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    pg = nats = supervisor = None
    runtime_file = root / "runtime.json"
    try:
        db_url = os.environ.get("ZIMMER_DATABASE_URL")
        if not db_url:
            say("INFO", "starting embedded PostgreSQL", pgdata=str(root / "pg"))
            pg = EmbeddedPostgres(root / "pg")
            db_url = pg.ensure_database("zimmer")
        nats_url = os.environ.get("ZIMMER_NATS_URL")
        if not nats_url:
            (root / "logs").mkdir(exist_ok=True)
            nats = start_nats(root / "nats", log_file=root / "logs" / "nats-server.log")
            nats_url = nats.url
            say("INFO", "started embedded NATS", url=nats_url, store=str(root / "nats"))
        env = dict(os.environ, ZIMMER_DATABASE_URL=db_url, ZIMMER_NATS_URL=nats_url, ZIMMER_DATA_DIR=str(root))
        if not os.environ.get("ZIMMER_API_KEY"):
            creds = _credentials(root)
            env.update(ZIMMER_API_KEY=creds["api_key"], ZIMMER_OPERATOR_TOKEN=creds["operator_token"])
        if stopping["flag"]:
            return  # a stop during start-up: the finally below tears down what exists
        settings = _settings(database_url=db_url)
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
                child_env.update(ZIMMER_METRICS_HOST="127.0.0.1", ZIMMER_METRICS_PORT=str(free_port()))
            children.append(Child(name, [sys.executable, "-m", "zimmer_cli", "serve", name], child_env,
                                  root / "logs" / f"{name}.log"))

        def write_runtime() -> None:
            staged = runtime_file.with_suffix(".tmp")  # rename: readers never see half a file
            staged.write_text(json.dumps({
                "supervisor_pid": os.getpid(),
                "gateway_url": f"http://{host}:{port}",
                "nats_url": nats_url,
                "embedded_postgres": pg is not None,
                "services": {c.name: {"pid": c.pid, "restarts": c.restarts,
                                      "metrics_port": c.env.get("ZIMMER_METRICS_PORT"), "log": str(c.log_path)}
                             for c in children},
            }, indent=2))
            staged.replace(runtime_file)

        if stopping["flag"]:
            return
        supervisor = Supervisor(children, on_change=write_runtime)
        supervisor.start_all()
        url = f"http://{host if host != '0.0.0.0' else '127.0.0.1'}:{port}"
        deadline = time.monotonic() + READY_TIMEOUT
        ready = False
        while not stopping["flag"]:
            supervisor.poll()
            if not ready:
                ready = _is_ready(url)
                if ready:
                    typer.echo(f"Zimmer is up: {url}  (API docs {url}/docs; credentials in "
                               f"{root / 'credentials.json'}; logs in {root / 'logs'})", err=False)
                    sys.stdout.flush()
                elif time.monotonic() > deadline:
                    say("ERROR", "not ready in time; see the logs", timeout_seconds=READY_TIMEOUT,
                        logs=str(root / "logs"))
                    raise typer.Exit(1)
            time.sleep(0.25)
    finally:
        if supervisor:
            supervisor.stop_all(timeout=10)
        if nats:
            nats.stop()
        if pg:
            pg.stop()
        runtime_file.unlink(missing_ok=True)
        say("INFO", "stopped")


def _is_ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=3).status_code == 200
    except httpx.HTTPError:
        return False


@app.command()
def status(data_dir: DataDir = None,
           timeout: Annotated[float, typer.Option(help="Seconds to wait for each ping")] = 2.0) -> None:
    """What `zimmer up` is running, and each service's answer to a ping over NATS."""
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
    for name in START_ORDER:
        proc = (runtime or {}).get("services", {}).get(name, {})
        pid = proc.get("pid")
        alive = bool(pid) and psutil.pid_exists(pid)
        answer = answers.get(name)
        line = f"{name:10s} pid {pid or '-':>7}  {'alive' if alive else 'gone ' if runtime else '     '}  "
        if isinstance(answer, dict):
            line += f"ping ok  v{answer['version']}  {answer['instance_id']}  up {answer['uptime_seconds']:.0f}s"
        else:
            healthy = False
            line += f"ping FAILED: {answer}"
        typer.echo(line)
    raise typer.Exit(0 if healthy else 1)


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


backlog_app = typer.Typer(help="The work backlog.", no_args_is_help=True)
app.add_typer(backlog_app, name="backlog")


@backlog_app.command("import")
def backlog_import(
        path: Annotated[str | None, typer.Argument(help="WORK_BACKLOG.json to read (default: "
                                                   "$WORK_BACKLOG_SOURCE_PATH, then the GitHub contents API)")] = None,
        data_dir: DataDir = None) -> None:
    """Import WORK_BACKLOG.json into the work backlog (embedded PostgreSQL unless ZIMMER_DATABASE_URL is set).
    Inserts only, keyed on each item's id, so a second run writes nothing; precedences verbatim."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from zimmer_backlog.importer import ImportSourceUnavailable, resolve_source
    from zimmer_common.settings import Environment

    pg = None
    url = os.environ.get("ZIMMER_DATABASE_URL")
    try:
        if not url:
            from zimmer_cli.embedded import EmbeddedPostgres

            pg = EmbeddedPostgres(_data_dir(data_dir) / "pg")
            url = pg.ensure_database("zimmer")
        env = _settings(database_url=url).env
        source = resolve_source(path)
        with Progress(TextColumn("[bold]importing[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn()) as bar:
            task = bar.add_task(source.describe(), total=None)
            try:
                report = asyncio.run(_import_backlog(
                    url, source, env, lambda done, total: bar.update(task, completed=done, total=total)))
            except ImportSourceUnavailable as exc:
                typer.secho(f"import failed in {Environment.PRODUCTION.value}: {exc}", fg="red", err=True)
                raise typer.Exit(1) from None
    finally:
        if pg:
            pg.stop()
    typer.echo(f"source    {report.source}  (import run {report.run_id})")
    if report.source_unavailable:
        typer.secho(f"nothing imported: {report.error} (recorded on the import run; outside production "
                    "this is not an error)", fg="yellow")
        return
    typer.echo(f"inserted  {report.inserted}")
    reasons = {r: len(report.skipped_for(r)) for r in dict.fromkeys(s.reason for s in report.skipped)}
    typer.echo(f"skipped   {len(report.skipped)}" + (f"  ({', '.join(f'{n} {r}' for r, n in reasons.items())})"
                                                     if reasons else ""))
    for s in report.skipped:
        if s.reason != "already_imported":
            typer.secho(f"  - {s.id}: {s.reason}: {s.detail}", fg="yellow")


async def _import_backlog(url: str, source: Any, env: Any, progress: Any) -> Any:
    from zimmer_backlog.backlog import SCHEMA
    from zimmer_backlog.importer import import_backlog
    from zimmer_common.db import create_engine
    from zimmer_common.db import migrate as run_migrations

    await run_migrations(url, SCHEMA, "zimmer_backlog.migrations")
    engine = create_engine(url, pool_size=2, max_overflow=0, app_name="zimmer-backlog-import")
    try:
        return await import_backlog(engine, source=source, env=env, progress=progress)
    finally:
        await engine.dispose()


if __name__ == "__main__":
    app()
