"""`zimmer up`: the whole system on this machine, every process supervised (restarted with
backoff when it dies): embedded PostgreSQL, embedded NATS (one node, or with `--cluster` three
routed nodes), the migrations, then the services as `topology.plan()` lays them out (one
process each, or with `--cluster` two replicas each, two gateways and a sweeper per simulated
runtime host). What runs is written to DATA_DIR/runtime.json, which `zimmer status` reads."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from zimmer_cli.common import DataDir, _data_dir, _settings
from zimmer_cli.topology import Plan, disk_roots, plan
from zimmer_common.tls import client_tls

READY_TIMEOUT = 120.0
MIGRATE_TIMEOUT = 300.0  # every schema's migrations, on a slow machine
CLUSTER_READY_TIMEOUT = 240.0  # eleven Python processes starting together on a small machine
SIM = "sim"
SIM_BANNER = ("A simulated fleet is attached (zimmer sim: sessions, spend, quota windows and a fake GitHub; it "
              "spends no money and pages nobody); `zimmer up --no-sim` or ZIMMER_SIM=off for a real runtime.")
CLUSTER_STREAM_REPLICAS = "3"  # every stream on all three nodes: any one of them may die


def up(data_dir: DataDir = None,
       port: Annotated[int, typer.Option("--port", help="Gateway HTTP port (with --cluster, the second gateway "
                                         "listens on the next one)")] = 8000,
       host: Annotated[str, typer.Option("--host", help="Gateway HTTP bind address")] = "127.0.0.1",
       no_sim: Annotated[bool, typer.Option("--no-sim", help="Attach no simulated fleet (a real runtime will "
                                            "connect); also ZIMMER_SIM=off")] = False,
       cluster: Annotated[bool, typer.Option("--cluster", help="The distributed mode on this machine: three NATS "
                                             "nodes with JetStream, two replicas of each service, two gateways "
                                             "(--port and the next), one sweeper per simulated runtime host "
                                             "(docs/operations.md)")] = False) -> None:
    """Start the whole system: embedded PostgreSQL and NATS (unless ZIMMER_DATABASE_URL / ZIMMER_NATS_URL
    are set), migrations, and the five services as supervised processes. A server or service that dies
    is restarted with backoff. In development a simulated fleet (`zimmer sim`) is attached, with a fake
    GitHub the backlog reads, so the pages show the system at work. Ctrl-C stops everything."""
    from zimmer_cli.embedded import (
        PG_START_TIMEOUT,
        become_subreaper,
        ensure_database,
        free_port,
        port_open,
        prepare_pgdata,
        running_postmaster,
    )
    from zimmer_cli.servers import NATS, POSTGRES, nats_child, nats_cluster_child, postgres_child
    from zimmer_cli.supervisor import Child, Supervisor, say

    root = _data_dir(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    other = _other_supervisor(root)
    if other:
        typer.secho(f"zimmer up is already running on {root} (pid {other})", fg="red", err=True)
        raise typer.Exit(2)
    for gateway_port in (port, port + 1) if cluster else (port,):
        if port_open(host if host != "0.0.0.0" else "127.0.0.1", gateway_port):
            typer.secho(f"port {gateway_port} is already in use; pass --port to choose another", fg="red", err=True)
            raise typer.Exit(2)
    stopping = {"flag": False}

    def request_stop(_sig: int, _frame: Any) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    runtime_file = root / "runtime.json"
    external_nats = os.environ.get("ZIMMER_NATS_URL")
    layout = plan(cluster=cluster, root=root, port=port, http_host=host, embedded_nats=not external_nats,
                  free_port=free_port)
    shown_host = host if host != "0.0.0.0" else "127.0.0.1"
    gateway_urls = [f"http://{shown_host}:{p}" for p in layout.gateway_ports]
    nats_url = external_nats or layout.nats_url
    state: dict[str, Any] = {"pg": None}

    def write_runtime() -> None:
        staged = runtime_file.with_suffix(".tmp")  # rename: readers never see half a file
        staged.write_text(json.dumps(_runtime(supervisor.children, layout, state["pg"], nats_url, gateway_urls,
                                              root), indent=2))
        staged.replace(runtime_file)

    supervisor = Supervisor(on_change=write_runtime, reap_orphans=become_subreaper())
    try:
        servers: list[Child] = []
        db_url = os.environ.get("ZIMMER_DATABASE_URL")
        if not db_url:
            say("INFO", "preparing embedded PostgreSQL", pgdata=str(root / "pg"))
            pg = prepare_pgdata(root / "pg")
            deadline = time.monotonic() + PG_START_TIMEOUT
            while (stranger := running_postmaster(pg.pgdata)) is not None and not stopping["flag"]:
                if time.monotonic() > deadline:  # not ours to stop: a `zimmer migrate`, an older zimmer up, ...
                    typer.secho(f"another PostgreSQL (pid {stranger.pid}) is running on {pg.pgdata} and did "
                                f"not stop within {PG_START_TIMEOUT:g}s; stop it (kill -INT {stranger.pid}) and "
                                "start again", fg="red", err=True)
                    raise typer.Exit(2)
                time.sleep(0.5)
            state["pg"] = pg
            servers.append(postgres_child(pg, logs / "postgres.log"))
            db_url = pg.url("zimmer")
        if layout.cluster:  # ports kept for the life of this supervisor: restarts reuse them
            servers += [nats_cluster_child(node, logs / f"{node.name}.log") for node in layout.nats_nodes]
        elif layout.nats_nodes:
            node = layout.nats_nodes[0]
            servers.append(nats_child(root / "nats", node.client_port, logs / "nats-server.log"))
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
        if layout.cluster and layout.nats_nodes:
            say("INFO", "embedded NATS cluster ready", url=nats_url,
                nodes={n.name: {"pid": supervisor.child(n.name).pid, "client_port": n.client_port,
                                "route_port": n.route_port, "monitor_port": n.monitor_port} for n in layout.nats_nodes})
        elif any(c.name == NATS for c in servers):
            say("INFO", "embedded NATS ready", url=nats_url, store=str(root / "nats"), pid=supervisor.child(NATS).pid)
        creds, creds_from = _credentials(root)
        env = dict(os.environ, ZIMMER_DATABASE_URL=db_url, ZIMMER_NATS_URL=nats_url, ZIMMER_DATA_DIR=str(root),
                   ZIMMER_API_KEY=creds["api_key"], ZIMMER_OPERATOR_TOKEN=creds["operator_token"])
        if layout.cluster and layout.nats_nodes:
            env["ZIMMER_STREAM_REPLICAS"] = CLUSTER_STREAM_REPLICAS
        if stopping["flag"]:
            return
        settings = _settings(database_url=db_url)
        fleet = _simulated_fleet(no_sim, settings)
        if fleet is not None:
            env.update(fleet)  # the backlog reads the simulated fleet's fake GitHub
        # `zimmer migrate` in a child: building the five services to read their migrations imports
        # all of them, which kept ~90 MB in this supervisor for as long as it ran.
        migrated = subprocess.run([sys.executable, "-m", "zimmer_cli", "migrate"], env=dict(env, ZIMMER_DATABASE_URL=db_url),
                                  capture_output=True, text=True, timeout=MIGRATE_TIMEOUT, check=False)
        if stopping["flag"]:
            return
        if migrated.returncode != 0:
            say("ERROR", "migrations failed; nothing started", exit_code=migrated.returncode,
                output=(migrated.stderr or migrated.stdout)[-2000:])
            raise typer.Exit(1)
        say("INFO", "schemas migrated", schemas=[line.split()[0] for line in migrated.stdout.splitlines() if line.strip()])

        children = []
        for process in layout.processes:
            child_env = dict(env, **process.env)
            if process.service == "sweeper" and process.host is None:
                child_env.update(_embedded_disk_roots(root, child_env))
            elif process.host is not None:
                _make_dirs(process.env)
            children.append(Child(process.name, [sys.executable, "-m", "zimmer_cli", "serve", process.service],
                                  child_env, logs / f"{process.name}.log"))
        if fleet is not None:  # in cluster mode it runs on the first simulated host, beside its sweeper
            sim_host = layout.hosts[0] if layout.hosts else settings.host
            sim_roots = (_make_dirs(disk_roots(root / "runtime" / sim_host)) if layout.hosts
                         else _embedded_disk_roots(root, env))
            children.append(Child(SIM, [sys.executable, "-m", "zimmer_cli", "sim", "--quiet", "--name", "zimmer-sim"],
                                  dict(env, ZIMMER_HOST=sim_host, **sim_roots), logs / "sim.log", kind="fleet"))
        if stopping["flag"]:
            return
        supervisor.start(children)
        ready_timeout = CLUSTER_READY_TIMEOUT if layout.cluster else READY_TIMEOUT
        deadline = time.monotonic() + ready_timeout
        ready = False
        while not stopping["flag"]:
            supervisor.poll()
            if not ready:
                ready = all(_is_ready(url) for url in gateway_urls)
                if ready:
                    token = ("ZIMMER_OPERATOR_TOKEN" if os.environ.get("ZIMMER_OPERATOR_TOKEN")
                             else creds["operator_token"])  # the generated development token: shown to sign in with
                    url = gateway_urls[0]
                    typer.echo(f"Zimmer is up: {' and '.join(gateway_urls)}  (operator pages: {url}/signin with "
                               f"operator token {token}; API docs {url}/docs; {creds_from}; logs in {logs})")
                    if layout.cluster:
                        typer.echo(_cluster_banner(layout, nats_url))
                    typer.echo(SIM_BANNER if fleet is not None else "No simulated fleet attached: waiting for a "
                               "runtime to connect (docs/runtime.md).")
                    sys.stdout.flush()
                elif time.monotonic() > deadline:
                    say("ERROR", "not ready in time; see the logs", timeout_seconds=ready_timeout, logs=str(logs))
                    raise typer.Exit(1)
            time.sleep(0.25)
    finally:
        supervisor.stop_all()
        runtime_file.unlink(missing_ok=True)
        say("INFO", "stopped")


def _cluster_banner(layout: Plan, nats_url: str | None) -> str:
    lines = [f"NATS: {nats_url}"]
    for node in layout.nats_nodes:
        lines.append(f"  {node.name}: client {node.client_port}, routes {node.route_port}, "
                     f"monitoring {node.monitor_url}, store {node.store}")
    lines.append("Replicas: " + ", ".join(p.name + (f" (:{p.http_port})" if p.http_port else "")
                                          for p in layout.processes))
    lines.append("To try a failover, kill -9 a node's or a replica's pid from `zimmer status` (docs/operations.md).")
    return "\n".join(lines)


def _runtime(children: list[Any], layout: Plan, pg: Any, nats_url: str | None, gateway_urls: list[str],
             root: Path) -> dict[str, Any]:
    """runtime.json: every server, every service process (keyed by its child's name: the service
    alone in single mode, `backlog-2` in cluster mode) and the fleet."""
    nodes = {node.name: node for node in layout.nats_nodes}
    processes = {p.name: p for p in layout.processes}
    servers: dict[str, Any] = {}
    for c in children:
        if c.name in nodes:
            node = nodes[c.name]
            servers[c.name] = {**c.info(), "url": node.url, "store": str(node.store), "client_port": node.client_port,
                               "route_port": node.route_port, "monitor_url": node.monitor_url}
        elif c.kind == "server" and c.name != "postgres":  # the single node of the default mode
            servers[c.name] = {**c.info(), "url": nats_url, "store": str(root / "nats")}
        elif c.name == "postgres":
            servers[c.name] = {**c.info(), "pgdata": str(pg.pgdata), "socket_dir": str(pg.socket_dir)}
    services = {}
    for c in children:
        if c.kind == "service":
            p = processes[c.name]
            services[c.name] = {**c.info(), "metrics_port": (c.env or {}).get("ZIMMER_METRICS_PORT"),
                                "service": p.service, "instance_id": p.instance_id,
                                **({"host": p.host} if p.host else {}),
                                **({"http_port": p.http_port} if p.http_port else {})}
    return {"supervisor_pid": os.getpid(), "cluster": layout.cluster, "gateway_url": gateway_urls[0],
            "gateway_urls": gateway_urls, "nats_url": nats_url, "embedded_postgres": pg is not None,
            "servers": servers, "services": services,
            "fleet": {c.name: c.info() for c in children if c.kind == "fleet"}}


def _make_dirs(env: dict[str, str]) -> dict[str, str]:
    """Create the sweeper roots named in `env` (so the Health page's Disk panel reads them)."""
    for var, path in env.items():
        if var.startswith("ZIMMER_SWEEPER_") and var.endswith("_DIR"):
            Path(path).mkdir(parents=True, exist_ok=True)
    return {k: v for k, v in env.items() if k.startswith("ZIMMER_SWEEPER_")}


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
        return httpx.get(f"{url}/readyz", timeout=3, verify=client_tls()).status_code == 200
    except httpx.HTTPError:
        return False


def _embedded_disk_roots(root: Path, env: dict[str, str]) -> dict[str, str]:
    """The sweeper's roots for this machine's runtime, under the data directory unless configured
    (ZIMMER_SWEEPER_<ROOT>_DIR): created, so the Health page's Disk and clones panel reads them."""
    roots = {var: env.get(var) or path for var, path in disk_roots(root / "runtime").items()}
    return _make_dirs(roots)
