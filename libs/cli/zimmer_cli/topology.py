"""What `zimmer up` runs, decided before anything starts: the embedded NATS node(s) and every
service process, with their ports, instance ids and hosts.

`plan()` only picks ports and writes down names; it starts nothing and creates nothing, so it is
tested on its own. One node and one process per service by default; with `cluster`, the
distributed mode on one machine: three NATS nodes with JetStream routed to each other on
loopback (a stream keeps three replicas and survives the loss of any one node), two replicas of
every service but the sweeper, two gateways on consecutive ports, and one sweeper per simulated
runtime host, each with its own disk under the data directory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from zimmer_cli.registry import START_ORDER

NATS_CLUSTER_NAME = "zimmer"
CLUSTER_NATS_NODES = 3  # the smallest JetStream cluster that keeps a quorum with one node down
CLUSTER_REPLICAS = 2  # of each service but the sweeper, which runs one per host instead
CLUSTER_HOSTS = ("host-a", "host-b")  # the simulated runtime hosts, a sweeper and a disk each
SWEEPER = "sweeper"
GATEWAY = "gateway"


@dataclass(frozen=True)
class NatsNode:
    name: str  # the child's name and the server's: nats-1, nats-2, nats-3
    client_port: int
    route_port: int
    monitor_port: int
    store: Path
    routes: tuple[str, ...]  # the other nodes' route URLs

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"

    def argv(self, binary: str) -> list[str]:
        return [binary, "-js", "-sd", str(self.store), "-a", "127.0.0.1", "-p", str(self.client_port),
                "-n", self.name, "-m", str(self.monitor_port), "--cluster_name", NATS_CLUSTER_NAME,
                "--cluster", f"nats://127.0.0.1:{self.route_port}", "--routes", ",".join(self.routes)]


@dataclass(frozen=True)
class ServiceProcess:
    name: str  # the child's name: the service in single mode, its instance id in cluster mode
    service: str
    instance_id: str
    env: dict[str, str] = field(default_factory=dict)  # what this process gets beyond the shared env
    host: str | None = None  # the simulated runtime host (cluster sweepers), None: this machine's name
    http_port: int | None = None  # gateways
    metrics_port: int | None = None  # the others (the gateway serves /metrics on its HTTP port)


@dataclass(frozen=True)
class Plan:
    cluster: bool
    nats_nodes: tuple[NatsNode, ...]  # empty when ZIMMER_NATS_URL names an outside NATS
    processes: tuple[ServiceProcess, ...]

    @property
    def nats_url(self) -> str | None:
        """Every node's client URL, comma-separated (how ZIMMER_NATS_URL lists servers)."""
        return ",".join(node.url for node in self.nats_nodes) or None

    @property
    def gateway_ports(self) -> list[int]:
        return [p.http_port for p in self.processes if p.http_port is not None]

    @property
    def hosts(self) -> list[str]:
        return [p.host for p in self.processes if p.service == SWEEPER and p.host]


def disk_roots(runtime_dir: Path) -> dict[str, str]:
    """The sweeper's root variables for a runtime host whose disk is `runtime_dir`."""
    from zimmer_common.contracts.disk import ROOT_NAMES

    return {f"ZIMMER_SWEEPER_{name.upper()}_DIR": str(runtime_dir / name) for name in ROOT_NAMES}


def plan(*, cluster: bool, root: Path, port: int, http_host: str = "127.0.0.1", embedded_nats: bool = True,
         free_port: Callable[[], int]) -> Plan:
    """The children of `zimmer up` on data directory `root`, the (first) gateway on `port`.
    `free_port` picks every other port: each is asked for once, so none is handed out twice."""
    taken = {port, port + 1} if cluster else {port}

    def fresh_port() -> int:
        for _ in range(100):
            candidate = free_port()
            if candidate not in taken:
                taken.add(candidate)
                return candidate
        raise RuntimeError("no free port found")

    nodes: list[NatsNode] = []
    if embedded_nats:
        count = CLUSTER_NATS_NODES if cluster else 1
        ports = [(fresh_port(), fresh_port(), fresh_port()) for _ in range(count)]
        for index, (client, route, monitor) in enumerate(ports):
            name = f"nats-{index + 1}"
            others = tuple(f"nats://127.0.0.1:{r}" for i, (_c, r, _m) in enumerate(ports) if i != index)
            nodes.append(NatsNode(name, client, route, monitor, root / name, others))

    processes: list[ServiceProcess] = []
    for service in START_ORDER:
        if not cluster:
            processes.append(_process(service, f"{service}-1", service, http_host, port, None, root, fresh_port))
        elif service == SWEEPER:
            for host in CLUSTER_HOSTS:
                processes.append(_process(f"{service}-{host}", f"{service}-{host}", service, http_host, None, host,
                                          root, fresh_port))
        else:
            for replica in range(1, CLUSTER_REPLICAS + 1):
                name = f"{service}-{replica}"
                processes.append(_process(name, name, service, http_host, port + replica - 1, None, root,
                                          fresh_port))
    return Plan(cluster, tuple(nodes), tuple(processes))


def _process(name: str, instance_id: str, service: str, http_host: str, http_port: int | None, host: str | None,
             root: Path, fresh_port: Callable[[], int]) -> ServiceProcess:
    env = {"ZIMMER_INSTANCE_ID": instance_id}
    if service == GATEWAY:
        assert http_port is not None
        env.update(ZIMMER_HTTP_HOST=http_host, ZIMMER_HTTP_PORT=str(http_port))
        return ServiceProcess(name, service, instance_id, env, http_port=http_port)
    metrics_port = fresh_port()
    env.update(ZIMMER_METRICS_HOST="127.0.0.1", ZIMMER_METRICS_PORT=str(metrics_port))
    if service == SWEEPER and host is not None:  # a simulated runtime host: its own name and disk
        env.update(ZIMMER_HOST=host, **disk_roots(root / "runtime" / host))
    return ServiceProcess(name, service, instance_id, env, host=host, metrics_port=metrics_port)
