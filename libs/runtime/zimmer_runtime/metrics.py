"""The client's Prometheus metrics, in the registry the embedding runtime passes (its own
`/metrics`), or prometheus_client's default one."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge


class RuntimeMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.buffered = Gauge("zimmer_runtime_reports_buffered",
                              "Reports waiting for JetStream's ack (all of them while disconnected)", registry=registry)
        self.buffer_capacity = Gauge("zimmer_runtime_reports_buffer_capacity",
                                     "Reports the local buffer holds before it drops the oldest", registry=registry)
        self.sent = Counter("zimmer_runtime_reports_sent", "Reports JetStream acked, by kind", ["kind"],
                            registry=registry)
        self.dropped = Counter("zimmer_runtime_reports_dropped",
                               "Reports dropped unsent, oldest first, because the buffer was full", ["kind"],
                               registry=registry)
        self.publish_failures = Counter("zimmer_runtime_report_publish_failures",
                                        "Publishes not acked (disconnected, timed out, stream missing); retried",
                                        registry=registry)
        self.reconnects = Counter("zimmer_runtime_reconnects", "Reconnections to NATS after a lost connection",
                                  registry=registry)
        self.connected = Gauge("zimmer_runtime_connected", "1 while connected to NATS", registry=registry)
        self.commands = Counter("zimmer_runtime_commands",
                                "Commands received, by kind and outcome (handled, duplicate, failed, refused)",
                                ["kind", "outcome"], registry=registry)
        self.rpc_errors = Counter("zimmer_runtime_rpc_errors", "Requests answered with an error, by operation and code",
                                  ["op", "code"], registry=registry)


_by_registry: dict[int, tuple[CollectorRegistry, RuntimeMetrics]] = {}  # the registry kept alive: ids stay unique
_lock = threading.Lock()


def metrics_for(registry: CollectorRegistry | None) -> RuntimeMetrics:
    """One set of metrics per registry: several clients in one process share them (registering the
    same names twice in one registry is refused)."""
    reg = registry if registry is not None else REGISTRY
    with _lock:
        found = _by_registry.get(id(reg))
        if found is None:
            found = _by_registry[id(reg)] = (reg, RuntimeMetrics(reg))
        return found[1]
