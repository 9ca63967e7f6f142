"""The backlog's one GitHub client: the import's contents read, the liveness sweep's issue
timelines (GraphQL, 40 issues a request, aliased) and the Issues view's open-issue listing.

Every call is bounded twice: httpx's per-phase timeouts and a total deadline around the whole
exchange, so a server that drips bytes cannot hold a pass. A timeout is "ask again", never a
conclusion: it surfaces as `GithubUnavailable` and the caller records the rows unknown. A
rate-limit answer raises `RateLimited`, which stops the pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from zimmer_backlog.domain.issues import GITHUB_ISSUE_URL
from zimmer_backlog.domain.liveness import IssueEvidence, PullRequest
from zimmer_common.tls import client_tls

log = logging.getLogger("zimmer.backlog.github")

DEFAULT_API_URL = "https://api.github.com"
ISSUES_PER_REQUEST = 40  # seed 003: one GraphQL request per 40 issues
TIMELINE_PAGE = 100  # GraphQL's largest page
TIMELINE_PAGES_MAX = 5  # an issue referenced by more than 500 PRs reads unknown rather than half-read
LISTING_PAGES_MAX = 10  # the Issues view's snapshot lists at most 1,000 open issues a repository


class GithubUnavailable(Exception):
    """GitHub could not be read: timeout, 5xx, a refused credential or an answer we cannot use."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class RateLimited(GithubUnavailable):
    def __init__(self, detail: str, reset_at: str | None = None):
        super().__init__("rate_limited", detail)
        self.reset_at = reset_at


@dataclass(frozen=True, order=True)
class IssueRef:
    repo: str  # owner/name, lower case: the repository the issue URL names (#1188), never the row's repo
    number: int

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]


def issue_ref(issue_url: str | None) -> IssueRef | None:
    """The repository the issue URL names (#1188: never the row's `repo`, where a session checks out)."""
    m = GITHUB_ISSUE_URL.match(issue_url or "")
    return IssueRef(f"{m['owner']}/{m['repo']}".lower(), int(m["number"])) if m else None


@dataclass
class Probe:
    """One probe's outcome: evidence per issue it could read; for the rest, why not."""

    evidence: dict[IssueRef, IssueEvidence] = field(default_factory=dict)
    unreadable: dict[IssueRef, str] = field(default_factory=dict)
    unreadable_repos: set[str] = field(default_factory=set)
    rate_limited: RateLimited | None = None
    requests: int = 0


@dataclass(frozen=True)
class ListedIssue:
    number: int
    title: str


@dataclass(frozen=True)
class Listing:
    repo: str
    issues: list[ListedIssue]
    complete: bool  # False when the listing stopped at LISTING_PAGES_MAX


_PR_FIELDS = "number state merged mergedAt updatedAt repository { nameWithOwner }"
_TIMELINE = ("timelineItems(first: %d, itemTypes: [CROSS_REFERENCED_EVENT, CONNECTED_EVENT]%s) {"
             " pageInfo { hasNextPage endCursor }"
             " nodes { __typename"
             " ... on CrossReferencedEvent { source { __typename ... on PullRequest { " + _PR_FIELDS + " } } }"
             " ... on ConnectedEvent { subject { __typename ... on PullRequest { " + _PR_FIELDS + " } } } } }")


def timeline_query(batch: list[IssueRef]) -> tuple[str, dict[str, Any]]:
    """One aliased query for a batch: `r<i>` per repository (owner and name as variables),
    `i<number>` per issue inside it."""
    repos = sorted({ref.repo for ref in batch})
    variables: dict[str, Any] = {}
    params, parts = [], []
    for i, repo in enumerate(repos):
        owner, name = repo.split("/", 1)
        variables[f"o{i}"], variables[f"n{i}"] = owner, name
        params.append(f"$o{i}: String!, $n{i}: String!")
        issues = " ".join(f"i{ref.number}: issue(number: {int(ref.number)}) {{ number state {_TIMELINE % (TIMELINE_PAGE, '')} }}"
                          for ref in sorted(r for r in batch if r.repo == repo))
        parts.append(f"r{i}: repository(owner: $o{i}, name: $n{i}) {{ {issues} }}")
    return f"query({', '.join(params)}) {{ rateLimit {{ remaining resetAt }} {' '.join(parts)} }}", variables


def _more_query() -> str:
    return ("query($o: String!, $n: String!, $num: Int!, $after: String!) { repository(owner: $o, name: $n) {"
            " issue(number: $num) { " + _TIMELINE % (TIMELINE_PAGE, ", after: $after") + " } } }")


def _pull_requests(nodes: Iterable[dict[str, Any] | None]) -> list[PullRequest]:
    found = []
    for node in nodes:
        if not node:
            continue
        pr = node.get("source") or node.get("subject") or {}
        if pr.get("__typename") != "PullRequest":
            continue  # an issue cross-referencing this one is no pull request
        found.append(PullRequest(repo=str((pr.get("repository") or {}).get("nameWithOwner", "")).lower(),
                                 number=int(pr["number"]), state=str(pr["state"]), merged=bool(pr.get("merged")),
                                 updated_at=datetime.fromisoformat(str(pr["updatedAt"]).replace("Z", "+00:00"))))
    return found


class GithubClient:
    def __init__(self, api_url: str = DEFAULT_API_URL, token: str = "", *, timeout: float = 10.0,
                 total_timeout: float = 30.0, on_request: Any = None):
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.total_timeout = total_timeout
        self.on_request = on_request or (lambda api, outcome: None)  # metrics hook

    def _headers(self, accept: str = "application/vnd.github+json") -> dict[str, str]:
        headers = {"Accept": accept, "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "zimmer-backlog"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _client(self) -> httpx.AsyncClient:
        """One HTTP client per operation (a pass's probe, a listing), on the process's one TLS
        context (building a context loads the CA bundle, ~20 ms: most of a request's cost)."""
        return httpx.AsyncClient(timeout=self.timeout, follow_redirects=True, verify=client_tls())

    async def _send(self, client: httpx.AsyncClient, api: str, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            async with asyncio.timeout(self.total_timeout):
                resp = await client.request(method, f"{self.api_url}{path}", **kw)
        except (TimeoutError, httpx.TimeoutException) as exc:
            self.on_request(api, "timeout")
            raise GithubUnavailable("timeout", f"GitHub did not answer within {self.total_timeout:g}s") from exc
        except httpx.HTTPError as exc:
            self.on_request(api, "error")
            raise GithubUnavailable("connection", f"{type(exc).__name__}: {exc}") from exc
        remaining = resp.headers.get("x-ratelimit-remaining")
        if resp.status_code == 429 or (resp.status_code == 403 and (remaining == "0" or "retry-after" in resp.headers)):
            self.on_request(api, "rate_limited")
            raise RateLimited(f"GitHub answered {resp.status_code} (rate limit)", resp.headers.get("x-ratelimit-reset"))
        if resp.status_code >= 500:
            self.on_request(api, "server_error")
            raise GithubUnavailable("server_error", f"GitHub answered {resp.status_code}")
        self.on_request(api, "ok" if resp.status_code < 400 else "refused")
        return resp

    # ---- contents (the import) ---------------------------------------------------------------

    async def contents(self, repo: str, path: str, ref: str) -> bytes:
        async with self._client() as client:
            resp = await self._send(client, "rest", "GET", f"/repos/{repo}/contents/{path}", params={"ref": ref},
                                    headers=self._headers("application/vnd.github.raw+json"))
        if resp.status_code != 200:
            raise GithubUnavailable("refused", f"GitHub answered {resp.status_code} for {repo}/{path}@{ref}")
        return resp.content

    # ---- issue timelines (the liveness sweep) -------------------------------------------------

    async def _graphql(self, client: httpx.AsyncClient, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        resp = await self._send(client, "graphql", "POST", "/graphql", json={"query": query, "variables": variables},
                                headers=self._headers())
        if resp.status_code != 200:
            raise GithubUnavailable("refused", f"GitHub answered {resp.status_code} to a GraphQL query")
        try:
            body = resp.json()
        except ValueError as exc:
            raise GithubUnavailable("bad_answer", "the GraphQL answer is not JSON") from exc
        errors = body.get("errors") or []
        if any(e.get("type") == "RATE_LIMITED" for e in errors):
            raise RateLimited("GitHub's GraphQL rate limit is spent")
        if not isinstance(body.get("data"), dict):
            raise GithubUnavailable("bad_answer", "; ".join(str(e.get("message")) for e in errors) or "no data")
        return body

    async def probe(self, refs: Iterable[IssueRef]) -> Probe:
        """Read each issue's timeline in the repository its URL names, 40 issues a request across
        repositories. A repository GitHub will not show is unreadable as a whole; a single missing
        issue is unreadable alone; a rate-limit answer stops the probe (every ref not read yet is
        unreadable) and is returned, not raised."""
        todo = sorted(set(refs))
        out = Probe()
        async with self._client() as client:
            await self._probe(client, todo, out)
        return out

    async def _probe(self, client: httpx.AsyncClient, todo: list[IssueRef], out: Probe) -> None:
        for start in range(0, len(todo), ISSUES_PER_REQUEST):
            batch = todo[start:start + ISSUES_PER_REQUEST]
            try:
                out.requests += 1
                body = await self._graphql(client, *timeline_query(batch))
                await self._read_batch(client, batch, body, out)
            except RateLimited as exc:
                out.rate_limited = exc
                for ref in todo[start:]:
                    if ref not in out.evidence:
                        out.unreadable[ref] = "rate limited: not probed this pass"
                        out.unreadable_repos.add(ref.repo)
                break
            except (GithubUnavailable, KeyError, TypeError, ValueError, AttributeError) as exc:
                # An answer of the wrong shape is as unreadable as no answer: no conclusion from it.
                why = str(exc) if isinstance(exc, GithubUnavailable) else f"bad_answer: {type(exc).__name__}: {exc}"
                for ref in batch:
                    if ref not in out.evidence:
                        out.unreadable[ref] = why
                        out.unreadable_repos.add(ref.repo)

    async def _read_batch(self, client: httpx.AsyncClient, batch: list[IssueRef], body: dict[str, Any], out: Probe) -> None:
        data = body["data"]
        errors = {tuple(e.get("path") or ()): e for e in body.get("errors") or []}
        repos = sorted({ref.repo for ref in batch})
        for i, repo in enumerate(repos):
            node = data.get(f"r{i}")
            refs = [r for r in batch if r.repo == repo]
            if node is None:
                why = str(errors.get((f"r{i}",), {}).get("message") or "repository not readable")
                for ref in refs:
                    out.unreadable[ref] = why
                out.unreadable_repos.add(repo)
                continue
            for ref in refs:
                issue = node.get(f"i{ref.number}")
                if issue is None:  # a 404 or a pull request with that number: no conclusion
                    out.unreadable[ref] = str(errors.get((f"r{i}", f"i{ref.number}"), {}).get("message")
                                              or "no such issue")
                    continue
                timeline = issue["timelineItems"]
                prs = _pull_requests(timeline.get("nodes") or [])
                if timeline["pageInfo"]["hasNextPage"]:
                    try:
                        more = await self._rest_of_timeline(client, ref, timeline["pageInfo"]["endCursor"], out)
                    except RateLimited:
                        raise
                    except GithubUnavailable as exc:
                        out.unreadable[ref] = str(exc)
                        out.unreadable_repos.add(ref.repo)
                        continue
                    if more is None:
                        out.unreadable[ref] = f"more than {TIMELINE_PAGE * TIMELINE_PAGES_MAX} references"
                        continue
                    prs += more
                out.evidence[ref] = IssueEvidence(open=issue["state"] == "OPEN", pull_requests=tuple(prs))

    async def _rest_of_timeline(self, client: httpx.AsyncClient, ref: IssueRef, cursor: str,
                                out: Probe) -> list[PullRequest] | None:
        prs: list[PullRequest] = []
        for _ in range(TIMELINE_PAGES_MAX - 1):
            out.requests += 1
            body = await self._graphql(client, _more_query(), {"o": ref.owner, "n": ref.name, "num": ref.number,
                                                       "after": cursor})
            timeline = (((body["data"].get("repository") or {}).get("issue") or {}).get("timelineItems"))
            if timeline is None:
                return None
            prs += _pull_requests(timeline.get("nodes") or [])
            if not timeline["pageInfo"]["hasNextPage"]:
                return prs
            cursor = timeline["pageInfo"]["endCursor"]
        return None

    # ---- open issues (the Issues view's snapshot) ---------------------------------------------

    async def open_issues(self, repo: str) -> Listing:
        found: list[ListedIssue] = []
        async with self._client() as client:
            return await self._list(client, repo, found)

    async def _list(self, client: httpx.AsyncClient, repo: str, found: list[ListedIssue]) -> Listing:
        for page in range(1, LISTING_PAGES_MAX + 1):
            resp = await self._send(client, "rest", "GET", f"/repos/{repo}/issues", headers=self._headers(),
                                    params={"state": "open", "per_page": 100, "page": page})
            if resp.status_code != 200:
                raise GithubUnavailable("refused", f"GitHub answered {resp.status_code} listing {repo}'s issues")
            try:
                rows = resp.json()
            except ValueError as exc:
                raise GithubUnavailable("bad_answer", f"{repo}'s issue listing is not JSON") from exc
            if not isinstance(rows, list):
                raise GithubUnavailable("bad_answer", f"{repo}'s issue listing is not a list")
            found += [ListedIssue(int(r["number"]), str(r.get("title") or "")) for r in rows
                      if isinstance(r, dict) and "pull_request" not in r]  # the issues API lists PRs too
            if len(rows) < 100 or 'rel="next"' not in resp.headers.get("link", 'rel="next"'):
                return Listing(repo, found, complete=True)
        return Listing(repo, found, complete=False)
