"""Prometheus metrics: one registry per service, the plumbing metrics every service shares.

Non-gateway services serve their registry on their own port (`ZIMMER_METRICS_PORT`); the
gateway serves it at `/metrics`. Domain metrics are declared by each service on the same
registry through `ServiceMetrics.registry`.
"""

from __future__ import annotations

import errno
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, start_http_server

log = logging.getLogger("zimmer.metrics")


class ServiceMetrics:
    def __init__(self, service: str, version: str, instance_id: str):
        self.service = service
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        Info("zimmer_service", "Which service and build this process is", registry=r).info(
            {"service": service, "version": version, "instance": instance_id})
        # Uptime on the Health page is now − this (a gauge of a moment, not a ticking counter).
        Gauge("zimmer_service_start_time_seconds", "When this process started (Unix time)", ["service"],
              registry=r).labels(service).set(time.time())
        self.rpc_requests = Counter("zimmer_rpc_requests_total", "RPC requests answered, by operation and outcome",
                                    ["service", "op", "outcome"], registry=r)
        self.rpc_seconds = Histogram("zimmer_rpc_seconds", "Time to answer an RPC request", ["service", "op"],
                                     registry=r, buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.outbox_pending = Gauge("zimmer_outbox_pending", "Outbox rows written but not yet relayed to JetStream",
                                    ["service"], registry=r)
        self.outbox_relayed = Counter("zimmer_outbox_relayed_total", "Outbox rows relayed to JetStream",
                                      ["service"], registry=r)
        self.job_runs = Counter("zimmer_job_runs_total", "Background job runs, by job and outcome",
                                ["service", "job", "lane", "outcome"], registry=r)
        self.job_last_failed = Gauge("zimmer_job_last_run_failed", "1 when the job's last run in this process failed, "
                                     "0 when it finished", ["service", "job"], registry=r)
        self.job_seconds = Histogram("zimmer_job_run_seconds", "Background job run duration", ["service", "job"],
                                     registry=r, buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600))
        self.jobs_running = Gauge("zimmer_jobs_running", "Background jobs running in this process, by lane",
                                  ["service", "lane"], registry=r)
        self.ready = Gauge("zimmer_service_ready", "1 once the service has finished starting", ["service"], registry=r)
        self.rpc_expired = Counter("zimmer_rpc_expired_total", "RPC requests dropped unanswered because they "
                                   "arrived past their deadline (nothing was done)", ["service", "op"], registry=r)
        self.rpc_busy = Counter("zimmer_rpc_busy_total", "RPC requests refused as busy: the service was at its bound "
                                "of requests in flight (nothing was done)", ["service", "op"], registry=r)
        self.rpc_inflight = Gauge("zimmer_rpc_inflight", "RPC requests being answered now", ["service"], registry=r)
        self.batch_size = Histogram("zimmer_batch_size", "Requests served by one batch transaction",
                                    ["service", "batcher"], registry=r, buckets=(1, 2, 4, 8, 16, 32, 64, 128))
        self.batch_pending = Gauge("zimmer_batch_pending", "Requests waiting in a batcher", ["service", "batcher"],
                                   registry=r)
        self.dependency_up = Gauge("zimmer_dependency_up", "0 while this process sees the dependency as down",
                                   ["dependency"], registry=r)
        self.dependency_failures = Counter("zimmer_dependency_failures_total",
                                           "Operations refused or failed because a dependency was down",
                                           ["dependency"], registry=r)
        self.heartbeats = Counter("zimmer_heartbeats_total", "Heartbeats published", ["service"], registry=r)
        self._served: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._http: Any = None

    def rpc_served(self, op: str, outcome: str, seconds: float) -> None:
        # Every answer counts here: the labelled children are looked up once, not twice a request.
        served = self._served.get((op, outcome))
        if served is None:
            served = self._served[(op, outcome)] = (self.rpc_requests.labels(self.service, op, outcome),
                                                   self.rpc_seconds.labels(self.service, op))
        served[0].inc()
        served[1].observe(seconds)

    def serve_http(self, host: str, port: int) -> int | None:
        """Serve this registry on its own port; returns the bound port, None when disabled."""
        if port < 0:
            return None
        try:
            server, _thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or port == 0:
                raise
            # Metrics are not worth a replica: a second one on the host (the default 9100 is
            # everyone's) would exit here. It serves on a free port instead, named in this line,
            # in "metrics listening" and in the "ready" line, for whoever scrapes it.
            server, _thread = start_http_server(0, addr=host, registry=self.registry)
            log.warning("metrics port in use; serving metrics on a free port instead",
                        extra={"fields": {"port_wanted": port, "port": server.server_address[1]}})
        self._http = server
        bound = server.server_address[1]
        log.info("metrics listening", extra={"fields": {"port": bound}})
        return int(bound)

    def stop_http(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
