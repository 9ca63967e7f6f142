"""`zimmer sim --scenario NAME`: a scenario's fleet and timeline against a stack, its invariants
checked while it runs and at the end; a table (invariant | checks | violations) and JSON."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import typer

LOG_PROGRESS_SECONDS = 60.0  # stderr not a terminal: a progress line this often


async def run_scenario(name: str, *, short: bool, minutes: float | None, seed: int, stack: Any,
                       progress: bool = True) -> dict[str, Any]:
    from zimmer_sim.invariants import Invariants
    from zimmer_sim.runner import FleetRun, SimConfig, run_fleet
    from zimmer_sim.scenarios import HOLD_OPEN_LIMIT_SECONDS, SCENARIOS, Context

    scenario = SCENARIOS[name]
    length = minutes if minutes is not None else (scenario.short_minutes if short else scenario.minutes)
    config = SimConfig(nats_url=stack.nats_url, seed=seed, profile=scenario.short if short else scenario.long,
                       name=f"sim-{name}", host=getattr(stack, "host", "sim-host"), clones_dir=stack.clones_dir,
                       transcripts_dir=getattr(stack, "transcripts_dir", None),
                       github_port=getattr(stack, "github_port", None),
                       github_port_shared=getattr(stack, "github_port_shared", False))
    invariants = Invariants(healthy=scenario.healthy, owned_backlog=bool(getattr(stack, "owned", False)))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    contexts: list[Context] = []
    # At its length the run ends, unless its timeline holds it open to finish (bounded).
    loop.call_later(length * 60, lambda: contexts[0].time_up() if contexts else stop.set())
    loop.call_later(length * 60 + HOLD_OPEN_LIMIT_SECONDS, stop.set)
    started = time.monotonic()

    def context(run: FleetRun) -> Context:
        if not contexts:
            contexts.append(Context(run, stack, invariants, stop, length * 60))
        return contexts[0]

    async def timeline(run: FleetRun) -> None:
        from zimmer_cli.sim_cmd import ask_for_the_fleets_jobs

        parts = [scenario.timeline(context(run))] if scenario.timeline is not None else []
        if config.github_port is not None:
            parts.append(ask_for_the_fleets_jobs(stack.nats_url, stop))
        row = invariants.row("the scenario's timeline ran to its end")
        try:
            await asyncio.gather(*parts)
            row.check(True)
        except Exception as exc:  # noqa: BLE001 - a broken timeline fails the scenario, with its reason
            row.check(False, error=f"{type(exc).__name__}: {exc}")

    rss: dict[str, dict[str, int]] = {}
    warm_up = max(60.0, 0.1 * length * 60)  # RSS growth is measured from here (caches filled, pools open)

    def sample_rss(label: str) -> None:
        import psutil

        reading = {**(stack.rss() if hasattr(stack, "rss") else {}), "sim": psutil.Process().memory_info().rss}
        for proc, value in reading.items():
            rss.setdefault(proc, {})[label] = value

    tty, printed = sys.stderr.isatty(), [float("-inf")]

    async def during(run: FleetRun) -> None:
        if "warm" not in rss.get("sim", {}) and time.monotonic() - started >= warm_up:
            sample_rss("warm")
        await invariants.during(run)
        if progress and (tty or time.monotonic() - printed[0] >= LOG_PROGRESS_SECONDS):
            printed[0] = time.monotonic()
            s = run.ledger.summary()
            violations = sum(len(r.violations) for r in invariants.table.values())
            line = (f"[{name} {(time.monotonic() - started) / 60:4.1f}/{length:g} min] sessions {s['sessions']} "
                    f"running {run.ledger.running()} turns {s['turns']} spend ${s['spend_dollars']:.2f} "
                    f"violations {violations}")
            # A terminal's line is redrawn in place; a log (CI, a file) gets a line a minute, not
            # one line of thousands of carriage returns.
            sys.stderr.write(f"\r{line}  " if tty else f"{line}\n")
            sys.stderr.flush()

    async def finish(run: FleetRun) -> None:
        if progress and tty:
            sys.stderr.write("\n")
        sample_rss("end")
        await invariants.finish(run)
        if scenario.expect is not None:
            await scenario.expect(context(run))

    run = await run_fleet(config, stop, every=during, check_every=5.0, before=invariants.start, beside=timeline,
                          finish=finish)
    return {"scenario": name, "short": short, "minutes": round((time.monotonic() - started) / 60, 2), "seed": seed,
            "passed": not invariants.failed(), "invariants": invariants.report(), "fleet": run.ledger.summary(),
            "rss": _rss_growth(rss), "github": _github_summary(run), "table": invariants.text()}


def _github_summary(run: Any) -> dict[str, int] | None:
    if run.github is None:
        return None
    gh = run.github.ledger
    return {"issues_opened": gh.issues_opened, "appended": len(gh.appended), "pulled": len(gh.pulled),
            "removed_by_pulls": len(gh.removed), "prs_opened": gh.prs_opened, "prs_merged": gh.prs_merged,
            "prs_abandoned": gh.prs_abandoned, "issues_closed": gh.issues_closed, "append_errors": gh.append_errors,
            "pull_errors": gh.pull_errors, "start_failures": gh.start_failures}


def _rss_growth(samples: dict[str, dict[str, int]]) -> dict[str, dict[str, float | None]]:
    """Each process's RSS after warm-up and at the end (MB), and the growth between them (%)."""
    out = {}
    for proc, got in sorted(samples.items()):
        warm, end = got.get("warm"), got.get("end")
        out[proc] = {"warm_mb": round(warm / 2**20, 1) if warm else None, "end_mb": round(end / 2**20, 1) if end else None,
                     "growth_pct": round(100 * (end - warm) / warm, 1) if warm and end else None}
    return out


def scenario_main(name: str, *, short: bool, minutes: float | None, seed: int, nats_url: str | None,
                  url: str | None, json_out: Path | None, keep: bool) -> None:
    from zimmer_cli.scenario_stack import ExternalStack, OwnedStack, free_bytes
    from zimmer_sim.scenarios import SCENARIOS

    if name not in SCENARIOS:
        raise typer.BadParameter(f"unknown scenario {name!r}; one of: {', '.join(SCENARIOS)}", param_hint="--scenario")
    scenario = SCENARIOS[name]
    owned = url is None and nats_url is None
    if not owned and scenario.needs_owned_stack:
        raise typer.BadParameter(f"{name} kills the stack's processes: it runs only on a stack it starts itself "
                                 "(leave out --url and --nats-url)", param_hint="--scenario")
    if not owned and not nats_url:
        raise typer.BadParameter("a running stack is reached over NATS: give --nats-url (or ZIMMER_NATS_URL) with "
                                 "--url", param_hint="--nats-url")
    root = Path(tempfile.mkdtemp(prefix=f"zimmer-scenario-{name}-")) if owned else None
    stack: Any = ExternalStack(nats_url or "", url)
    if root is not None:
        stack = OwnedStack(root, scenario.stack_env(free_bytes(root), short) if scenario.stack_env else {})
    result: dict[str, Any] = {}
    try:
        if root is not None:
            typer.echo(f"starting a stack for {name} in {root} ...", err=True)
            stack.start()
        result = asyncio.run(run_scenario(name, short=short, minutes=minutes, seed=seed, stack=stack))
    finally:
        if root is not None:
            stack.stop()
            if result.get("passed") and not keep:
                shutil.rmtree(root, ignore_errors=True)
            else:
                typer.echo(f"the scenario's stack and logs are kept in {root}", err=True)
    typer.echo(result["table"])
    typer.echo(f"{name}: {'passed' if result['passed'] else 'FAILED'} in {result['minutes']} min")
    if json_out is not None:
        json_out.write_text(json.dumps({k: v for k, v in result.items() if k != "table"}, indent=2, default=str))
    raise typer.Exit(0 if result["passed"] else 1)
