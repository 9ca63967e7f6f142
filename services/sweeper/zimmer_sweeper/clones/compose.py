"""Docker Compose teardown of a clone before its bytes go (seed 003: DockerComposeCleanupService).

A session's clone may have started containers, networks and volumes with `docker compose up`;
deleting the directory leaves them running, holding memory, ports and disk nobody will ever
reclaim. So before the guard removes a clone it runs `docker compose down -v --remove-orphans`
there, but only where a compose file exists (most clones have none, and the teardown then costs
nothing) and the `docker` binary is present (a host without it cannot have started any).

It is bounded at COMPOSE_DOWN_TIMEOUT (120 s) per directory under `run_bounded` (the child's whole
process group is killed at the deadline), because the sweeps budget their runs against that bound.
A teardown that fails or times out never blocks the clone's removal: the caller pages it and
deletes the directory all the same (the seed swallowed it into `false`; here it pages, because
leaked containers are a cost somebody must see).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from zimmer_common.bounded import run_bounded

COMPOSE_DOWN_TIMEOUT = 120.0
# The names `docker compose` looks for, in its own order of preference.
COMPOSE_FILES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")


@dataclass(frozen=True)
class Teardown:
    outcome: str  # "none" (no compose file), "no_docker", "down", "failed", "timed_out"
    detail: str = ""  # what docker said when it did not succeed (raw: it goes to a page's snippet)

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "timed_out")

    @property
    def ran(self) -> bool:
        return self.outcome in ("down", "failed", "timed_out")


def compose_file(clone: Path) -> Path | None:
    for name in COMPOSE_FILES:
        candidate = clone / name
        if candidate.is_file():
            return candidate
    return None


async def teardown(clone: Path, *, timeout: float = COMPOSE_DOWN_TIMEOUT, docker: str | None = None) -> Teardown:
    """Bring down what the clone's compose file started, volumes and orphans included."""
    found = compose_file(clone)
    if found is None:
        return Teardown("none")
    binary = docker or shutil.which("docker")
    if binary is None:
        return Teardown("no_docker")
    # The project is named after the directory, as the session's `docker compose up` named it.
    result = await run_bounded([binary, "compose", "-f", found.name, "down", "-v", "--remove-orphans"],
                               timeout=timeout, cwd=clone, max_output_bytes=64_000)
    if result.ok:
        return Teardown("down")
    said = (result.stderr or result.stdout).strip()
    return Teardown("timed_out" if result.timed_out else "failed",
                    f"docker compose down {result.describe()}" + (f": {said}" if said else ""))
