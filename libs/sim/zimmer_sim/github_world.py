"""A few repositories on the fake GitHub whose issues evolve over real time, fed to the backlog.

Each `step` opens issues, opens pull requests on them (cross-referenced or connected, as the fake
models timelines), merges some (most with a closing keyword, so the issue closes too), abandons
others (closed unmerged) and closes a few issues outright. New issues are appended to the backlog
over NATS (`append_item` / `append_items`), and now and then the world pulls the top items into
spot sessions, as the groomer would, naming in the pull's removals the queued issues it knows are
closed or have an open PR. The backlog's own liveness sweep and snapshot read the fake; the world
never asks them to.

Determinism: what happens on GitHub is drawn from one `random.Random`, and when and how much to
pull from a second one seeded from it, so the backlog's answers (or its absence) never change the
sequence of GitHub events. Timestamps are real time (the backlog judges PR staleness by them) and
are not part of an event.

Failure: a backlog error never escapes `step`. It is counted; a retry-safe one (`unavailable`,
`busy`) is retried on the next step with the same request and the same idempotency key, so the
backlog answers the first attempt's result instead of acting twice; any other is dropped.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from zimmer_common.contracts import backlog as c
from zimmer_runtime import RuntimeClient, RuntimeRequestError
from zimmer_sim.fake_github import FakeGithub, FakePR

EventKind = Literal["issue_opened", "pr_opened", "pr_merged", "pr_abandoned", "issue_closed"]
PULL_TIMEOUT = 15.0  # a pull spawns a session per item inside its deadline: more than one request's budget
WORDS = (("Fix", "Speed up", "Document", "Refactor", "Test", "Harden"),
         ("login redirect", "flaky upload", "rate limiter", "cache eviction", "CSV export", "webhook retries",
          "search paging", "settings page", "error budget", "image resize"))


@dataclass(frozen=True)
class GithubEvent:
    kind: EventKind
    repo: str  # owner/name
    number: int  # the issue
    pr: int | None = None


@dataclass(frozen=True)
class Rates:
    """Chances per step: a realistic default for a step every few seconds; tests turn them up."""

    new_issue: float = 0.25  # per repository
    pr: float = 0.06  # per open issue without an open PR
    connected: float = 0.3  # a new PR linked in the sidebar rather than referenced in its text
    merge: float = 0.12  # per open PR
    abandon: float = 0.04  # per open PR not merged this step
    closing_keyword: float = 0.75  # a merge closes its issue ("Fixes #n"); otherwise the issue stays open
    close_without_pr: float = 0.01  # per open issue: won't fix, duplicate
    pull: float = 0.2  # a pull this step
    pull_max: int = 3  # items a pull asks for (1..pull_max)


@dataclass
class GithubLedger:
    issues_opened: int = 0
    appended: set[str] = field(default_factory=set)  # keys the backlog accepted
    pulled: dict[str, int] = field(default_factory=dict)  # key -> the session a pull first said started it
    prs_opened: int = 0
    prs_merged: int = 0
    prs_abandoned: int = 0
    issues_closed: int = 0
    append_errors: int = 0  # failed appends (a whole request counts each append in it), retried or not
    pull_errors: int = 0  # failed pull requests, retried or not
    start_failures: int = 0  # items a pull answered in `failed`
    removed: dict[str, str] = field(default_factory=dict)  # key -> reason, removed by a pull's removals
    events: list[GithubEvent] = field(default_factory=list)
    sessions: dict[str, set[int]] = field(default_factory=dict)  # key -> every session a pull said started it

    def started_twice(self) -> list[str]:
        """Keys two pulls said were started by different sessions: an issue worked on twice."""
        return sorted(key for key, ids in self.sessions.items() if len(ids) > 1)


def issue_url(repo: str, number: int) -> str:
    return f"https://github.com/{repo}/issues/{number}"


def issue_key(repo: str, number: int) -> str:
    return c.canonical_key(f"{repo}#{number}")  # `{repo}#{n}` lower case, owner dropped: the backlog's spelling


class GithubWorld:
    def __init__(self, fake: FakeGithub, client: RuntimeClient, rng: random.Random, *,
                 repos: list[str] | None = None, initial_issues: int = 12, rates: Rates | None = None,
                 run_id: str | None = None, numbers_from: int = 1,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)):
        """`run_id` scopes the idempotency keys: the backlog keeps them across runs while the fake
        starts empty, so a second run must not replay the first run's answers (default: random,
        drawn from neither rng). `numbers_from`: the first issue number in each repository, for a
        run whose backlog already holds the low ones."""
        self.fake = fake
        self.client = client
        self.rng = rng
        self.pull_rng = random.Random(rng.getrandbits(64))  # pulls never shift GitHub's draws
        self.repos = list(repos or ["acme/api", "acme/web"])
        self.initial_issues = initial_issues
        self.rates = rates or Rates()
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.now = now
        self.ledger = GithubLedger()
        self._next_number = {repo: numbers_from for repo in self.repos}  # issues and PRs share numbers
        self._open_issues: list[tuple[str, int]] = []  # in the order they opened
        self._open_prs: list[tuple[str, int, FakePR]] = []  # (repo, issue, PR), in the order they opened
        self._to_append: list[c.AppendItem] = []
        self._accepted: dict[str, tuple[str, int]] = {}  # key -> issue, in the order the backlog accepted them
        self._to_pull: list[c.PullItems] = []
        self._pulls = 0

    # ---- the interface ---------------------------------------------------------------------------

    async def seed(self) -> None:
        """The initial issues, spread over the repositories, on the fake and appended."""
        for i in range(self.initial_issues):
            self._open_issue(self.repos[i % len(self.repos)])
        await self._append()

    async def step(self) -> None:
        """One tick: GitHub moves, new issues are appended, and sometimes a pull."""
        self.evolve()
        await self._append()
        wants_pull, count = self.pull_rng.random() < self.rates.pull, self.pull_rng.randint(1, self.rates.pull_max)
        if wants_pull and not self._to_pull:  # a groomer does not pile pulls up behind one still unanswered
            self._pulls += 1
            self._to_pull.append(c.PullItems(count=count, removals=self._removals(),
                                              idempotency_key=self._key(f"pull:{self._pulls}")))
        await self._pull()

    def started_twice(self) -> list[str]:
        return self.ledger.started_twice()

    # ---- GitHub ----------------------------------------------------------------------------------

    def evolve(self) -> list[GithubEvent]:
        """One step of GitHub, from `rng` alone; returns the events it made."""
        rates, rng, before = self.rates, self.rng, len(self.ledger.events)
        for repo in self.repos:
            if rng.random() < rates.new_issue:
                self._open_issue(repo)
        for repo, issue, pr in list(self._open_prs):
            if rng.random() < rates.merge:
                self._finish_pr(repo, issue, pr, "MERGED")
                if rng.random() < rates.closing_keyword:
                    self._close_issue(repo, issue)
            elif rng.random() < rates.abandon:
                self._finish_pr(repo, issue, pr, "CLOSED")
        with_pr = {(repo, issue) for repo, issue, _ in self._open_prs}
        for repo, issue in list(self._open_issues):
            if (repo, issue) in with_pr:
                continue
            if rng.random() < rates.pr:
                self._open_pr(repo, issue, connected=rng.random() < rates.connected)
            elif rng.random() < rates.close_without_pr:
                self._close_issue(repo, issue)
        return self.ledger.events[before:]

    def _number(self, repo: str) -> int:
        n = self._next_number[repo]
        self._next_number[repo] = n + 1
        return n

    def _event(self, kind: EventKind, repo: str, number: int, pr: int | None = None) -> None:
        self.ledger.events.append(GithubEvent(kind, repo, number, pr))

    def _open_issue(self, repo: str) -> None:
        number = self._number(repo)
        title = f"{self.rng.choice(WORDS[0])} {self.rng.choice(WORDS[1])}"
        cost = self.rng.choices(("small", "medium", "large"), (6, 3, 1))[0]
        self.fake.issue(repo, number, title=title)
        self._open_issues.append((repo, number))
        self.ledger.issues_opened += 1
        self._event("issue_opened", repo, number)
        self._to_append.append(c.AppendItem(
            key=issue_key(repo, number), issue_url=issue_url(repo, number), repo=repo, title=title,
            estimated_cost=cost, gate_verdict="cleared", added_by="zimmer-sim",
            idempotency_key=self._key(f"append:{issue_key(repo, number)}")))

    def _open_pr(self, repo: str, issue: int, *, connected: bool) -> None:
        number = self._number(repo)
        pr = FakePR(repo, number, "OPEN", self.now(), connected=connected)
        with self.fake.lock:  # the server's thread reads timelines and the listing
            self.fake.issues[(repo, issue)].prs.append(pr)
            self.fake.open_prs[(repo, number)] = f"Closes #{issue}" if connected else f"Refs #{issue}"
        self._open_prs.append((repo, issue, pr))
        self.ledger.prs_opened += 1
        self._event("pr_opened", repo, issue, number)

    def _finish_pr(self, repo: str, issue: int, pr: FakePR, state: Literal["MERGED", "CLOSED"]) -> None:
        with self.fake.lock:
            pr.state, pr.updated_at = state, self.now()
            self.fake.open_prs.pop((repo, pr.number), None)
        self._open_prs.remove((repo, issue, pr))
        if state == "MERGED":
            self.ledger.prs_merged += 1
            self._event("pr_merged", repo, issue, pr.number)
        else:
            self.ledger.prs_abandoned += 1
            self._event("pr_abandoned", repo, issue, pr.number)

    def _close_issue(self, repo: str, issue: int) -> None:
        with self.fake.lock:
            self.fake.issues[(repo, issue)].state = "CLOSED"
        self._open_issues.remove((repo, issue))
        self.ledger.issues_closed += 1
        self._event("issue_closed", repo, issue)

    # ---- the backlog -----------------------------------------------------------------------------

    def _key(self, what: str) -> str:
        return f"sim-github:{self.run_id}:{what}"

    def _removals(self) -> list[c.Removal]:
        """What a groomer would take off the queue before pulling: the world's queued issues (as far
        as the backlog's answers told it) that closed or have an open PR."""
        open_issues, with_pr = set(self._open_issues), {(repo, issue) for repo, issue, _ in self._open_prs}
        removals: list[c.Removal] = []
        for key, issue in self._accepted.items():
            if key in self.ledger.pulled or key in self.ledger.removed:
                continue
            if issue not in open_issues:
                removals.append(c.Removal(key=key, reason="issue_closed"))
            elif issue in with_pr:
                removals.append(c.Removal(key=key, reason="issue_has_open_pr"))
        return removals[:50]  # PullItems' bound

    async def _append(self) -> None:
        """Send every append waiting (new, or a retry-safe failure of an earlier step)."""
        batch, self._to_append = self._to_append[:c.APPEND_MANY_MAX], self._to_append[c.APPEND_MANY_MAX:]
        if not batch:
            return
        outcomes: list[tuple[c.AppendResult | None, RuntimeRequestError | None]]
        try:
            if len(batch) == 1:
                outcomes = [(await self.client.call(c.APPEND, batch[0]), None)]
            else:
                answer = await self.client.call(c.APPEND_MANY, c.AppendMany(appends=[
                    c.CallerAppend(item=item, caller=self.client.config.name) for item in batch]))
                outcomes = [(o.result, None if o.error is None else
                             RuntimeRequestError(o.error.code, o.error.message, o.error.details))
                            for o in answer.outcomes]
        except RuntimeRequestError as exc:
            outcomes = [(None, exc)] * len(batch)  # append_items refuses as a whole only when it refused each one
        for item, (result, error) in zip(batch, outcomes, strict=True):
            if result is not None:
                self.ledger.appended.add(result.item.key)
                self._accepted[result.item.key] = (item.repo or "", int(item.key.rpartition("#")[2]))
                continue
            self.ledger.append_errors += 1
            if error is not None and error.retry_safe:
                self._to_append.append(item)  # the same request, so the same idempotency key

    async def _pull(self) -> None:
        """Send the pulls waiting, oldest first, each once a step: a retry-safe failure, and the pull
        by keys an answer's retry-safe `failed` asks for, wait for the next step. (Sent at once, a
        start that keeps failing while spot-gate is down was a pull loop: 86,434 in a 17-minute stall.)"""
        for _ in range(len(self._to_pull)):
            request = self._to_pull[0]
            try:
                result = await self.client.call(c.PULL, request, timeout=PULL_TIMEOUT)
            except RuntimeRequestError as exc:
                self.ledger.pull_errors += 1
                if exc.retry_safe:
                    return
                self._to_pull.pop(0)
                continue
            self._to_pull.pop(0)
            self._note(result)

    def _note(self, result: c.PullResult) -> None:
        for started in result.started:
            self.ledger.pulled.setdefault(started.item.key, started.session_id)
            self.ledger.sessions.setdefault(started.item.key, set()).add(started.session_id)
        for item in result.removed:
            self.ledger.removed[item.key] = item.removal_reason or ""
        self.ledger.start_failures += len(result.failed)
        retry = [f.key for f in result.failed if f.retry_safe]
        if retry:  # "a pull by these keys resolves it": the spawn may have happened, so never by count
            self._pulls += 1
            self._to_pull.append(c.PullItems(keys=retry[:10], idempotency_key=self._key(f"pull:{self._pulls}")))
