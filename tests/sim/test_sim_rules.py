"""The simulated fleet's pure parts, and its boundary: zimmer_sim speaks zimmer_runtime and the
contracts, nothing else of Zimmer's (a runtime could be written the same way)."""

from __future__ import annotations

import ast
import asyncio
import logging
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import zimmer_sim
from zimmer_runtime import RuntimeRequestError
from zimmer_sim.accounts import AccountPool, SimWindow
from zimmer_sim.disk import SimDisk, transcript_name
from zimmer_sim.fleet import RETRIES, Fleet, choose_arrival
from zimmer_sim.ledger import Ledger, Restart, SessionRecord
from zimmer_sim.profile import GENESIS_MIX, PROFILES
from zimmer_sim.scenarios import Context, batch_pairs
from zimmer_sweeper.transcripts.domain import transcript_name as sweepers_transcript_name

PACKAGE = Path(zimmer_sim.__file__).parent
ALLOWED = ("zimmer_sim", "zimmer_runtime", "zimmer_common.contracts")
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def test_its_modules_import_only_the_runtime_client_and_the_contracts() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 10
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            for name in names:
                if name.startswith("zimmer"):
                    assert any(name == a or name.startswith(a + ".") for a in ALLOWED), f"{path.name} imports {name}"


def test_importing_it_loads_nothing_else_of_zimmers() -> None:
    code = ("import sys, zimmer_sim.scenarios, zimmer_sim.fake_github, zimmer_sim.github_world; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('zimmer')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    outside = [m for m in loaded.stdout.split() if m != "zimmer_common" and not any(
        m == a or m.startswith(a + ".") for a in ALLOWED)]
    assert outside == []


def test_a_window_empties_at_its_reset_and_the_next_one_begins() -> None:
    window = SimWindow(capacity=10.0, length=timedelta(minutes=5), resets_at=T0)
    window.spent = 7.5
    assert window.utilization == 0.75
    assert not window.roll(T0 - timedelta(seconds=1)) and window.spent == 7.5
    assert window.roll(T0 + timedelta(minutes=11))  # two lengths past: the window after next
    assert (window.spent, window.resets_at) == (0.0, T0 + timedelta(minutes=15))


def test_utilization_is_bounded_by_the_contract() -> None:
    window = SimWindow(capacity=1.0, length=timedelta(hours=5), resets_at=T0)
    window.spent = 1e9
    assert window.utilization == 10.0  # WindowReadingIn refuses more


def test_a_new_session_spends_on_the_least_used_active_account_and_a_lost_one_comes_back() -> None:
    pool = AccountPool(PROFILES["demo"], random.Random(1), T0)
    first, second, third = sorted(pool.accounts)
    pool.accounts[first].charge(5.0)
    pool.accounts[second].charge(1.0)
    pool.lose_credentials(third, T0, 30)
    assert pool.assign() == second  # third is out, first is the more used
    pool.tick(T0 + timedelta(seconds=31))
    assert (pool.accounts[third].status, pool.accounts[third].back_at) == ("active", T0 + timedelta(seconds=31))
    assert pool.assign() == third


SEGMENT = st.text(alphabet="._-aZ0", min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))


@given(st.lists(SEGMENT, min_size=1, max_size=6))
def test_the_transcript_directory_is_named_as_the_sweeper_derives_it(segments: list[str]) -> None:
    """For the absolute, normal paths a runtime's clones have (the sweeper also normalises others)."""
    cwd = "/tmp/clones/" + "/".join(segments)
    assert transcript_name(cwd) == sweepers_transcript_name(cwd)


def test_the_seed_decides_every_arrival() -> None:
    profile = PROFILES["demo"]
    a, b = random.Random("7:arrivals"), random.Random("7:arrivals")
    sequence = [choose_arrival(a, profile) for _ in range(200)]
    assert sequence == [choose_arrival(b, profile) for _ in range(200)]
    assert {g for g, _, _ in sequence} == set(GENESIS_MIX)
    assert {r for _, r, _ in sequence} == {"claude_code", "codex"}
    assert sequence != [choose_arrival(random.Random("8:arrivals"), profile) for _ in range(200)]


def _record(sent: list[str], delivered: list[str]) -> SessionRecord:
    return SessionRecord(1, "api", "claude_code", "claude-opus-4-5", "a", True, sent_prompts=sent,
                         delivered_prompts=delivered)


def test_prompts_delivered_once_in_order_pass_and_every_other_way_is_named() -> None:
    ledger = Ledger()
    ledger.sessions[1] = _record(["p1", "p2", "p3"], ["p1", "p2"])  # p3 still held: not a violation
    assert ledger.prompt_order_violations() == []
    ledger.sessions[1] = _record(["p1", "p2"], ["p2", "p1"])
    assert ledger.prompt_order_violations()[0]["delivered"] == ["p2", "p1"]
    ledger.sessions[1] = _record(["p1", "p2"], ["p1", "p1", "p2"])
    assert ledger.prompt_order_violations()[0]["delivered_twice"] == ["p1"]


def test_an_admitted_prompt_never_started_is_a_lost_command() -> None:
    ledger = Ledger()
    ledger.sessions[1] = _record(["p1", "p2", "p3"], ["p1"])
    ledger.admitted = {"p1": (1, T0), "p2": (1, T0), "p3": (1, T0 + timedelta(minutes=5))}
    lost = ledger.admitted_never_started(before=T0 + timedelta(minutes=1))
    assert [x["prompt"] for x in lost] == ["p2"]  # p3 was admitted too recently to judge


def _fleet() -> Fleet:
    profile = PROFILES["demo"]
    disk = SimDisk(clones=None, transcripts=None, host="sim-host", rng=random.Random(1))
    fleet = Fleet(None, profile, 1, AccountPool(profile, random.Random(1), T0), disk,  # type: ignore[arg-type]  # no client: _retry is handed its call
                  Ledger())
    fleet.retry_wait = 0.001  # the waits, kept short; their shape is the library's
    return fleet


class _Answers:
    """A call that raises the refusals it was given, in order, then answers."""

    def __init__(self, *codes: str):
        self.codes, self.calls = list(codes), 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.codes:
            code = self.codes.pop(0)
            raise RuntimeRequestError(code, f"{code} at call {self.calls}")
        return "answered"


async def test_a_request_not_answered_is_repeated_until_it_is() -> None:
    fleet, call = _fleet(), _Answers("unavailable", "busy")
    assert await fleet._retry(call) == "answered"
    assert call.calls == 3 and fleet.ledger.counts == {"rpc_unavailable": 1, "rpc_busy": 1}


async def test_a_request_never_answered_is_given_up_after_its_tries() -> None:
    fleet, call = _fleet(), _Answers(*["unavailable"] * (RETRIES + 3))
    assert await fleet._retry(call) is None
    assert call.calls == RETRIES and fleet.ledger.counts == {"rpc_unavailable": RETRIES}


async def test_a_refusal_is_not_repeated(caplog: pytest.LogCaptureFixture) -> None:
    fleet, call = _fleet(), _Answers("conflict", "unavailable")
    with caplog.at_level(logging.INFO, logger="zimmer_sim.fleet"):
        assert await fleet._retry(call) is None
    assert call.calls == 1 and fleet.ledger.counts == {"rpc_conflict": 1}
    assert [r.getMessage() for r in caplog.records] == ["the control plane refused a request"]


async def test_an_error_that_is_no_refusal_is_raised_at_once() -> None:
    fleet, calls = _fleet(), []

    async def broken() -> None:
        calls.append(1)
        raise KeyError("a bug, not an answer")

    with pytest.raises(KeyError):
        await fleet._retry(broken)
    assert calls == [1]


async def test_a_timeline_holds_the_run_open_past_its_length_until_it_lets_go() -> None:
    """`outage`'s restarts and `quota-crunch`'s cycle take the machine's time: the run's end waits
    for them (bounded by the caller) instead of cutting off the last kill or resume."""
    stop = asyncio.Event()
    ctx = Context(run=None, stack=None, invariants=None, stop=stop, seconds=1.0)  # type: ignore[arg-type] # only the clock is used
    async with ctx.held_open():
        ctx.time_up()
        assert ctx.past_length and not stop.is_set()
        assert await ctx.sleep(0.01)  # a held run keeps sleeping: it has not ended
    assert stop.is_set()
    unheld = Context(run=None, stack=None, invariants=None, stop=asyncio.Event(), seconds=1.0)  # type: ignore[arg-type] # as above
    unheld.time_up()
    assert unheld.stop.is_set() and not await unheld.sleep(5.0)



def test_one_sweeps_resumes_are_a_batch_however_late_they_arrive() -> None:
    """The precedence order is checked on consecutive resumes of one ceiling sweep: known by the
    time the sweep's transaction gave their commands, not by when they came (a loaded CI box
    delivered one sweep's commands more than a second apart, and the order went unchecked)."""
    sweep, next_sweep = T0, T0 + timedelta(seconds=5)
    late = [Restart(0.0, 1, 9, sweep), Restart(3.0, 2, 5, sweep), Restart(4.5, 3, 7, next_sweep)]
    assert batch_pairs(late) == 1  # 1 then 2; 2 and 3 are two sweeps however close they arrived
    assert batch_pairs([Restart(0.0, 1, 9, sweep), Restart(0.1, 2, 5, next_sweep)]) == 0

def test_orphans_come_in_whole_and_dated_and_a_killed_runs_drafts_do_not_stop_the_next(tmp_path: Path) -> None:
    """The sweeper must never see an orphan half-written or still young (disk-pressure's reclaim fell
    short on those); a run killed mid-write leaves drafts beside the clones, which the next run clears."""
    clones = tmp_path / "runtime" / "clones"
    leftover = tmp_path / "runtime" / ".clones-orphans-staging" / "orphan-0000000000"
    leftover.mkdir(parents=True)
    (leftover / "left-behind.bin").write_bytes(b"half")
    disk = SimDisk(clones=clones, transcripts=None, host="sim-host", rng=random.Random(2))
    made = disk.make_orphans(3, size=70_000)
    assert sorted(p.name for p in clones.iterdir()) == sorted(Path(m).name for m in made) and len(made) == 3
    assert sorted(p.name for p in (tmp_path / "runtime").iterdir()) == ["clones"]  # no staging left
    for m in made:
        assert (Path(m) / "left-behind.bin").stat().st_size == 70_000
        assert time.time() - Path(m).stat().st_mtime > 2 * 24 * 3600  # past every sweep's age bar
