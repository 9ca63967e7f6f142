"""Which services `zimmer serve NAME` can run, and where each one's wiring lives.

The names are the deployment names (compose services, supervisor children); the values
point at a `build(settings) -> Service` factory in each service's own package, imported
lazily so that `zimmer --help` does not import every service.
"""

SERVICES: dict[str, str] = {
    "backlog": "zimmer_backlog.service:build",
    "spot-gate": "zimmer_spot_gate.service:build",
    "sweeper": "zimmer_sweeper.service:build",
    "alerts": "zimmer_alerts.service:build",
    "gateway": "zimmer_gateway.service:build",
}

# Start order for the supervisor: the domain services first, the gateway (whose readiness
# depends on pinging them) last.
START_ORDER: tuple[str, ...] = ("backlog", "spot-gate", "sweeper", "alerts", "gateway")
