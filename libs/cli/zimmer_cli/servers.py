"""The embedded servers as supervised children of `zimmer up`.

Each is fixed for the life of the supervisor, so a restart keeps the URLs the services were
given: NATS on the same port with the same store directory, PostgreSQL on the same data
directory and socket directory. Both are killed with what is left of their process group when
they die (a postmaster killed with -9 leaves backends holding its shared memory), so the next
attempt starts clean; an attempt that still fails is retried with backoff.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from zimmer_cli.embedded import (
    PG_START_TIMEOUT,
    PG_STOP_TIMEOUT,
    PgLayout,
    nats_argv,
    nats_server_binary,
    pg_accepts_connections,
    port_open,
    running_postmaster,
)
from zimmer_cli.supervisor import NATS_TIER, POSTGRES_TIER, Child
from zimmer_cli.topology import NatsNode
from zimmer_common.tls import client_tls

NATS = "nats-server"
POSTGRES = "postgres"
NATS_READY_TIMEOUT = 60.0  # JetStream recovers its streams from the store before it listens


def nats_child(store_dir: Path, port: int, log_path: Path) -> Child:
    store_dir.mkdir(parents=True, exist_ok=True)
    return Child(NATS, nats_argv(store_dir, port), None, log_path, kind="server", tier=NATS_TIER,
                 ready_check=lambda: port_open("127.0.0.1", port), ready_timeout=NATS_READY_TIMEOUT,
                 stop_signal=signal.SIGTERM, stop_timeout=5.0, kill_leftovers=True)


def postgres_child(layout: PgLayout, log_path: Path) -> Child:
    """The postmaster in the foreground; fast shutdown (SIGINT) to stop it."""
    kwargs = layout.popen_kwargs()
    env = kwargs.pop("env")
    child = Child(POSTGRES, layout.argv(), env, log_path, kind="server", tier=POSTGRES_TIER,
                  ready_timeout=PG_START_TIMEOUT, stop_signal=signal.SIGINT, stop_timeout=PG_STOP_TIMEOUT,
                  signal_group=False, kill_leftovers=True, popen_kwargs=kwargs, before_start=layout.ensure_access)

    def ready() -> bool:
        # Ours (not a stranger holding the socket), past recovery, and a connection succeeds.
        running = running_postmaster(layout.pgdata)
        return (running is not None and running.pid == child.pid and running.status == "ready"
                and pg_accepts_connections(layout.url(), timeout=2.0))

    child.ready_check = ready
    return child


def nats_cluster_child(node: NatsNode, log_path: Path) -> Child:
    """One node of `zimmer up --cluster`'s NATS cluster. Ready once it listens, its monitoring
    endpoint calls it healthy and it knows the JetStream meta leader: before that a stream with
    three replicas cannot be created, and a node that restarts is back only when it rejoined."""
    node.store.mkdir(parents=True, exist_ok=True)

    def ready() -> bool:
        if not port_open("127.0.0.1", node.client_port):
            return False
        try:
            healthy = httpx.get(f"{node.monitor_url}/healthz", timeout=1.0, verify=client_tls()).status_code == 200
            meta = httpx.get(f"{node.monitor_url}/jsz", timeout=1.0, verify=client_tls()).json().get("meta_cluster") or {}
        except (httpx.HTTPError, ValueError):
            return False
        return healthy and bool(meta.get("leader"))

    return Child(node.name, node.argv(nats_server_binary()), None, log_path, kind="server", tier=NATS_TIER,
                 ready_check=ready, ready_timeout=NATS_READY_TIMEOUT, stop_signal=signal.SIGTERM, stop_timeout=5.0,
                 kill_leftovers=True)
