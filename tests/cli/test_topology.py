"""`zimmer up`'s layout, decided before anything starts: `topology.plan()` starts nothing, so
it is checked here on its own, with the real free-port picker."""

from __future__ import annotations

from pathlib import Path

import pytest

from zimmer_cli.embedded import free_port
from zimmer_cli.registry import START_ORDER
from zimmer_cli.topology import plan


@pytest.mark.network  # the real free-port picker binds sockets
def test_the_cluster_plan(tmp_path: Path) -> None:
    layout = plan(cluster=True, root=tmp_path, port=18000, free_port=free_port)

    # Three NATS nodes, each routed to the other two, each with its own store and server name.
    assert [n.name for n in layout.nats_nodes] == ["nats-1", "nats-2", "nats-3"]
    route_urls = {n.name: f"nats://127.0.0.1:{n.route_port}" for n in layout.nats_nodes}
    for node in layout.nats_nodes:
        assert sorted(node.routes) == sorted(url for name, url in route_urls.items() if name != node.name)
        assert node.store == tmp_path / node.name
        argv = node.argv("nats-server")
        assert argv[argv.index("-n") + 1] == node.name and "-js" in argv
        assert argv[argv.index("--cluster") + 1] == route_urls[node.name]
        assert argv[argv.index("--routes") + 1].split(",") == list(node.routes)
    assert layout.nats_url == ",".join(f"nats://127.0.0.1:{n.client_port}" for n in layout.nats_nodes)

    # Two replicas of every service but the sweeper, which runs once per simulated runtime host.
    by_service: dict[str, list[str]] = {}
    for process in layout.processes:
        by_service.setdefault(process.service, []).append(process.instance_id)
        assert process.env["ZIMMER_INSTANCE_ID"] == process.instance_id == process.name
    assert set(by_service) == set(START_ORDER)
    for service, ids in by_service.items():
        if service != "sweeper":
            assert ids == [f"{service}-1", f"{service}-2"]
    sweepers = [p for p in layout.processes if p.service == "sweeper"]
    assert [p.host for p in sweepers] == ["host-a", "host-b"] == layout.hosts
    assert [p.env["ZIMMER_HOST"] for p in sweepers] == ["host-a", "host-b"]
    clones = [Path(p.env["ZIMMER_SWEEPER_CLONES_DIR"]) for p in sweepers]
    assert clones[0] != clones[1] and all(tmp_path in c.parents for c in clones)

    # Two gateways on consecutive ports; every other process its own metrics port.
    assert layout.gateway_ports == [18000, 18001]
    assert [p.env["ZIMMER_HTTP_PORT"] for p in layout.processes if p.service == "gateway"] == ["18000", "18001"]
    metrics = [p.metrics_port for p in layout.processes if p.service != "gateway"]
    assert all(metrics) and all(p.env["ZIMMER_METRICS_PORT"] == str(p.metrics_port)
                                for p in layout.processes if p.service != "gateway")

    # No port is handed out twice.
    ports = [18000, 18001, *metrics]
    for n in layout.nats_nodes:
        ports += [n.client_port, n.route_port, n.monitor_port]
    assert len(ports) == len(set(ports)) == 2 + 8 + 9


@pytest.mark.network  # the real free-port picker binds sockets
def test_the_default_plan_is_one_node_and_one_process_per_service(tmp_path: Path) -> None:
    layout = plan(cluster=False, root=tmp_path, port=18000, free_port=free_port)
    assert len(layout.nats_nodes) == 1 and layout.nats_url == layout.nats_nodes[0].url
    assert [p.name for p in layout.processes] == list(START_ORDER)
    assert [p.instance_id for p in layout.processes] == [f"{name}-1" for name in START_ORDER]
    assert layout.gateway_ports == [18000] and layout.hosts == []
    sweeper = next(p for p in layout.processes if p.service == "sweeper")
    assert "ZIMMER_HOST" not in sweeper.env  # this machine's name, as before


@pytest.mark.network  # the real free-port picker binds sockets
def test_an_outside_nats_gets_no_embedded_node(tmp_path: Path) -> None:
    layout = plan(cluster=True, root=tmp_path, port=18000, embedded_nats=False, free_port=free_port)
    assert layout.nats_nodes == () and layout.nats_url is None
    assert len(layout.processes) == 4 * 2 + 2


def test_a_port_offered_twice_is_not_taken_twice(tmp_path: Path) -> None:
    offers = iter([18000, 20001, 20001, 18001, *range(20002, 20100)])  # the picker repeats itself
    layout = plan(cluster=True, root=tmp_path, port=18000, free_port=lambda: next(offers))
    ports = [p.metrics_port for p in layout.processes if p.metrics_port]
    for n in layout.nats_nodes:
        ports += [n.client_port, n.route_port, n.monitor_port]
    assert len(ports) == len(set(ports)) and not {18000, 18001} & set(ports)


@pytest.mark.network  # the real free-port picker binds sockets
def test_ports_to_listen_on_are_chosen_below_the_ephemeral_range() -> None:
    # A gateway killed under load could not bind its port again for 20 s: an outgoing connection
    # had taken it as its local port (free_port used to draw from the ephemeral range).
    from zimmer_cli.embedded import _ephemeral_low, free_port

    low = _ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert all(1024 <= p < low for p in ports) and len(ports) > 1
