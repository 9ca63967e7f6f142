"""The backlog liveness sweep's benchmark group `backlog_liveness`.

- probe: one pass over 200 candidates across 5 repositories (40 issues each, two pull requests
  on every timeline) with `GithubClient.probe`, against the fake GitHub of the tests and the
  simulated fleet (zimmer_sim.fake_github: a real HTTP server on 127.0.0.1 executing the GraphQL
  with graphql-core). The pass must take ⌈200/40⌉ = 5 requests, counted both by the client
  (`Probe.requests`) and by the server (its `requests` list); any other count, or an issue not
  read with both its pull requests, fails the group. Baseline in the same run: the same 200
  issues probed one request per row (`probe([ref])` 200 times, 200 requests). Rounds alternate
  which pass goes first.
- band decision: `bands.decide` over 100,000 simulated hourly passes (seeded random stranded
  counts and oldest ages, each decision's mark fed into the next as the sweep does). The harness
  has no baseline for pure-Python work, so the baseline is a plain loop over the same 100,000
  inputs doing one tuple comparison and one datetime addition each, in the same rounds.

Needs no embedded server: the fake GitHub runs in the bench process (its threads are in the
bench's RSS). See bench/README.md.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import BenchContext, Entry, Series, Sizes, peak_rss_mb, rss_mb

GROUP = "backlog_liveness"
REPOS = 5
ISSUES_PER_REPO = 40  # 200 candidates, the sweep's most a pass
BATCH = 40  # seed 003: one GraphQL request per 40 issues; the pass must make ⌈200/40⌉ requests, whatever the client says
PRS_PER_ISSUE = 2
TOKEN = "bench-token"
PASSES = 100_000  # simulated hourly passes of the band decision
QUICK_PROBE_ROUNDS = 2  # a one-request-per-row pass takes seconds (see bench/README.md); keeps --quick near 20 s
SEED = 20_250_401
HOUR = timedelta(hours=1)
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def simulated_passes(n: int, seed: int = SEED) -> list[tuple[int, timedelta, datetime]]:
    """`n` hourly passes' (stranded count, oldest stranded age, now), seeded: populations that
    appear, grow in steps and bursts, lose their oldest row now and then, and are cleared by
    triage; built before the clock starts."""
    rng = random.Random(seed)
    out: list[tuple[int, timedelta, datetime]] = []
    count, since, now = 0, T0, T0
    for _ in range(n):
        now += HOUR
        if count == 0:
            if rng.random() < 0.02:  # a new population, its oldest row stranded up to 10 days ago
                count, since = rng.randint(1, 30), now - timedelta(hours=rng.randint(0, 240))
        else:
            roll = rng.random()
            if roll < 0.002:  # triage clears it
                count = 0
            elif roll < 0.006:  # a burst of stranded rows
                count = min(1200, count + rng.randint(10, 200))
            else:
                count = max(0, min(1200, count + rng.choice((-1, 0, 0, 0, 1, 2))))
            if count and rng.random() < 0.01:  # the oldest row is resolved: the next one is younger
                since = min(now, since + timedelta(hours=rng.randint(1, 72)))
        out.append((count, now - since if count else timedelta(0), now))
    return out


def _decide_pass(passes: list[tuple[int, timedelta, datetime]]) -> tuple[float, int]:
    """Every simulated pass's decision, each one's mark fed into the next; (seconds, pages)."""
    from zimmer_backlog.domain.bands import decide

    mark = None
    pages = 0
    started = time.perf_counter()
    for count, age, now in passes:
        decision = decide(count, age, mark, now)
        if decision.page is not None:
            pages += 1
        mark = decision.mark
    return time.perf_counter() - started, pages


def _loop_pass(passes: list[tuple[int, timedelta, datetime]]) -> tuple[float, int]:
    """The baseline: the same inputs, one tuple comparison and one datetime addition each."""
    prev: tuple[int, timedelta] = (0, timedelta(0))
    hits = 0
    last = T0
    started = time.perf_counter()
    for count, age, now in passes:
        key = (count, age)
        if key > prev:
            hits += 1
        prev = key
        last = now + HOUR
    seconds = time.perf_counter() - started
    return seconds, hits + (last > T0)


async def bench_liveness(sizes: Sizes, ctx: BenchContext) -> list[Entry]:
    from zimmer_backlog.handlers.github import GithubClient, IssueRef
    from zimmer_sim.fake_github import FakeGithub, FakePR
    quick = sizes.rounds <= 3
    total = REPOS * ISSUES_PER_REPO
    repos = [f"acme/liveness-{r}" for r in range(REPOS)]
    refs = [IssueRef(repo, n) for repo in repos for n in range(1, ISSUES_PER_REPO + 1)]
    want_batched = math.ceil(total / BATCH)  # 5 for the whole repository set, not 200

    batched = Series("backlog.liveness.probe.batched", "issues/s", False, total)
    per_row = Series("backlog.liveness.probe.per_row", "issues/s", False, total)
    pass_ms: dict[str, list[float]] = {"batched": [], "per_row": []}
    requests: dict[str, list[int]] = {"batched": [], "per_row": []}

    rss_before = rss_mb()
    with FakeGithub(TOKEN) as gh:
        updated = datetime(2025, 1, 1, tzinfo=UTC)
        for repo in repos:
            for n in range(1, ISSUES_PER_REPO + 1):
                gh.issue(repo, n, prs=[FakePR(repo, 1000 + n, "OPEN", updated),
                                       FakePR(repo, 2000 + n, "MERGED", updated, connected=True)][:PRS_PER_ISSUE])
        client = GithubClient(gh.url, TOKEN)

        def check(what: str, evidence: dict[Any, Any], unreadable: dict[Any, str], made: int, want: int) -> None:
            seen = len(gh.graphql_requests())
            if made != want or seen != want:
                raise RuntimeError(f"{what} pass over {total} issues made {made} requests by the client's count and "
                                   f"{seen} by the server's, want {want}")
            if unreadable or len(evidence) != total:
                first = next(iter(unreadable.items()), None)
                raise RuntimeError(f"{what} pass read {len(evidence)} of {total} issues; unreadable: {first}")
            short = [ref for ref, ev in evidence.items() if len(ev.pull_requests) != PRS_PER_ISSUE]
            if short:
                raise RuntimeError(f"{what} pass: {len(short)} issues without their {PRS_PER_ISSUE} PRs, e.g. {short[0]}")

        async def run_batched() -> float:
            gh.requests.clear()
            started = time.perf_counter()
            probe = await client.probe(refs)
            seconds = time.perf_counter() - started
            check("batched", probe.evidence, probe.unreadable, probe.requests, want_batched)
            requests["batched"].append(probe.requests)
            return seconds

        async def run_per_row() -> float:
            gh.requests.clear()
            evidence: dict[Any, Any] = {}
            unreadable: dict[Any, str] = {}
            made = 0
            started = time.perf_counter()
            for ref in refs:
                probe = await client.probe([ref])
                evidence.update(probe.evidence)
                unreadable.update(probe.unreadable)
                made += probe.requests
            seconds = time.perf_counter() - started
            check("one-request-per-row", evidence, unreadable, made, total)
            requests["per_row"].append(made)
            return seconds

        # Warm-up, untimed: imports, the server's threads, graphql-core's caches.
        await client.probe(refs)
        for ref in refs[:10]:
            await client.probe([ref])
        for round_no in range(QUICK_PROBE_ROUNDS if quick else sizes.rounds):
            order = [("batched", run_batched), ("per_row", run_per_row)]
            for name, run in (order if round_no % 2 == 0 else order[::-1]):
                seconds = await run()
                pass_ms[name].append(seconds * 1000)
                (batched if name == "batched" else per_row).add_rate(total / seconds)
    probe_rss = rss_mb()
    probe_peak = max(probe_rss, peak_rss_mb())  # ru_maxrss can trail the current RSS by a few pages

    passes = simulated_passes(PASSES)
    decide_rate = Series("backlog.liveness.band_decide", "passes/s", False, PASSES)
    loop_rate = Series("python.loop.tuple_cmp_dt_add", "iter/s", False, PASSES)
    pages: set[int] = set()
    _decide_pass(passes[:1000])  # warm-up, untimed
    for round_no in range(sizes.rounds):
        for name in (("decide", "loop") if round_no % 2 == 0 else ("loop", "decide")):
            if name == "decide":
                seconds, paged = _decide_pass(passes)
                pages.add(paged)
                decide_rate.add_rate(PASSES / seconds)
            else:
                seconds, _ = _loop_pass(passes)
                loop_rate.add_rate(PASSES / seconds)
    if len(pages) != 1:
        raise RuntimeError(f"the band decision is not deterministic: pages per {PASSES} passes {sorted(pages)}")
    decide_rss = rss_mb()
    decide_peak = max(decide_rss, peak_rss_mb())
    del passes

    probe_extra: dict[str, Any] = {
        "requests_per_pass": {"batched": requests["batched"][0], "per_row": requests["per_row"][0],
                              "expected_batched": want_batched, "issues": total, "repositories": REPOS},
        "round_requests": requests,
        "pass_ms": {"batched": statistics.median(pass_ms["batched"]), "per_row": statistics.median(pass_ms["per_row"]),
                    "round_values": pass_ms},
        "rss_mb": {"before": rss_before, "after": probe_rss, "peak": probe_peak},
    }
    probe_extra["footnote"] = (
        f"requests a pass: {requests['batched'][0]} batched (⌈{total}/{BATCH}⌉ over {REPOS} repositories), "
        f"{requests['per_row'][0]} one per row; pass wall time (median) {probe_extra['pass_ms']['batched']:,.0f} ms vs "
        f"{probe_extra['pass_ms']['per_row']:,.0f} ms; RSS {probe_rss:.1f} MB ({probe_rss - rss_before:+.1f}), "
        f"peak {probe_peak:.1f} MB")
    decide_extra: dict[str, Any] = {
        "pages": pages.pop(), "seed": SEED, "simulated_hours": PASSES,
        "rss_mb": {"before": probe_rss, "after": decide_rss, "peak": decide_peak},
    }
    decide_extra["footnote"] = (
        f"{PASSES:,} simulated hourly passes (seed {SEED}) paged {decide_extra['pages']} times; "
        f"RSS {decide_rss:.1f} MB ({decide_rss - probe_rss:+.1f} with the inputs held), peak {decide_peak:.1f} MB")
    return [
        Entry(GROUP, batched, per_row, extra=probe_extra,
              note=f"{total} issues over {REPOS} repositories against the fake GitHub, {want_batched} requests a pass; "
                   f"ratio = batched ÷ one request per row ({total} requests): above 1 is what batching 40 a request "
                   "saves"),
        Entry(GROUP, decide_rate, loop_rate, extra=decide_extra,
              note="bands.decide over 100,000 simulated hourly passes, each mark fed into the next; ratio = decisions/s ÷ "
                   "a plain loop's iterations/s (one tuple comparison + one datetime addition each, same inputs): "
                   "1/ratio is what one decision costs in trivial loop iterations"),
    ]
