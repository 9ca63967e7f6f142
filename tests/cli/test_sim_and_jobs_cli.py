"""`zimmer sim` and `zimmer jobs run` refuse bad input with a clear message and nothing started."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from zimmer_cli.jobs_cmd import job_tick
from zimmer_cli.main import app

runner = CliRunner()


@pytest.mark.parametrize(("args", "says"), [
    (["sim", "--profile", "nope", "--nats-url", "nats://127.0.0.1:1"], "unknown profile 'nope'"),
    (["sim", "--sessions", "0", "--nats-url", "nats://127.0.0.1:1"], "between 1 and 1000"),
    (["sim", "--minutes", "0", "--nats-url", "nats://127.0.0.1:1"], "more than 0"),
    (["sim", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["sim", "--scenario", "outage", "--url", "http://127.0.0.1:1", "--nats-url", "nats://127.0.0.1:1"],
     "runs only on a stack it starts itself"),
    (["sim", "--scenario", "steady", "--url", "http://127.0.0.1:1"], "give --nats-url"),
    (["jobs", "run", "spot-gate.nope", "--nats-url", "nats://127.0.0.1:1"], "no job 'spot-gate.nope'"),
    (["jobs", "run", "sweeper.orphan_clone_sweep", "--nats-url", "nats://127.0.0.1:1"], "name the host"),
    (["jobs", "run", "spot-gate.ceiling_sweep", "--host", "host-a", "--nats-url", "nats://127.0.0.1:1"],
     "is not a per-host job"),
])
def test_bad_input_is_refused_before_anything_starts(args: list[str], says: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZIMMER_NATS_URL", raising=False)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    words = " ".join(result.output.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())  # rich's error box
    assert says in words, result.output


def test_a_job_tick_names_its_lane_and_a_per_host_job_its_host() -> None:
    assert job_tick("spot-gate.ceiling_sweep") == ("zimmer.jobs.spot.default.ceiling_sweep",
                                                   b'{"job": "ceiling_sweep"}')
    subject, _ = job_tick("sweeper.orphan_clone_sweep", host="runner-1")
    assert subject == "zimmer.jobs.sweeper-runner-1.maintenance.orphan_clone_sweep"


def test_up_offers_to_leave_the_simulated_fleet_out() -> None:
    result = runner.invoke(app, ["up", "--help"])
    assert result.exit_code == 0 and "--no-sim" in result.output and "ZIMMER_SIM=off" in result.output


def _unserved_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(120)
@pytest.mark.network  # connects to a port nobody serves
def test_a_bus_nobody_serves_is_one_error_line_and_exit_1_not_a_wait_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    # nats-py applies max_reconnect_attempts to the first connect as well: with -1 (reconnect
    # forever, right once connected) `zimmer jobs run` against a dead address never returned.
    monkeypatch.delenv("ZIMMER_NATS_URL", raising=False)
    result = runner.invoke(app, ["jobs", "run", "spot-gate.ceiling_sweep", "--nats-url",
                                 f"nats://127.0.0.1:{_unserved_port()}"])
    assert result.exit_code == 1, result.output
    assert "error: cannot connect to NATS" in result.output and "Traceback" not in result.output
