"""One simulated fleet run: connect through `zimmer_runtime`, serve a fake GitHub, and keep the
fleet's loops going (arrivals, readings, idle archiving, the GitHub world) until told to stop.

`run_fleet` is what `zimmer sim` and `zimmer up`'s attached fleet call; scenarios wrap it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from zimmer_common.contracts.spot_policy import GET_POLICY, PolicyQuery
from zimmer_runtime import RuntimeClient, RuntimeRequestError
from zimmer_sim.accounts import AccountPool, utc_now
from zimmer_sim.disk import SimDisk
from zimmer_sim.fleet import Fleet
from zimmer_sim.ledger import Ledger
from zimmer_sim.profile import Profile

log = logging.getLogger("zimmer_sim")
CONNECT_ATTEMPTS = 120  # the stack may still be starting: two minutes of tries at 1 s


@dataclass
class SimConfig:
    nats_url: str
    seed: int = 1
    profile: Profile = field(default_factory=Profile)
    name: str = "sim"  # the runtime's name: idempotency keys and the command consumer's caller
    host: str = "sim-host"
    clones_dir: Path | None = None
    transcripts_dir: Path | None = None
    github_port: int | None = None  # serve the fake GitHub here (0: any free port); None: no GitHub
    github_port_shared: bool = False  # the port is held for us by a socket with SO_REUSEPORT: bind beside it
    github_token: str = "sim-github-token"
    github_numbers_from: int = 1  # a rerun on the same backlog must not reuse the first run's issue numbers


@dataclass
class FleetRun:
    """A running fleet: its parts, for scenarios and checks to look at while it runs."""

    config: SimConfig
    client: RuntimeClient
    fleet: Fleet
    ledger: Ledger
    accounts: AccountPool
    github: object | None = None  # a GithubWorld, when the run serves GitHub
    orphans: list[str] = field(default_factory=list)  # directories the run left on disk for nobody
    github_url: str | None = None


Check = Callable[[FleetRun], Awaitable[None]]


async def connect(config: SimConfig) -> RuntimeClient:
    last: Exception | None = None
    for _ in range(CONNECT_ATTEMPTS):
        try:
            return await RuntimeClient.connect(config.nats_url, name=config.name, connect_attempts=1)
        except Exception as exc:  # noqa: BLE001 - anything short of a connection: try again
            last = exc
            await asyncio.sleep(1.0)
    raise RuntimeError(f"could not connect to NATS at {config.nats_url}: {last!r}")


async def run_fleet(config: SimConfig, stop: asyncio.Event, *, every: Check | None = None, check_every: float = 5.0,
                    before: Check | None = None, beside: Check | None = None,
                    finish: Check | None = None) -> FleetRun:
    """Run until `stop` is set; return the run (its ledger says what happened). `every` runs every
    `check_every` seconds while the fleet runs (the invariant checks, a progress line); `beside`
    once, alongside the fleet (a scenario's timeline), after `before` (a baseline); `finish` after the fleet stopped, while its
    client is still connected (the end's checks)."""
    profile = config.profile
    client = await connect(config)
    ledger = Ledger()
    accounts = AccountPool(profile, random.Random(f"{config.seed}:accounts"), utc_now())
    disk = SimDisk(config.clones_dir, config.transcripts_dir, config.host, random.Random(f"{config.seed}:disk"))
    fleet = Fleet(client, profile, config.seed, accounts, disk, ledger, name=config.name)
    run = FleetRun(config, client, fleet, ledger, accounts)
    fake = None
    try:
        client.serve_commands(fleet.obey, concurrency=1)  # one at a time: a session's stop, then its restart
        await fleet.setup()
        run.orphans = await asyncio.to_thread(disk.make_orphans, profile.orphan_clones, profile.orphan_bytes)
        if profile.github and config.github_port is not None:
            fake = await _start_github(run)
        await fleet.report_readings()
        if before is not None:
            await before(run)
        loops = [
            _every(stop, lambda: _arrive(fleet), lambda: fleet.rng.uniform(*profile.spawn_every)),
            _every(stop, fleet.report_readings, lambda: profile.reading_every),
            _every(stop, fleet.archive_idle, lambda: 2.0),
            _every(stop, lambda: _read_policy(fleet), lambda: 10.0),
        ]
        if run.github is not None:
            loops.append(_every(stop, run.github.step, lambda: profile.github_every))  # type: ignore[attr-defined]  # run.github is the GithubWorld when set
        if profile.quiet_share > 0:
            started = asyncio.get_running_loop().time()
            loops.append(_every(stop, lambda: _duty_cycle(fleet, started), lambda: 5.0))
        if every is not None:
            loops.append(_every(stop, lambda: every(run), lambda: check_every))
        if beside is not None:
            loops.append(beside(run))
        await asyncio.gather(*loops)
        await fleet.close()
        if finish is not None:
            await finish(run)
    finally:
        await fleet.close()
        unsent = await client.close(grace=5.0)
        if unsent:
            ledger.counts["reports_unsent_at_close"] += unsent
        if fake is not None:
            fake.close()
    return run


async def _arrive(fleet: Fleet) -> None:
    if not fleet.quiet and fleet.live_sessions() < fleet.profile.sessions:
        await fleet.arrive()


async def _duty_cycle(fleet: Fleet, started: float) -> None:
    """Quiet for the last `quiet_share` of every simulated 5-hour cycle, busy for the rest."""
    cycle = fleet.profile.five_hour_cycle_seconds
    into = (asyncio.get_running_loop().time() - started) % cycle
    fleet.quiet = into >= cycle * (1 - fleet.profile.quiet_share)


async def _read_policy(fleet: Fleet) -> None:
    with contextlib.suppress(RuntimeRequestError):
        fleet.max_sessions = (await fleet.client.call(GET_POLICY, PolicyQuery())).max_sessions


async def _start_github(run: FleetRun):  # type: ignore[no-untyped-def]  # returns FakeGithub, imported lazily
    from zimmer_sim.fake_github import FakeGithub
    from zimmer_sim.github_world import GithubWorld

    config = run.config
    fake = FakeGithub(config.github_token, port=config.github_port or 0, share_port=config.github_port_shared)
    fake.start()
    run.github_url = fake.url
    world = GithubWorld(fake, run.client, random.Random(f"{config.seed}:github"),
                        numbers_from=config.github_numbers_from)
    run.github = world
    await world.seed()  # never raises: what the backlog did not take is sent again by step()
    return fake


async def _every(stop: asyncio.Event, action: Callable[[], Awaitable[object]], interval: Callable[[], float]) -> None:
    """Run `action` now and then every `interval()` seconds until `stop`; a failure is logged and
    counted, never the end of the loop (the fleet outlives a control plane that is down)."""
    while not stop.is_set():
        try:
            await action()
        except Exception:  # noqa: BLE001 - a loop of the fleet must go on
            # ERROR without a page: the simulator is a runtime, outside the control plane, with no
            # pager; its log carries it, and the loop goes on.
            log.exception("a simulated fleet loop failed; it goes on")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval())
