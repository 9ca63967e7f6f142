"""`zimmer sim`: a simulated fleet of agent sessions against a running control plane, built only on
zimmer_runtime (libs/sim). `zimmer up` attaches one in development; scenarios check invariants."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from zimmer_cli.common import DataDir, _data_dir


def _nats_url(option: str | None, data_dir: Path | None) -> str:
    if option:
        return option
    if os.environ.get("ZIMMER_NATS_URL"):
        return os.environ["ZIMMER_NATS_URL"]
    runtime = _data_dir(data_dir) / "runtime.json"
    if runtime.exists():
        return str(json.loads(runtime.read_text())["nats_url"])
    typer.secho("no NATS to connect to: pass --nats-url, set ZIMMER_NATS_URL, or start `zimmer up` first",
                fg="red", err=True)
    raise typer.Exit(2)


def _root(option: Path | None, var: str) -> Path | None:
    value = option or (Path(os.environ[var]) if os.environ.get(var) else None)
    if value is not None:
        value.mkdir(parents=True, exist_ok=True)
    return value


def sim(data_dir: DataDir = None,
        nats_url: Annotated[str | None, typer.Option("--nats-url", help="NATS server(s); default $ZIMMER_NATS_URL, "
                                                     "else the running `zimmer up`'s")] = None,
        seed: Annotated[int, typer.Option(help="Everything the fleet chooses follows from it")] = 1,
        profile: Annotated[str, typer.Option(help="demo (zimmer up's fleet) or short (quick turns)")] = "demo",
        sessions: Annotated[int | None, typer.Option(help="Live sessions to keep (default: the profile's)")] = None,
        minutes: Annotated[float | None, typer.Option(help="Stop after this long (default: until Ctrl-C)")] = None,
        name: Annotated[str, typer.Option(help="The runtime's name (prefix of its idempotency keys)")] = "sim",
        host: Annotated[str | None, typer.Option(help="The runtime host its clones are on "
                                                 "(default $ZIMMER_HOST or sim-host)")] = None,
        clones_dir: Annotated[Path | None, typer.Option(help="Clones root (default $ZIMMER_SWEEPER_CLONES_DIR)")] = None,
        transcripts_dir: Annotated[Path | None, typer.Option(
            help="Transcripts root (default $ZIMMER_SWEEPER_TRANSCRIPTS_DIR)")] = None,
        github_port: Annotated[int | None, typer.Option(help="Serve the fake GitHub on this port (0: any); "
                                                        "default $ZIMMER_SIM_GITHUB_PORT, else none")] = None,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the run's summary here")] = None,
        quiet: Annotated[bool, typer.Option(help="No progress line (an attached fleet logs instead)")] = False,
        scenario: Annotated[str | None, typer.Option(help="Run a scenario and check its invariants: steady, "
                                                     "quota-crunch, auth-outage, outage, stall, disk-pressure")] = None,
        short: Annotated[bool, typer.Option(help="The scenario's short form (what the tests run)")] = False,
        url: Annotated[str | None, typer.Option(help="A running stack's gateway for --scenario (with --nats-url); "
                                                "default: the scenario starts its own")] = None,
        keep: Annotated[bool, typer.Option(help="Keep a scenario's own stack directory after a pass")] = False) -> None:
    """Run a simulated fleet of agent sessions against a running control plane: sessions arrive from
    triggers and spawns, take turns that spend tokens and print logs, obey every command, report
    quota readings of accounts whose windows fill and reset, and feed the backlog from a fake GitHub."""
    from zimmer_sim.profile import PROFILES
    from zimmer_sim.runner import SimConfig

    if scenario is not None:
        from zimmer_cli.scenario_cmd import scenario_main

        if minutes is not None and not 0 < minutes <= 7 * 24 * 60:
            raise typer.BadParameter("must be more than 0 and at most a week", param_hint="--minutes")
        scenario_main(scenario, short=short, minutes=minutes, seed=seed,
                      nats_url=nats_url or (os.environ.get("ZIMMER_NATS_URL") if url else None), url=url,
                      json_out=json_out, keep=keep)
        return

    if profile not in PROFILES:
        raise typer.BadParameter(f"unknown profile {profile!r}; one of: {', '.join(PROFILES)}", param_hint="--profile")
    if sessions is not None and not 1 <= sessions <= 1000:
        raise typer.BadParameter("must be between 1 and 1000", param_hint="--sessions")
    if minutes is not None and not 0 < minutes <= 7 * 24 * 60:
        raise typer.BadParameter("must be more than 0 and at most a week", param_hint="--minutes")
    chosen = PROFILES[profile] if sessions is None else PROFILES[profile].with_(sessions=sessions)
    port = github_port if github_port is not None else (int(os.environ["ZIMMER_SIM_GITHUB_PORT"])
                                                        if os.environ.get("ZIMMER_SIM_GITHUB_PORT") else None)
    config = SimConfig(nats_url=_nats_url(nats_url, data_dir), seed=seed, profile=chosen, name=name,
                       host=host or os.environ.get("ZIMMER_HOST") or "sim-host",
                       clones_dir=_root(clones_dir, "ZIMMER_SWEEPER_CLONES_DIR"),
                       transcripts_dir=_root(transcripts_dir, "ZIMMER_SWEEPER_TRANSCRIPTS_DIR"),
                       github_port=port, github_token=os.environ.get("ZIMMER_GITHUB_TOKEN") or "sim-github-token",
                       # Seconds since late 2023: a later run on the same data directory opens issues
                       # the backlog has not seen (a run opens far fewer than one a second).
                       github_numbers_from=int(time.time()) - 1_700_000_000)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    summary = asyncio.run(_run(config, minutes, quiet))
    if json_out is not None:
        json_out.write_text(json.dumps(summary, indent=2, default=str))
    typer.echo(json.dumps(summary, indent=2, default=str) if quiet else _table(summary))
    raise typer.Exit(1 if summary["violations"] else 0)


async def _run(config: Any, minutes: float | None, quiet: bool) -> dict[str, Any]:
    from zimmer_sim.runner import FleetRun, run_fleet

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    if minutes is not None:
        loop.call_later(minutes * 60, stop.set)

    async def progress(run: FleetRun) -> None:
        if quiet:
            return
        s = run.ledger.summary()
        elapsed = time.monotonic() - started
        done = f"{elapsed / 60:5.1f}/{minutes:g} min" if minutes else f"{elapsed / 60:5.1f} min"
        sys.stderr.write(f"\r[{done}] sessions {s['sessions']} running {run.ledger.running()} turns {s['turns']} "
                         f"spend ${s['spend_dollars']:.2f} logs {s['log_lines']} violations {s['violations']}   ")
        sys.stderr.flush()

    async def github_jobs(run: FleetRun) -> None:
        if config.github_port is not None:
            await ask_for_the_fleets_jobs(config.nats_url, stop)

    run = await run_fleet(config, stop, every=progress, check_every=2.0, beside=github_jobs)
    if not quiet:
        sys.stderr.write("\n")
    summary = run.ledger.summary()
    summary["violation_details"] = run.ledger.violations[:50]
    summary["minutes"] = round((time.monotonic() - started) / 60, 2)
    summary["seed"] = config.seed
    return summary


# The backlog reads GitHub only in production and staging (its API budget is money in development).
# The simulated fleet's GitHub costs nothing, so while one is served the fleet asks for those jobs
# itself, more often than production's cadence so the Issues page changes within minutes; and for
# the burn rates (every 20 minutes on schedule), so the Costs page has them in the first minute, and
# the ceiling sweep (every 5), so a quota cycle of a few minutes shows its pauses and resumes.
FLEET_JOBS = (("backlog.github_snapshot", 60.0), ("backlog.liveness_sweep", 300.0),
              ("spot-gate.burn_rate_recompute", 60.0), ("spot-gate.ceiling_sweep", 60.0))


async def ask_for_the_fleets_jobs(nats_url: str, stop: asyncio.Event) -> None:
    from zimmer_cli.jobs_cmd import run_job

    log = logging.getLogger("zimmer_sim")
    due = {key: time.monotonic() + 15.0 for key, _ in FLEET_JOBS}
    while not stop.is_set():
        for key, every in FLEET_JOBS:
            if time.monotonic() >= due[key]:
                due[key] = time.monotonic() + every
                try:
                    await run_job(nats_url, key)
                except Exception as exc:  # noqa: BLE001 - the stack may be restarting: the next round asks again
                    log.warning("could not ask for a GitHub job", extra={"job": key, "error": repr(exc)})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=5.0)


def _table(summary: dict[str, Any]) -> str:
    rows = [(k, v) for k, v in summary.items() if k not in ("counts", "outcomes", "commands", "violation_details")]
    rows += [(f"{group}.{k}", v) for group in ("counts", "outcomes", "commands") for k, v in sorted(summary[group].items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
