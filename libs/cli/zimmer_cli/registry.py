"""Which services `zimmer serve NAME` can run, and which subcommands services add to `zimmer`.

Each service declares itself in the project's entry points (pyproject.toml), so the CLI names no
service module and imports none until it is asked to run one (docs/architecture.md):

- `zimmer.services`: the deployment name (compose services, supervisor children) -> the
  `build(settings) -> Service` factory in the service's own package, loaded lazily so that
  `zimmer --help` does not import every service;
- `zimmer.commands`: a subcommand name -> the service's Typer app (`zimmer backlog import`).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

SERVICE_GROUP = "zimmer.services"
COMMAND_GROUP = "zimmer.commands"

# Start order for the supervisor: the domain services first, the gateway (whose readiness
# depends on pinging them) last.
START_ORDER: tuple[str, ...] = ("backlog", "spot-gate", "sweeper", "alerts", "gateway")


def _entry_points(group: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def _services() -> dict[str, str]:
    """name -> "module:factory", in start order (a service outside it after, by name)."""
    found = {name: ep.value for name, ep in _entry_points(SERVICE_GROUP).items()}
    order = {name: i for i, name in enumerate(START_ORDER)}
    return {name: found[name] for name in sorted(found, key=lambda n: (order.get(n, len(order)), n))}


SERVICES: dict[str, str] = _services()


def commands() -> list[tuple[str, Any]]:
    """Each service's own subcommand (name, Typer app), by name."""
    return [(name, ep.load()) for name, ep in sorted(_entry_points(COMMAND_GROUP).items())]
