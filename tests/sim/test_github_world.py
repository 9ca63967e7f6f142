"""The simulated fleet's GitHub (zimmer_sim.github_world): a seeded world of issues on the fake
GitHub server, appended to and pulled from the real backlog over NATS, whose liveness sweep and
snapshot then read what the world did on GitHub."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from zimmer_common.contracts import backlog as c
from zimmer_common.contracts import spot
from zimmer_runtime import RuntimeClient, RuntimeRequestError
from zimmer_sim.fake_github import FakeGithub
from zimmer_sim.github_world import GithubWorld, Rates, issue_key

pytestmark = pytest.mark.network  # the fake GitHub is an HTTP server on 127.0.0.1

BUSY = Rates(new_issue=0.5, pr=0.3, merge=0.3, abandon=0.1, close_without_pr=0.05, pull=0.5)
STILL = Rates(new_issue=0, pr=0, merge=0, abandon=0, close_without_pr=0, pull=0)  # moves only as a test says


class DownBacklog:
    """A backlog that never answers: what the client raises when no backlog is serving."""

    config = SimpleNamespace(name="zimmer-sim-test")

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []  # (op, the request as sent)

    async def call(self, spec: Any, payload: Any, *, timeout: float | None = None) -> Any:
        self.calls.append((spec.op, payload.model_dump_json()))
        raise RuntimeRequestError("unavailable", f"no backlog instance is serving {spec.op}", {"sent": False})


async def run_down(seed: int, steps: int = 60) -> tuple[GithubWorld, DownBacklog]:
    backlog = DownBacklog()
    with FakeGithub("token") as gh:
        world = GithubWorld(gh, backlog, random.Random(seed), rates=BUSY, run_id="t")  # type: ignore[arg-type]  # a stand-in backlog
        await world.seed()
        for _ in range(steps):
            await world.step()  # never raises on the backlog's errors
    return world, backlog


async def test_the_same_seed_makes_the_same_github_and_retries_reuse_their_keys() -> None:
    (first, first_calls), (again, again_calls) = await run_down(7), await run_down(7)
    assert first.ledger.events == again.ledger.events
    assert first_calls.calls == again_calls.calls  # the requests too: same bodies, same idempotency keys
    assert {e.kind for e in first.ledger.events} == {"issue_opened", "pr_opened", "pr_merged", "pr_abandoned",
                                                     "issue_closed"}
    other, _ = await run_down(8)
    assert other.ledger.events != first.ledger.events

    # Nothing reached the backlog: every failure counted, every append still waiting to be retried
    # with the request (and so the idempotency key) it was first sent with.
    ledger = first.ledger
    assert ledger.appended == set() and ledger.pulled == {}
    assert ledger.append_errors > ledger.issues_opened and ledger.pull_errors > 0
    bodies: dict[str, set[str]] = {}
    for _op, body in first_calls.calls:
        for request in _requests(body):
            bodies.setdefault(request["idempotency_key"], set()).add(json.dumps(request, sort_keys=True))
    assert all(len(sent) == 1 for sent in bodies.values())
    appended_keys = {k for k in bodies if ":append:" in k}
    assert len(appended_keys) == ledger.issues_opened
    assert first.started_twice() == []


def _requests(body: str) -> list[dict[str, Any]]:
    """The idempotent requests in a body: an append_items request's appends, else the body itself."""
    request = json.loads(body)
    return [a["item"] for a in request["appends"]] if "appends" in request else [request]


async def all_items(runtime: RuntimeClient) -> dict[str, c.ItemView]:
    listing = await runtime.call(c.GET_ITEMS, c.ItemQuery(status="all", limit=1000))
    assert listing.next_offset is None
    return {item.key: item for item in listing.items}


async def test_the_backlog_holds_what_the_world_appended_and_pulled(stack, stack_setup, runtime) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, _url = stack
    world = GithubWorld(stack_setup, runtime, random.Random(20250401), rates=BUSY)
    await world.seed()
    for _ in range(12):
        await world.step()
    ledger = world.ledger
    opened = {issue_key(e.repo, e.number) for e in ledger.events if e.kind == "issue_opened"}
    assert ledger.append_errors == ledger.pull_errors == ledger.start_failures == 0
    assert ledger.appended == opened and len(opened) == ledger.issues_opened > 12
    assert ledger.pulled and ledger.removed  # this seed pulls, and removes what closed or got a PR

    items = await all_items(runtime)
    assert set(items) == opened
    for key, session_id in ledger.pulled.items():
        assert (items[key].status, items[key].started_session_id) == ("started", session_id)
    for key, reason in ledger.removed.items():
        assert (items[key].status, items[key].removal_reason) == ("removed", reason)
    assert world.started_twice() == []
    # A pulled session, as spot-gate has it: a spot session of the API genesis (no parent: the
    # world pulls as no session), prompted with the issue URL.
    key, session_id = next(iter(ledger.pulled.items()))
    session = await runtime.call(spot.GET_SESSION, spot.SessionRef(session_id=session_id))
    assert (session.genesis, session.priority_class, session.parent_session_id) == ("api", "spot", None)
    assert session.prompt == f"{items[key].issue_url}\n\nPlease implement this"
    assert session.metadata["work_backlog_key"] == key

    # The snapshot job lists the gated repositories: each queued row whose issue the world closed
    # reads closed, flagged for the next pull to remove.
    closed = {issue_key(e.repo, e.number) for e in ledger.events if e.kind == "issue_closed"}
    await services["backlog"].app.snapshot.run()
    queued = {k: i for k, i in (await all_items(runtime)).items() if i.status == "queued"}
    assert queued
    for key, item in queued.items():
        assert item.github is not None
        assert item.github.state == ("closed" if key in closed else "open"), key
        assert item.github.leaves_as == ("issue_closed" if key in closed else None)


async def test_a_merged_issue_is_seen_by_the_liveness_sweep(stack, stack_setup, runtime) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issues gain PRs while queued, a pull removes them (`issue_has_open_pr`, a removal the sweep
    re-checks), the PRs merge (some with a closing keyword): the next sweep reads each as GitHub has it."""
    services, _url = stack
    sweep = services["backlog"].app.liveness.run
    world = GithubWorld(stack_setup, runtime, random.Random(3), initial_issues=4, rates=STILL)
    await world.seed()
    world.rates = replace(STILL, pr=1.0)
    await world.step()
    assert world.ledger.prs_opened == 4
    world.rates = replace(STILL, pull=1.0, pull_max=1)
    await world.step()
    assert world.ledger.pulled == {}  # all four were removed before anything could be pulled
    assert set(world.ledger.removed.values()) == {"issue_has_open_pr"} and len(world.ledger.removed) == 4

    await sweep()
    items = await all_items(runtime)
    assert {items[k].liveness_state for k in world.ledger.removed} == {"pr_open"}

    world.rates = replace(STILL, merge=1.0, closing_keyword=0.5)
    merged = world.evolve()
    assert world.ledger.prs_merged == 4
    closed = {issue_key(e.repo, e.number) for e in merged if e.kind == "issue_closed"}
    assert 0 < len(closed) < 4  # this seed: some PRs said "Fixes #n", some did not
    await sweep()
    items = await all_items(runtime)
    assert {k: items[k].liveness_state for k in world.ledger.removed} == {
        k: "issue_closed" if k in closed else "pr_merged_issue_open" for k in world.ledger.removed}
    assert world.started_twice() == []


class FailingStarts(DownBacklog):
    """A backlog that answers every pull with its item's start failed, retry-safe: what it says while
    spot-gate is down (the stall scenario's 17 minutes)."""

    async def call(self, spec: Any, payload: Any, *, timeout: float | None = None) -> Any:
        if spec.op != c.PULL.op:
            return await super().call(spec, payload, timeout=timeout)
        self.calls.append((spec.op, payload.model_dump_json()))
        await asyncio.sleep(0)  # an answer over the wire yields: a loop of them can be timed out
        return SimpleNamespace(started=[], removed=[], failed=[SimpleNamespace(key="api#1", retry_safe=True)])


async def test_a_start_that_keeps_failing_is_retried_once_a_step_not_in_a_loop() -> None:
    backlog = FailingStarts()
    with FakeGithub("token") as gh:
        world = GithubWorld(gh, backlog, random.Random(3), rates=replace(STILL, pull=1.0), run_id="t")  # type: ignore[arg-type]  # a stand-in backlog
        for _ in range(10):
            await asyncio.wait_for(world.step(), timeout=10)  # before the fix, one step never ended
    pulls = [body for op, body in backlog.calls if op == c.PULL.op]
    assert 10 <= len(pulls) <= 20  # each step: its own pull by count, and the one retry the last answer asked for
    assert world.ledger.start_failures == len(pulls)
